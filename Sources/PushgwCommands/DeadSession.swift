import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration
import CallStorage
import JSONOutput
import RedisClient

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
            context.output.err(error.line)
            return 2
        case let .config(line):
            context.output.err(line)
            return 2
        case let .failed(line):
            context.output.err(line)
            return 1
        }
    }
}

/// One run of a `pushgw dead` verb (or of `pushgw tokens`, which shares the audit): the config,
/// a Redis connection on a loop of its own, and the shared dead-letter operations
/// (`DeadLetterOperations`, which the operators' console calls too), made blocking: a CLI does
/// one thing after another, so each step runs the loop until its answer is in.
///
/// Single-threaded: everything runs on the calling thread; `close()` at the end.
final class DeadSession {
    /// `dead` or `tokens`: how messages name the command, and the Redis client name.
    let command: String
    /// The verb of `command` (`list`, `show`, …); empty for a command without verbs (`audit`).
    let verb: String
    /// How messages name the command: `dead list`, `audit`.
    var invocation: String { DeadSession.invocation(command, verb) }
    static func invocation(_ command: String, _ verb: String) -> String { verb.isEmpty ? command : "\(command) \(verb)" }
    let config: GatewayConfig
    /// The apps the command looks at (the `--app` list, or every configured app), sorted.
    let apps: [String]
    let loop = EventLoop()
    /// One Redis's connection, or the cluster's client (`redis.cluster`).
    let topology: RedisTopology
    let operations: DeadLetterOperations

    /// Loads the config (`--config`, environment overrides as for `pushgw run`), checks the
    /// `--app` list against it and connects (lazily: the first command connects).
    init(command: String = "dead", verb: String, configFile: String?, appFilter: [String]?,
         context: CommandContext) throws(DeadFailure) {
        self.command = command
        self.verb = verb
        let invocation = DeadSession.invocation(command, verb)
        let file = configFile ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment, workingDirectory: context.workingDirectory)
        guard let config = report.config else {
            let errors = report.errors
            let more = errors.count > 1 ? " (and \(errors.count - 1) more errors)" : ""
            throw .config("pushgw \(invocation): \(errors.first?.description ?? "\(file): unusable")\(more); run pushgw config check \(file)")
        }
        if let appFilter {
            for app in appFilter where config.apps[app] == nil {
                throw .usage(UsageError("no app \"\(app)\" in \(file) (declared: \(config.apps.keys.sorted().joined(separator: ", ")))",
                                        verb: invocation))
            }
        }
        let settings: RedisConnection.Config
        let clusterSettings: RedisCluster.Config?
        do {
            settings = try config.redis.connection(clientName: "pushgw-\(command)")
            clusterSettings = try config.redis.cluster(clientName: "pushgw-\(command)")
        } catch {
            throw .config("pushgw \(invocation): \(file): redis.url: \(error)")
        }
        self.config = config
        apps = (appFilter ?? Array(config.apps.keys)).sorted()
        topology = .own(loop: loop, redis: settings, cluster: clusterSettings, clientName: "pushgw-\(command)")
        topology.start()
        operations = DeadLetterOperations(loop: loop, store: DeadLetterStore(topology: topology, prefix: config.redis.prefix, windows: config.retentionWindows),
                                          policies: config.apps.mapValues(\.deadLetters), ringTimeoutsMs: config.ringTimeoutsMs)
    }

    /// Closes the connection (outside any callback, so its context is freed at once) and
    /// the loop.
    func close() {
        topology.close()
        loop.close()
    }

    /// Starts an operation and runs the loop until it completes.
    func wait<T, E: Error & CustomStringConvertible>(_ start: (@escaping (Result<T, E>) -> Void) -> Void) throws(DeadFailure) -> T {
        var result: Result<T, E>?
        start { result = $0 }
        loop.run(until: { result != nil })
        switch result! {
        case let .success(value): return value
        case let .failure(error): throw .failed("pushgw \(invocation): \(error)")
        }
    }

    /// Starts an operation that cannot fail and runs the loop until it completes.
    func wait<T>(_ start: (@escaping (T) -> Void) -> Void) -> T {
        var result: T?
        start { result = $0 }
        loop.run(until: { result != nil })
        return result!
    }

    // MARK: Reading dead letters

    /// The matching dead letters of every selected app, newest first, at most `limit`.
    func newest(filter: DeadLetterFilter, limit: Int) throws(DeadFailure) -> [DeadLetterRecord] {
        try wait { operations.newest(apps: apps, filter: filter, limit: limit, completion: $0) }
    }

    /// What a changing verb (`purge`, `replay`) selected: how many dead letters of which apps.
    struct Selected {
        var count = 0
        var apps = Set<String>()

        mutating func add(_ record: DeadLetterRecord) {
            count += 1
            apps.insert(record.app)
        }

        /// How messages name them: "3 dead letters of app acme".
        var what: String { "\(DeadFormat.count(count, "dead letter")) of \(DeadListCommand.describe(apps.sorted()))" }
    }

    /// Runs a changing verb (`purge`, `replay`) over its targets, never holding more than a
    /// bounded step of them: the named dead letters (all found first, or nothing is done), or
    /// with `--all` every match, walked a page at a time (`DeadLetterOperations.walk`) up to
    /// each app's newest entry when the verb started, so a replay that dies again is not met
    /// again. A dry run prints `line` for each target, then "dry run: … would be `done` …";
    /// a run that must ask counts the targets first and asks `question(what)` (no is the
    /// verb's failure); then `act` gets the targets a page at a time and calls
    /// `proceed(false)` to stop early (a Redis failure). Returns what was acted on; nil when
    /// nothing matched (said so) or after a dry run.
    func bulk(_ change: DeadChange, done: String, dryRunNote: String = "", context: CommandContext,
              line: @escaping (DeadLetterRecord) -> String, question: (String) -> String,
              act: @escaping ([DeadLetterRecord], _ proceed: @escaping (Bool) -> Void) -> Void) throws(DeadFailure) -> Selected? {
        var named: [DeadLetterRecord] = []
        var ends: [String: String] = [:]
        if change.all {
            for app in apps {
                let newest = try wait { operations.store.range(operations.keys(app), count: 1, newestFirst: true, completion: $0) }
                ends[app] = newest.entries.first?.id ?? "0-0"
            }
        } else {
            named = try find(change.references)
        }
        /// Every target, a page at a time, to `each`.
        func visit(_ each: @escaping ([DeadLetterRecord], @escaping (Bool) -> Void) -> Void) throws(DeadFailure) {
            guard change.all else {
                var start = 0
                var goOn = true
                while goOn && start < named.count {
                    let page = Array(named[start..<min(start + DeadLetterOperations.pageSize, named.count)])
                    start += page.count
                    goOn = wait { each(page, $0) }
                }
                return
            }
            _ = try wait { operations.walk(apps: apps, filter: change.filter, ends: ends, onPage: { _, page, proceed in
                each(page.records, proceed)
            }, completion: $0) }
        }
        var selected = Selected()
        let counting = change.dryRun || change.mustConfirm
        if counting {
            try visit { page, proceed in
                for record in page {
                    selected.add(record)
                    if change.dryRun { context.output.out(line(record)) }
                }
                proceed(true)
            }
            guard selected.count > 0 else {
                context.output.out("no dead letters match; nothing \(done)")
                return nil
            }
            if change.dryRun {
                context.output.out("dry run: \(selected.what) would be \(done)\(dryRunNote); nothing changed")
                return nil
            }
            if !DeadCommand.confirm(question(selected.what), context: context) {
                throw .failed("pushgw dead \(verb): not confirmed; nothing \(done)")
            }
        }
        var acted = Selected()
        try visit { page, proceed in
            for record in page { acted.add(record) }
            guard !page.isEmpty else { return proceed(true) }
            act(page, proceed)
        }
        if !counting && acted.count == 0 {
            context.output.out("no dead letters match; nothing \(done)")
            return nil
        }
        return counting ? selected : acted
    }

    /// Finds each named dead letter among the selected apps (or its `APP/` prefix); all or
    /// nothing (`DeadLetterOperations.find`).
    func find(_ references: [DeadLetterReference]) throws(DeadFailure) -> [DeadLetterRecord] {
        var result: Result<[DeadLetterRecord], DeadLetterOperationError>?
        operations.find(references, among: apps) { result = $0 }
        loop.run(until: { result != nil })
        switch result! {
        case let .success(records): return records
        case let .failure(error):
            switch error {
            case .unknownApp: throw .usage(UsageError(error.description, verb: invocation))
            case .notFound: throw .failed("pushgw \(invocation): \(error); nothing done")
            case .redis: throw .failed("pushgw \(invocation): \(error)")
            }
        }
    }

    // MARK: Audit

    /// Ends a changing verb (`purge`, `replay`, `tokens forget`): writes its audit record (who, when, which, how
    /// many, the filters) even after a part-way `failure`, so that what was done is on record;
    /// prints `summary`; then throws the verb's own failure, else the audit's.
    func finishAudited(ids: [String], requested: Int, done: Int, filter: DeadLetterFilter?,
                       options: [(String, OrderedJSON)] = [], failure: RedisError?, summary: String,
                       context: CommandContext) throws(DeadFailure) {
        let actor = Self.actor(context)
        let record = AuditRecord(timeMs: Clock.unixMs(), verb: auditVerb, user: actor.user, sudoUser: actor.sudoUser, ids: ids,
                                 requested: requested, done: done, filter: filter, options: options)
        try finishAudited(record, failure: failure, summary: summary, context: context)
    }

    /// The verb as the audit record names it: `replay`, `purge`, `tokens forget`.
    var auditVerb: String { command == "dead" ? verb : invocation }

    /// Ends a changing verb with `record` made already (`AuditedReplay.record`), as above.
    func finishAudited(_ record: AuditRecord, failure: RedisError?, summary: String, context: CommandContext) throws(DeadFailure) {
        var failure = failure.map { DeadFailure.failed("pushgw \(invocation): \($0)") }
        do throws(DeadFailure) {
            try audit(record, context: context)
        } catch {
            if failure == nil { failure = error }
        }
        context.output.out(summary)
        if let failure { throw failure }
    }

    /// Writes `record` as a JSON line on stderr (the operator's log) and to the audit stream.
    private func audit(_ record: AuditRecord, context: CommandContext) throws(DeadFailure) {
        guard case let .object(fields) = record.json else { preconditionFailure("an audit record is an object") }
        let line = OrderedJSON.object([("time", .string(DeadFormat.time(record.timeMs))), ("level", .string("info")),
                                     ("msg", .string(command == "dead" ? "dead letters \(record.verb)" : record.verb))]
            + fields)
        context.output.err(line.text)
        _ = try wait { operations.audit(record, completion: $0) }
    }

    /// Who runs the command, for its audit record: `$USER` (or `$LOGNAME`) and `$SUDO_USER`
    /// of the environment; without them (cron, a container, `env -i`) the name of the process's
    /// user id in the passwd database (`getpwuid_r`), else `uid:N`.
    static func actor(_ context: CommandContext, uid: uid_t = getuid()) -> AuditActor {
        let env = context.environment
        let user = [env["USER"], env["LOGNAME"]].compactMap { $0 }.first { !$0.isEmpty }
            ?? userName(uid: uid) ?? "uid:\(uid)"
        let sudo = env["SUDO_USER"].flatMap { $0.isEmpty ? nil : $0 }
        return AuditActor(user: user, sudoUser: sudo)
    }

    /// The passwd database's name for `uid`; nil when it has none.
    static func userName(uid: uid_t) -> String? {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else { return nil }
        let text = String(cString: name)
        return text.isEmpty ? nil : text
    }
}
