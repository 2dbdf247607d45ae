import GatewayConfiguration

/// The parsed command line of one verb: `--flag`s, `--option VALUE` (or `--option=VALUE`)
/// and positional arguments. `--` ends the options.
struct Arguments: Equatable {
    var flags: Set<String> = []
    var values: [String: String] = [:]
    var positionals: [String] = []

    /// The outcome of parsing: the arguments, or a request for the verb's help.
    enum Parsed: Equatable {
        case help
        case arguments(Arguments)
    }

    /// Parses `args` for `verb`, which accepts the `flags` and `options` given (with their
    /// dashes) and at most `maxPositionals` positionals. `--help`/`-h` wins wherever it
    /// stands as an option. Throws the first misuse.
    static func parse(_ args: [String], verb: String, flags: [String] = [], options: [String] = [],
                      maxPositionals: Int = 0) throws(UsageError) -> Parsed {
        var parsed = Arguments()
        var i = 0
        var optionsEnded = false
        while i < args.count {
            let arg = args[i]
            i += 1
            if optionsEnded || !arg.hasPrefix("-") || arg == "-" {
                guard parsed.positionals.count < maxPositionals else {
                    throw UsageError("unexpected argument \"\(arg)\"", verb: verb)
                }
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" { optionsEnded = true; continue }
            if arg == "--help" || arg == "-h" { return .help }
            var name = arg
            var inlineValue: String?
            if let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inlineValue = String(arg[arg.index(after: eq)...])
            }
            if flags.contains(name) {
                guard inlineValue == nil else { throw UsageError("\(name) takes no value", verb: verb) }
                guard !parsed.flags.contains(name) else { throw UsageError("\(name) given twice", verb: verb) }
                parsed.flags.insert(name)
            } else if options.contains(name) {
                guard parsed.values[name] == nil else { throw UsageError("\(name) given twice", verb: verb) }
                if let inlineValue {
                    parsed.values[name] = inlineValue
                } else {
                    guard i < args.count else { throw UsageError("\(name) needs a value", verb: verb) }
                    parsed.values[name] = args[i]
                    i += 1
                }
            } else {
                let near = DidYouMean.nearest(name, among: flags + options).map { "; did you mean \($0)?" } ?? ""
                throw UsageError("unknown option \(name)\(near)", verb: verb)
            }
        }
        return .arguments(parsed)
    }
}
