import DeadLetters
import EventLoop
import Foundation
import RedisStreams

/// Why a `pushgw dead` verb stops, and its exit status.
enum DeadFailure: Error {
    /// Bad usage (one line, exit 2).
    case usage(UsageError)
    /// An unusable config (exit 2), the text already prefixed.
    case config(String)
    /// The verb's own failure (exit 1): Redis unreachable, no such dead letter, …
    case failed(String)

    /// Prints the one line and returns the exit status.
    func report(_ context: CommandContext) -> Int32 {
        switch self {
        case let .usage(error):
            context.console.err(error.line)
            return 2
        case let .config(line):
            context.console.err(line)
            return 2
        case let .failed(line):
            context.console.err(line)
            return 1
        }
    }
}

/// One run of a `pushgw dead` verb: the config, a Redis connection on a loop of its own, and
/// blocking helpers over `DeadLetterStore` (a CLI does one thing after another, so each step
/// runs the loop until its answer is in).
///
/// Single-threaded: everything runs on the calling thread; `close()` at the end.
final class DeadSession {
    let verb: String
    let config: GatewayConfig
    /// The apps the command looks at (the `--app` list, or every configured app), sorted.
    let apps: [String]
    let loop = EventLoop()
    let connection: RedisConnection
    let store: DeadLetterStore

    /// Pages of XRANGE read per round trip while scanning.
    static let pageSize = 500

    /// Loads the config (`--config`, environment overrides as for `pushgw run`), checks the
    /// `--app` list against it and connects (lazily: the first command connects).
    init(verb: String, configFile: String?, appFilter: [String]?, context: CommandContext) throws(DeadFailure) {
        self.verb = verb
        let file = configFile ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment, workingDirectory: context.workingDirectory)
        guard let config = report.config else {
            let errors = report.errors
            let more = errors.count > 1 ? " (and \(errors.count - 1) more errors)" : ""
            throw .config("pushgw dead \(verb): \(errors.first?.description ?? "\(file): unusable")\(more); run pushgw config check \(file)")
        }
        if let appFilter {
            for app in appFilter where config.apps[app] == nil {
                throw .usage(UsageError("no app \"\(app)\" in \(file) (declared: \(config.apps.keys.sorted().joined(separator: ", ")))",
                                        verb: "dead \(verb)"))
            }
        }
        let settings: RedisConnection.Config
        do {
            settings = try config.redis.connection(clientName: "pushgw-dead")
        } catch {
            throw .config("pushgw dead \(verb): \(file): redis.url: \(error)")
        }
        self.config = config
        apps = (appFilter ?? Array(config.apps.keys)).sorted()
        connection = RedisConnection(loop: loop, config: settings)
        store = DeadLetterStore(connection: connection, prefix: config.redis.prefix)
        connection.start()
    }

    /// Closes the connection (outside any callback, so its context is freed at once) and
    /// the loop.
    func close() {
        connection.close()
        loop.close()
    }

    func keys(_ app: String) -> AppKeys { AppKeys(prefix: config.redis.prefix, app: app) }

    func policy(_ app: String) -> DeadLetterRetentionPolicy { config.apps[app]?.deadLetters ?? .default }

    /// Starts an operation and runs the loop until it completes.
    func wait<T>(_ start: (@escaping (Result<T, RedisError>) -> Void) -> Void) throws(DeadFailure) -> T {
        var result: Result<T, RedisError>?
        start { result = $0 }
        loop.run(until: { result != nil })
        switch result! {
        case let .success(value): return value
        case let .failure(error): throw .failed("pushgw dead \(verb): \(error)")
        }
    }

    /// Runs the loop until the monotonic clock reaches `ms`.
    func sleep(untilMonotonicMs ms: Int64) {
        let delay = ms - Clock.monotonicMs()
        guard delay > 0 else { return }
        var fired = false
        let timer = LoopTimer(loop: loop) { fired = true }
        timer.schedule(afterMs: delay)
        loop.run(until: { fired })
        timer.close()
    }

    // MARK: Reading dead letters

    /// `entries` of `app` read as records, joined with their events' replay ledgers.
    func records(_ app: String, _ entries: [StreamEntry]) throws(DeadFailure) -> [DeadLetterRecord] {
        guard !entries.isEmpty else { return [] }
        let keys = keys(app)
        let digests = entries.map { EventDigest.of($0.values["event"] ?? []) }
        let ledgers = try wait { store.ledgers(keys, digests: digests, completion: $0) }
        return zip(entries, digests).map { entry, digest in
            DeadLetterRecord(entry: entry, app: app, ledger: ledgers[digest])
        }
    }

    /// The dead letters of `app` that pass `filter`, newest or oldest first, at most `limit`
    /// (all when nil). Reads pages of `pageSize` within the filter's time range.
    func scan(_ app: String, filter: DeadLetterFilter, newestFirst: Bool, limit: Int?) throws(DeadFailure) -> [DeadLetterRecord] {
        guard !filter.isEmptyRange else { return [] }
        let keys = keys(app)
        var found: [DeadLetterRecord] = []
        var start = filter.rangeStart
        var end = filter.rangeEnd
        while true {
            let (s, e) = (start, end)
            let page = try wait { store.range(keys, start: s, end: e, count: DeadSession.pageSize, newestFirst: newestFirst, completion: $0) }
            for record in try records(app, page) where filter.matches(record) {
                found.append(record)
                if let limit, found.count >= limit { return found }
            }
            guard page.count == DeadSession.pageSize, let last = page.last else { return found }
            if newestFirst { end = "(" + last.id } else { start = "(" + last.id }
        }
    }

    /// The matching dead letters of every selected app, newest first, at most `limit`.
    func newest(filter: DeadLetterFilter, limit: Int) throws(DeadFailure) -> [DeadLetterRecord] {
        var all: [DeadLetterRecord] = []
        for app in apps {
            all += try scan(app, filter: filter, newestFirst: true, limit: limit)
        }
        return Array(all.sorted(by: DeadSession.newerFirst).prefix(limit))
    }

    /// Every matching dead letter of every selected app, oldest first.
    /// Every dead letter matching `filter` with `--all`, else the `references` named.
    func select(all: Bool, filter: DeadLetterFilter, references: [DeadLetterReference]) throws(DeadFailure) -> [DeadLetterRecord] {
        all ? try self.all(filter: filter) : try find(references)
    }

    func all(filter: DeadLetterFilter) throws(DeadFailure) -> [DeadLetterRecord] {
        var all: [DeadLetterRecord] = []
        for app in apps {
            all += try scan(app, filter: filter, newestFirst: false, limit: nil)
        }
        return all.sorted { DeadSession.newerFirst($1, $0) }
    }

    /// Orders by death time, then app, then id: newest first.
    static func newerFirst(_ a: DeadLetterRecord, _ b: DeadLetterRecord) -> Bool {
        if a.deadAtMs != b.deadAtMs { return a.deadAtMs > b.deadAtMs }
        if a.app != b.app { return a.app > b.app }
        return a.id.compare(b.id, options: .numeric) == .orderedDescending
    }

    /// Finds each named dead letter among the selected apps (or its `APP/` prefix). Every
    /// one must exist in exactly one app, or nothing is returned: a typo must not half-run
    /// a bulk action.
    func find(_ references: [DeadLetterReference]) throws(DeadFailure) -> [DeadLetterRecord] {
        var found: [DeadLetterRecord] = []
        var problems: [String] = []
        for reference in references {
            if let app = reference.app, config.apps[app] == nil {
                throw .usage(UsageError("no app \"\(app)\" in the config (in \(app)/\(reference.id))", verb: "dead \(verb)"))
            }
            let candidates = reference.app.map { [$0] } ?? apps
            var hits: [DeadLetterRecord] = []
            for app in candidates {
                let keys = keys(app)
                if let entry = try wait({ store.entry(keys, id: reference.id, completion: $0) }) {
                    hits += try records(app, [entry])
                }
            }
            switch hits.count {
            case 0: problems.append("no dead letter \(reference.id) in \(candidates.count == 1 ? "app \(candidates[0])" : "any app")")
            case 1: found.append(hits[0])
            default: problems.append("dead letter \(reference.id) exists in apps \(hits.map(\.app).joined(separator: ", ")); name one with --app or APP/ID")
            }
        }
        if !problems.isEmpty {
            let more = problems.count > 1 ? " (and \(problems.count - 1) more)" : ""
            throw .failed("pushgw dead \(verb): \(problems[0])\(more); nothing done")
        }
        return found
    }

    // MARK: Audit

    /// How many audit records the audit stream keeps (approximately).
    static let auditMaxLen = 10_000

    /// Writes `record` as a JSON line on stderr (the operator's log) and to the audit stream.
    func audit(_ record: AuditRecord, context: CommandContext) throws(DeadFailure) {
        guard case let .object(fields) = record.json else { preconditionFailure("an audit record is an object") }
        let line = JSONValue.object([("time", .string(DeadFormat.time(record.timeMs))), ("level", .string("info")),
                                     ("msg", .string("dead letters \(record.verb)"))] + fields)
        context.console.err(line.text)
        _ = try wait { store.audit(record.streamFields, maxLen: DeadSession.auditMaxLen, completion: $0) }
    }

    /// `$USER` (or `$LOGNAME`) and `$SUDO_USER` of the environment.
    static func user(_ context: CommandContext) -> (String, String?) {
        let env = context.environment
        let user = [env["USER"], env["LOGNAME"]].compactMap { $0 }.first { !$0.isEmpty } ?? "unknown"
        let sudo = env["SUDO_USER"].flatMap { $0.isEmpty ? nil : $0 }
        return (user, sudo)
    }
}
