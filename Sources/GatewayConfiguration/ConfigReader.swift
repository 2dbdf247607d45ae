import Foundation
import Routing
import VisibleText

/// The typed reading of JSON values for the config parser: each accessor either returns a
/// value or records why it could not, so that one pass reports every problem of a file.
/// Overrides from the environment are looked up here, before the file's own value.
final class ConfigReader {
    let file: String
    /// Relative paths in the file are resolved against this directory.
    let baseDirectory: String
    /// Relative paths from environment variables are resolved against this one.
    let workingDirectory: String
    let overrides: [String: (variable: String, value: String)]
    private(set) var problems: [ConfigError] = []

    init(file: String, baseDirectory: String, workingDirectory: String, environment: [String: String]) {
        self.file = file
        self.baseDirectory = baseDirectory
        self.workingDirectory = workingDirectory
        self.overrides = ConfigEnvironment.active(in: environment)
    }

    var hasErrors: Bool { problems.contains { !$0.isWarning } }

    /// Whether an error was recorded at `path` or under it (later checks of the same value
    /// would only repeat it). Whole keys: `apps.acme` is not under `apps.ac`.
    func hasProblem(at path: JSONPath) -> Bool {
        let plain = path.plain
        return problems.contains {
            !$0.isWarning && ($0.path == plain || $0.path.hasPrefix(plain + ".") || $0.path.hasPrefix(plain + " ("))
        }
    }

    func error(_ path: JSONPath, _ problem: String, fix: String) {
        problems.append(ConfigError(.error, file: file, path: path.description, problem: problem, fix: fix))
    }

    func warning(_ path: JSONPath, _ problem: String, fix: String) {
        problems.append(ConfigError(.warning, file: file, path: path.description, problem: problem, fix: fix))
    }

    // MARK: Values

    /// A value and where it came from.
    struct Found {
        let value: Any
        let path: JSONPath
        /// True when an environment variable supplied it.
        var fromEnvironment: Bool { path.variable != nil }
    }

    /// The value of `key`, the environment's override first; nil when absent. A JSON `null`
    /// is a value like any other: the typed accessors refuse it ("expected a string, found
    /// null"), so a null never passes for an absent key, whose default would then apply
    /// without a word, nor makes what holds it vanish. The two keys where null means
    /// something (`apns.ca_file`, `fallback_alert.sound`) say so where they are read.
    func lookup(_ object: [String: Any], _ key: String, in parent: JSONPath) -> Found? {
        var path = parent.appending(key)
        if let override = overrides[path.plain] {
            path.variable = override.variable
            return Found(value: override.value, path: path)
        }
        guard let value = object[key] else { return nil }
        return Found(value: value, path: path)
    }

    /// `fix` for a value of the wrong type at `found`; for a null under an optional key it
    /// adds how to ask for the default, which null does not do.
    func typeFix(_ fix: String, for found: Found, optional: Bool) -> String {
        guard found.value is NSNull, optional else { return fix }
        return fix + ", or leave \"\(found.path.key)\" out for its default (null is not the default)"
    }

    /// The object under `key`; an empty one when absent (its required keys are then reported
    /// one by one), nil after recording a type error.
    func section(_ object: [String: Any], _ key: String, in parent: JSONPath) -> [String: Any]? {
        guard let found = lookup(object, key, in: parent) else { return [:] }
        guard let section = found.value as? [String: Any] else {
            error(found.path, "expected an object, found \(JSONKind(found.value).name)",
                  fix: typeFix("write an object: \"\(key)\": { … }", for: found, optional: true))
            return nil
        }
        return section
    }

    /// A string; records "missing" when `required` and absent, and any type error.
    func string(_ object: [String: Any], _ key: String, in parent: JSONPath, required: Bool,
                example: String) -> (String, JSONPath)? {
        guard let found = lookup(object, key, in: parent) else {
            if required { missing(parent.appending(key), example: "\"\(example)\"") }
            return nil
        }
        guard let text = found.value as? String else {
            error(found.path, "expected a string, found \(JSONKind(found.value).name)",
                  fix: typeFix("write a string in quotes, such as \"\(example)\"", for: found, optional: !required))
            return nil
        }
        return (text, found.path)
    }

    /// A whole number from 1 to `most`; `fallback` when absent. Every number has an upper
    /// bound: times and counts from the config meet arithmetic (a ring timeout in
    /// milliseconds is added to times), and an absurd value must be an error, not a trap.
    func positiveInteger(_ object: [String: Any], _ key: String, in parent: JSONPath, fallback: Int, most: Int) -> Int? {
        integer(object, key, in: parent, fallback: fallback, least: 1, most: most)
    }

    /// A whole number from `least` (0 or 1) to `most`; `fallback` when absent.
    func integer(_ object: [String: Any], _ key: String, in parent: JSONPath, fallback: Int, least: Int, most: Int) -> Int? {
        precondition(least == 0 || least == 1, "a config number starts at 0 or 1")
        guard let found = lookup(object, key, in: parent) else { return fallback }
        switch JSONKind(found.value) {
        case let .integer(n) where n >= least && n <= most:
            return n
        case let .integer(n) where n > most:
            error(found.path, "\(n) is over the limit of \(most)", fix: "write a number from \(least) to \(most), such as \(fallback)")
        case let .integer(n):
            error(found.path, "\(n) is not a \(least == 1 ? "positive" : "non-negative") whole number",
                  fix: "write a number of at least \(least), such as \(fallback)")
        case let .string(s) where Int(s) != nil:
            error(found.path, "expected a number, found a string", fix: "write \(s) without quotes")
        case let kind:
            error(found.path, "expected a positive whole number, found \(kind.name)",
                  fix: typeFix("write a number without quotes, such as \(fallback)", for: found, optional: true))
        }
        return nil
    }

    /// The longest file path the config accepts, in bytes.
    static let maxPathBytes = 1024

    /// `text` in double quotes for a message, at most a short prefix of it
    /// (`InvalidEvent.quote`: a 10,000-character value must not make a 10 KB message), control
    /// characters and line breaks written visibly (`TerminalText.field`).
    func quoted(_ text: String) -> String {
        "\"" + TerminalText.field(InvalidEvent.quote(text)) + "\""
    }

    /// `true` or `false`; `fallback` when absent.
    func boolean(_ object: [String: Any], _ key: String, in parent: JSONPath, fallback: Bool) -> Bool? {
        guard let found = lookup(object, key, in: parent) else { return fallback }
        guard case .boolean = JSONKind(found.value), let value = found.value as? Bool else {
            error(found.path, "expected true or false, found \(JSONKind(found.value).name)",
                  fix: typeFix("write true or false without quotes", for: found, optional: true))
            return nil
        }
        return value
    }

    func missing(_ path: JSONPath, example: String) {
        var fix = "add \"\(path.key)\": \(example)"
        let parentPath = JSONPath(components: Array(path.components.dropLast()))
        if !parentPath.components.isEmpty { fix += " under \(parentPath.plain)" }
        if let variable = ConfigEnvironment.overrides.first(where: { $0.path == path.plain })?.variable {
            fix += " or set \(variable)"
        }
        error(path, "missing required key \"\(path.key)\"", fix: fix)
    }

    /// Warns about every key of `object` not in `known`, suggesting the nearest known one.
    func unknownKeys(_ object: [String: Any], at path: JSONPath, known: [String]) {
        for key in object.keys.sorted() where !known.contains(key) {
            let fix: String
            if let near = DidYouMean.nearest(key, among: known) {
                fix = "did you mean \"\(near)\"?"
            } else {
                fix = "remove it; keys known here: \(known.joined(separator: ", "))"
            }
            warning(path.appending(key), "unknown key \(quoted(key)) (ignored)", fix: fix)
        }
    }

    // MARK: Files

    /// `path` made absolute: against the config's directory, or the working directory for a
    /// value from the environment.
    func resolve(_ path: String, fromEnvironment: Bool) -> String {
        if path.hasPrefix("/") { return URL(fileURLWithPath: path).standardizedFileURL.path }
        let base = fromEnvironment ? workingDirectory : baseDirectory
        return URL(fileURLWithPath: base).appendingPathComponent(path).standardizedFileURL.path
    }
}

/// The kind of a JSONSerialization value, telling booleans from numbers (both are NSNumber).
enum JSONKind {
    case string(String), integer(Int), fraction, boolean, null, object, array, other

    init(_ value: Any) {
        if let number = value as? NSNumber, !(value is String) {
            if type(of: number) == type(of: NSNumber(value: true)) { self = .boolean; return }
            let double = number.doubleValue
            if double.rounded() == double, abs(double) < 9.0e15 { self = .integer(Int(double)); return }
            self = .fraction
        } else if let s = value as? String {
            self = .string(s)
        } else if value is NSNull {
            self = .null
        } else if value is [String: Any] {
            self = .object
        } else if value is [Any] {
            self = .array
        } else {
            self = .other
        }
    }

    var name: String {
        switch self {
        case .string: return "a string"
        case .integer: return "a number"
        case .fraction: return "a fractional number"
        case .boolean: return "true/false"
        case .null: return "null"
        case .object: return "an object"
        case .array: return "an array"
        case .other: return "an unexpected value"
        }
    }
}
