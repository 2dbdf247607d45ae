import EventLoop
import CallStorage
import RedisClient

/// What the operators' tools do to dead letters, in one place for `pushgw dead` and the
/// operators' console (docs/operations.md, "Console"): reading them with their replay history,
/// filtered pages, finding named ones, replaying them paced, purging, counting, and the audit
/// trail of every change. The two front ends only parse, confirm and print; they cannot
/// disagree about what a filter selects or what a replay writes.
///
/// Every operation is asynchronous on the loop and incremental: each Redis round trip reads a
/// bounded step (at most `pageSize` entries and about a megabyte, `DeadLetterStore.range`), and
/// the next step starts from its completion, so a bulk operation over a stream of any size
/// holds one step in memory and leaves the loop between steps. The command line runs the loop
/// until the completion arrives; the console answers its HTTP request from it.
///
/// Loop-owned: create and call on the loop thread of `store.connection`, which the caller owns
/// (starts and closes).
public final class DeadLetterOperations {
    public let store: DeadLetterStore
    private let loop: EventLoop
    /// Each app's retention (the replay ledger's lifetime follows it), by app id.
    public var policies: [String: DeadLetterRetentionPolicy]
    /// Each app's ring timeout, ms (`ring_timeout_s`): a call without its own `deadline` rings
    /// that long from its first calls entry, and its replay no longer.
    public var ringTimeoutsMs: [String: Int64]
    /// Every bulk read's steps (`page`, `stats`) go through it: one at a time, with rests.
    let pacing: ScanPacing

    /// Entries read per step while scanning (at most; `DeadLetterStore.range` also stops at
    /// its byte budget): each step is a millisecond or two of Redis and of the loop, so
    /// routing goes on between steps.
    public static let pageSize = 100
    /// Entries read per step of a `walk`: its pages are joined with their ledgers and acted
    /// on (a preview renders them) in the same loop turn, a few milliseconds for 25.
    public static let walkStep = 25
    /// How many audit records the audit stream keeps (approximately).
    public static let auditMaxLen = 10_000
    /// The ring timeout of an app missing from `ringTimeoutsMs` (the config's default).
    public static let defaultRingTimeoutMs: Int64 = 30_000

    public init(loop: EventLoop, store: DeadLetterStore, policies: [String: DeadLetterRetentionPolicy],
                ringTimeoutsMs: [String: Int64]) {
        self.loop = loop
        self.store = store
        self.policies = policies
        self.ringTimeoutsMs = ringTimeoutsMs
        pacing = ScanPacing(loop: loop)
    }

    public func keys(_ app: String) -> AppKeys { AppKeys(prefix: store.gatewayKeys.prefix, app: app) }

    public func policy(_ app: String) -> DeadLetterRetentionPolicy { policies[app] ?? .default }

    public func ringTimeoutMs(_ app: String) -> Int64 { ringTimeoutsMs[app] ?? DeadLetterOperations.defaultRingTimeoutMs }

    /// What a replay of `record` will do now (`ReplayForecast`), with its app's ring timeout.
    public func forecast(_ record: DeadLetterRecord, nowMs: Int64) -> ReplayForecast {
        ReplayForecast(record, ringTimeoutMs: ringTimeoutMs(record.app), nowMs: nowMs)
    }

    // MARK: Reading

    /// `entries` of `app`'s dead stream read as records, joined with their events' replay
    /// ledgers (one pipelined round trip).
    public func records(_ app: String, _ entries: [StreamEntry],
                        completion: @escaping (Result<[DeadLetterRecord], RedisError>) -> Void) {
        guard !entries.isEmpty else { return completion(.success([])) }
        let digests = entries.map { EventDigest.of($0.values["event"] ?? []) }
        store.ledgers(keys(app), digests: digests) { result in
            completion(result.map { ledgers in
                zip(entries, digests).map { entry, digest in DeadLetterRecord(entry: entry, app: app, ledger: ledgers[digest]) }
            })
        }
    }

    /// One bounded step of a scan: what one XRANGE page of `app` holds that passes `filter`.
    public struct Page: Sendable {
        /// The matching records of the page, in the scan's order.
        public var records: [DeadLetterRecord]
        /// Where the next page starts (an exclusive bound, `(ID`), nil at the stream's end.
        public var next: String?
        /// Entries read (matching or not).
        public var scanned: Int
    }

    /// Reads one step of at most `count` entries of `app` within the filter's time range (and
    /// up to `end`, an XRANGE end bound, when given), newest or oldest first, starting after
    /// `cursor` (a `Page.next`; nil from the start). Two round trips: the bounded range and
    /// the ledgers of the matching entries. Never reads the whole stream.
    public func page(_ app: String, filter: DeadLetterFilter, newestFirst: Bool, cursor: String? = nil, end: String? = nil,
                     count: Int = DeadLetterOperations.pageSize, completion: @escaping (Result<Page, RedisError>) -> Void) {
        guard !filter.isEmptyRange else { return completion(.success(Page(records: [], next: nil, scanned: 0))) }
        let filterEnd = end.map { DeadLetterOperations.lower($0, filter.rangeEnd) } ?? filter.rangeEnd
        let start = !newestFirst ? cursor ?? filter.rangeStart : filter.rangeStart
        let stop = newestFirst ? cursor.map { DeadLetterOperations.lower($0, filterEnd) } ?? filterEnd : filterEnd
        // The step ends once `completion` returned: what the caller does with the page at once
        // (a preview renders its rows) is part of the step.
        pacing.run { [weak self] finished in
            guard let self else {
                completion(.failure(.closed))
                return finished()
            }
            self.store.range(self.keys(app), start: start, end: stop, count: count, newestFirst: newestFirst) { [weak self] result in
                guard let self else {
                    completion(.failure(.closed))
                    return finished()
                }
                switch result {
                case let .failure(error):
                    completion(.failure(error))
                    finished()
                case let .success(range):
                    // Filters first, on the entries themselves: only the matching ones are
                    // joined with their ledgers.
                    let matching = range.entries.filter { filter.matches($0, app: app) }
                    self.records(app, matching) { read in
                        completion(read.map { records in
                            Page(records: records.filter(filter.matches), next: range.more ? range.entries.last.map { "(" + $0.id } : nil,
                                 scanned: range.entries.count)
                        })
                        finished()
                    }
                }
            }
        }
    }

    /// Walks the dead letters of `apps` (in the order given) that pass `filter`, oldest first,
    /// one bounded `page` at a time, starting after `from` (an `APP/ID` of one of the apps: the
    /// rest of that app, then the apps after it; nil from the start), and in each app not past
    /// `ends[app]` (an XRANGE end bound; absent: the stream's end). Each page goes to
    /// `onPage`, which calls `proceed(true)` for the next one (at once, or after it acted on
    /// the page) or `proceed(false)` to stop. `completion` gets where a walk stopped by
    /// `onPage` would go on (the last entry read, `APP/ID`), or nil when every app was read
    /// to its end.
    public func walk(apps: [String], filter: DeadLetterFilter, from: DeadLetterReference? = nil, ends: [String: String] = [:],
                     onPage: @escaping (_ app: String, Page, _ proceed: @escaping (Bool) -> Void) -> Void,
                     completion: @escaping (Result<DeadLetterReference?, RedisError>) -> Void) {
        var index = from.flatMap { f in apps.firstIndex { $0 == f.app } } ?? 0
        func step(_ cursor: String?) {
            guard index < apps.count else { return completion(.success(nil)) }
            let app = apps[index]
            page(app, filter: filter, newestFirst: false, cursor: cursor, end: ends[app], count: DeadLetterOperations.walkStep) { result in
                switch result {
                case let .failure(error): completion(.failure(error))
                case let .success(page):
                    onPage(app, page) { goOn in
                        let last = page.next.map { DeadLetterReference(app: app, id: String($0.dropFirst())) }
                        guard goOn else {
                            if let last { return completion(.success(last)) }
                            // The app was read to its end: go on with the next one.
                            return completion(.success(index + 1 < apps.count ? DeadLetterReference(app: apps[index + 1], id: "0-0") : nil))
                        }
                        if let next = page.next { return step(next) }
                        index += 1
                        step(nil)
                    }
                }
            }
        }
        if let from, index < apps.count, from.app == apps[index] { step("(" + from.id) } else { step(nil) }
    }

    /// The dead letters of `app` that pass `filter`, newest or oldest first, at most `limit`
    /// (all when nil): bounded pages until the limit or the stream's end.
    public func scan(_ app: String, filter: DeadLetterFilter, newestFirst: Bool, limit: Int?,
                     completion: @escaping (Result<[DeadLetterRecord], RedisError>) -> Void) {
        var found: [DeadLetterRecord] = []
        func step(_ cursor: String?) {
            page(app, filter: filter, newestFirst: newestFirst, cursor: cursor) { result in
                switch result {
                case let .failure(error): completion(.failure(error))
                case let .success(page):
                    for record in page.records {
                        found.append(record)
                        if let limit, found.count >= limit { return completion(.success(found)) }
                    }
                    guard let next = page.next else { return completion(.success(found)) }
                    step(next)
                }
            }
        }
        step(nil)
    }

    /// The matching dead letters of `apps`, newest first, at most `limit`.
    public func newest(apps: [String], filter: DeadLetterFilter, limit: Int,
                       completion: @escaping (Result<[DeadLetterRecord], RedisError>) -> Void) {
        collect(apps, newestFirst: true, filter: filter, limit: limit) { result in
            completion(result.map { Array($0.sorted(by: DeadLetterOperations.newerFirst).prefix(limit)) })
        }
    }

    /// Scans `apps` one after the other.
    private func collect(_ apps: [String], newestFirst: Bool, filter: DeadLetterFilter, limit: Int?,
                         completion: @escaping (Result<[DeadLetterRecord], RedisError>) -> Void) {
        var all: [DeadLetterRecord] = []
        func next(_ index: Int) {
            guard index < apps.count else { return completion(.success(all)) }
            scan(apps[index], filter: filter, newestFirst: newestFirst, limit: limit) { result in
                switch result {
                case let .failure(error): completion(.failure(error))
                case let .success(found):
                    all += found
                    next(index + 1)
                }
            }
        }
        next(0)
    }

    /// One page of a paginated view (the operators' console): the newest matching dead
    /// letters older than a cursor, across apps.
    public struct Listing: Sendable {
        /// Newest first (`newerFirst`), at most the limit asked for.
        public var records: [DeadLetterRecord]
        /// Where the next page starts (pass it as `before`); nil when nothing older is left.
        public var next: DeadLetterReference?
        /// Entries read for this page.
        public var scanned: Int
    }

    /// The newest dead letters of `apps` that pass `filter` and are older than `before` (a
    /// `Listing.next`; nil from the newest), at most `limit`. Bounded whatever the stream's
    /// size: one XREVRANGE of at most `scanLimit` entries per app, all apps pipelined, then one
    /// ledger read for the records shown. When the filter matches few of the entries read, the
    /// page holds fewer than `limit` and `next` continues below what was read.
    public func listing(apps: [String], filter: DeadLetterFilter, before: DeadLetterReference?, limit: Int, scanLimit: Int,
                        completion: @escaping (Result<Listing, RedisError>) -> Void) {
        precondition(limit > 0 && scanLimit > 0, "a listing reads something")
        guard !filter.isEmptyRange, !apps.isEmpty else { return completion(.success(Listing(records: [], next: nil, scanned: 0))) }
        var pages: [String: DeadLetterStore.RangePage] = [:]
        var failure: RedisError?
        var waiting = apps.count
        for app in apps {
            let end = before.map { DeadLetterOperations.rangeEnd(app: app, below: $0) } ?? filter.rangeEnd
            // The filter's own end still applies below a cursor: the smaller bound wins.
            let bounded = before != nil && filter.beforeMs != nil ? DeadLetterOperations.lower(end, filter.rangeEnd) : end
            store.range(keys(app), start: filter.rangeStart, end: bounded, count: scanLimit, newestFirst: true) { [weak self] result in
                switch result {
                case let .success(page): pages[app] = page
                case let .failure(error): failure = failure ?? error
                }
                waiting -= 1
                guard waiting == 0, let self else { return }
                if let failure { return completion(.failure(failure)) }
                self.finishListing(pages, filter: filter, limit: limit, completion: completion)
            }
        }
    }

    private func finishListing(_ ranges: [String: DeadLetterStore.RangePage], filter: DeadLetterFilter, limit: Int,
                               completion: @escaping (Result<Listing, RedisError>) -> Void) {
        // Every app read to its end, or down to its last entry read: below the newest of those
        // last entries, some app was not read, so nothing there can be shown yet.
        let floors = ranges.compactMap { app, range -> DeadLetterReference? in
            guard range.more, let last = range.entries.last else { return nil }
            return DeadLetterReference(app: app, id: last.id)
        }
        let pages = ranges.mapValues(\.entries)
        let floor = floors.max { DeadLetterOperations.isNewer($1, than: $0) }
        // Filters first, on the entries themselves: only the records shown are read whole, with
        // their ledgers. Each id is read once into its sort key.
        let floorKey = floor.map(ListingKey.init)
        let matching = pages.flatMap { app, entries in
            entries.filter { filter.matches($0, app: app) }.map { (key: ListingKey(app: app, id: $0.id), app: app, entry: $0) }
        }
        .filter { floorKey == nil || !(floorKey! > $0.key) }
        .sorted { $0.key > $1.key }
        let shown = matching.prefix(limit).map { ($0.app, $0.entry) }
        var next: DeadLetterReference?
        if matching.count > limit, let last = shown.last {
            next = DeadLetterReference(app: last.0, id: last.1.id)
        } else {
            next = floor
        }
        let scanned = pages.values.reduce(0) { $0 + $1.count }
        let entries = Dictionary(grouping: shown, by: \.0)
        var withLedgers: [DeadLetterRecord] = []
        var waiting = entries.count
        guard waiting > 0 else { return completion(.success(Listing(records: [], next: next, scanned: scanned))) }
        var failure: RedisError?
        for (app, appEntries) in entries {
            self.records(app, appEntries.map(\.1)) { result in
                switch result {
                case let .success(read): withLedgers += read
                case let .failure(error): failure = failure ?? error
                }
                waiting -= 1
                guard waiting == 0 else { return }
                if let failure { return completion(.failure(failure)) }
                completion(.success(Listing(records: withLedgers.sorted(by: DeadLetterOperations.newerFirst), next: next, scanned: scanned)))
            }
        }
    }

    /// The XREVRANGE end of `app` for the entries after `cursor` in `newerFirst` order: the
    /// same app below its id; an app ordered before it up to the cursor's millisecond; one
    /// ordered after it below that millisecond.
    static func rangeEnd(app: String, below cursor: DeadLetterReference) -> String {
        let cursorApp = cursor.app ?? app
        let ms = DeadLetterRecord.timeMs(ofID: cursor.id) ?? 0
        if app == cursorApp { return "(" + cursor.id }
        return app < cursorApp ? String(ms) : "(" + String(ms) + "-0"
    }

    /// The lower of two XRANGE end bounds of the forms `+`, `ID`, `MS`, `(ID`.
    static func lower(_ a: String, _ b: String) -> String {
        func key(_ s: String) -> (Int64, Int64, Int) {
            if s == "+" { return (Int64.max, Int64.max, 1) }
            let exclusive = s.hasPrefix("(")
            let body = exclusive ? String(s.dropFirst()) : s
            let parts = body.split(separator: "-")
            let ms = Int64(parts.first ?? "") ?? 0
            let seq = parts.count > 1 ? Int64(parts[1]) ?? 0 : Int64.max
            return (ms, seq, exclusive ? 0 : 1)
        }
        return key(a) <= key(b) ? a : b
    }

    /// `newerFirst` on references: by the id's time, then app, then id.
    static func isNewer(_ a: DeadLetterReference, than b: DeadLetterReference) -> Bool { ListingKey(a) > ListingKey(b) }

    /// A dead letter's place in `newerFirst` order, its id read once: the id's time, then the
    /// app, then the id's sequence number (greater is newer).
    struct ListingKey: Comparable {
        let ms: UInt64
        let app: String
        let seq: UInt64

        init(app: String, id: String) {
            let parsed = DeadLetterRecord.streamID(id)
            ms = parsed?.ms ?? 0
            self.app = app
            seq = parsed?.seq ?? 0
        }

        init(_ reference: DeadLetterReference) { self.init(app: reference.app ?? "", id: reference.id) }

        static func < (a: ListingKey, b: ListingKey) -> Bool { (a.ms, a.app, a.seq) < (b.ms, b.app, b.seq) }
    }

    /// Orders by death time, then app, then id: newest first.
    public static func newerFirst(_ a: DeadLetterRecord, _ b: DeadLetterRecord) -> Bool {
        if a.deadAtMs != b.deadAtMs { return a.deadAtMs > b.deadAtMs }
        if a.app != b.app { return a.app > b.app }
        return a.id.compare(b.id, options: .numeric) == .orderedDescending
    }

    /// Finds each named dead letter among `apps` (or in its own `APP/` app). Every one must
    /// exist in exactly one app, or nothing is returned: a typo must not half-run a bulk action.
    /// A reference to an app that is not configured is `.unknownApp` (check with `policies`).
    public func find(_ references: [DeadLetterReference], among apps: [String],
                     completion: @escaping (Result<[DeadLetterRecord], DeadLetterOperationError>) -> Void) {
        var found: [DeadLetterRecord] = []
        findEach(references, among: apps, each: { found.append($0) }) { result in
            completion(result.map { _ in found })
        }
    }

    /// `find` one dead letter at a time: each found record goes to `each` as it is read (the
    /// caller keeps what it needs of it), then `completion` says whether every one was found
    /// (and how many), or what was wrong.
    public func findEach(_ references: [DeadLetterReference], among apps: [String], each: @escaping (DeadLetterRecord) -> Void,
                         completion: @escaping (Result<Int, DeadLetterOperationError>) -> Void) {
        if let stray = references.first(where: { $0.app.map { policies[$0] == nil } ?? false }) {
            return completion(.failure(.unknownApp(stray.app ?? "", id: stray.id)))
        }
        var problems: [String] = []
        func next(_ index: Int) {
            guard index < references.count else {
                return completion(problems.isEmpty ? .success(references.count) : .failure(.notFound(problems)))
            }
            let reference = references[index]
            let candidates = reference.app.map { [$0] } ?? apps
            var hits: [DeadLetterRecord] = []
            func inApp(_ a: Int) {
                guard a < candidates.count else {
                    switch hits.count {
                    case 0: problems.append("no dead letter \(reference.id) in \(candidates.count == 1 ? "app \(candidates[0])" : "any app")")
                    case 1: each(hits[0])
                    default: problems.append("dead letter \(reference.id) exists in apps \(hits.map(\.app).joined(separator: ", ")); name one with --app or APP/ID")
                    }
                    return next(index + 1)
                }
                lookUp(DeadLetterReference(app: candidates[a], id: reference.id)) { result in
                    switch result {
                    case let .failure(error): completion(.failure(.redis(error)))
                    case let .success(record):
                        if let record { hits.append(record) }
                        inApp(a + 1)
                    }
                }
            }
            inApp(0)
        }
        next(0)
    }

    // MARK: Changing

    /// The dead letter `reference` names (with its app), read as a record; nil when it is gone
    /// (replayed, purged or trimmed meanwhile). One bounded read and its ledger.
    public func lookUp(_ reference: DeadLetterReference, completion: @escaping (Result<DeadLetterRecord?, RedisError>) -> Void) {
        guard let app = reference.app, policies[app] != nil else { return completion(.success(nil)) }
        store.entry(keys(app), id: reference.id) { [weak self] result in
            guard let self else { return completion(.failure(.closed)) }
            switch result {
            case let .failure(error): completion(.failure(error))
            case .success(nil): completion(.success(nil))
            case let .success(entry?): self.records(app, [entry]) { completion($0.map { $0.first }) }
            }
        }
    }

    /// What one replay of a paced run did.
    public enum ReplayStep: Sendable {
        /// Replayed as the calls entry of that id; the forecast was made as it went.
        case replayed(DeadLetterRecord, callsEntry: String, ReplayForecast)
        /// Gone meanwhile: nothing was written.
        case gone
        /// Not replayable (`ReplayForecast.notReplayable`): nothing was written.
        case skipped(DeadLetterRecord, ReplayForecast)
    }

    /// How a paced run ended.
    public struct ReplaySummary: Sendable {
        /// `app/id` of each dead letter replayed, in order.
        public var replayed: [String] = []
        /// Dead letters gone meanwhile.
        public var gone = 0
        /// Dead letters that cannot be replayed (only part of their event was kept).
        public var skipped = 0
        /// How many times a replay waited for the routers to read what the app's calls stream
        /// held first (`replayYieldsAtUnread`).
        public var yields = 0
        /// The Redis failure that stopped the run early; nil when every target was tried.
        public var failure: RedisError?
        /// The run was cancelled (`ReplayRun.cancel`) before every target was tried.
        public var cancelled = false

        public init() {}

        /// Adds what a later part of the same run did.
        public mutating func add(_ part: ReplaySummary) {
            cancelled = cancelled || part.cancelled
            replayed += part.replayed
            gone += part.gone
            skipped += part.skipped
            yields += part.yields
            failure = part.failure ?? failure
        }
    }

    /// A paced replay yields to live calls: it writes the next replay only while the app's
    /// calls stream holds fewer entries than this that the routers have not read (about one
    /// read's worth, `RouterRoleSettings.readBatch`), so a live call written meanwhile is
    /// never further behind replays than that, and the router reads as fast as it routes.
    /// Its pushes then wait behind every live one in the APNs queue (the background lane).
    public static let replayYieldsAtUnread = 100
    /// How long a replay that yielded waits before it asks again.
    public static let replayYieldWaitMs: Int64 = 20

    /// Replays the dead letters `targets` names (each with its app), in order: each is read
    /// again just before its turn (`lookUp`: a replay writes what the stream holds then, and
    /// a run holds one dead letter at a time whatever its length), and the `n`-th replay
    /// written goes no earlier than `pacer.dueMs(index: firstIndex + n)`, and none while its
    /// app's calls stream holds `replayYieldsAtUnread` entries not read yet (it waits
    /// `replayYieldWaitMs` and asks again: it yields to live calls). Each step goes to
    /// `onStep`, the end to `completion`. A Redis failure stops the run (what was replayed
    /// stays replayed). The timers belong to the run; the caller keeps the loop running
    /// until `completion`. `ReplayRun.cancel` on what it returns stops the run after the entry
    /// in progress (at once while it waits for its pace or for the routers).
    @discardableResult
    public func replayPaced(_ targets: [DeadLetterReference], pacer: ReplayPacer, firstIndex: Int = 0,
                            onStep: @escaping (DeadLetterReference, ReplayStep) -> Void,
                            completion: @escaping (ReplaySummary) -> Void) -> ReplayRun {
        loop.assertInLoop()
        let run = ReplayRun()
        var summary = ReplaySummary()
        var position = 0
        var timer: LoopTimer?
        var yieldTimer: LoopTimer?
        var yielding: (() -> Void)?
        var finished = false
        // The run waits for its pace or for the routers: nothing of an entry is in flight.
        var waiting = false
        func finish() {
            guard !finished else { return }
            finished = true
            timer?.close()
            timer = nil
            yieldTimer?.close()
            yieldTimer = nil
            yielding = nil
            run.stopWaiting = nil
            completion(summary)
        }
        func stopIfCancelled() -> Bool {
            guard run.isCancelled else { return false }
            summary.cancelled = position < targets.count || yielding != nil
            finish()
            return true
        }
        run.stopWaiting = { if waiting { _ = stopIfCancelled() } }
        func next() {
            if stopIfCancelled() { return }
            guard position < targets.count else { return finish() }
            let delay = pacer.dueMs(index: firstIndex + summary.replayed.count) - Clock.monotonicMs()
            guard delay <= 0 else {
                waiting = true
                return timer!.schedule(afterMs: delay)
            }
            let reference = targets[position]
            position += 1
            lookUp(reference) { [weak self] found in
                guard let self else { return }
                switch found {
                case let .failure(error):
                    summary.failure = error
                    return finish()
                case .success(nil):
                    summary.gone += 1
                    onStep(reference, .gone)
                    return next()
                case let .success(record?):
                    let forecast = self.forecast(record, nowMs: Clock.unixMs())
                    guard forecast.replays else {
                        summary.skipped += 1
                        onStep(reference, .skipped(record, forecast))
                        return next()
                    }
                    let plan = record.replay(ledgerTTLSeconds: self.policy(record.app).ledgerTTLSeconds,
                                             ringTimeoutMs: self.ringTimeoutMs(record.app))
                    func write() {
                        self.store.replay(self.keys(record.app), plan, yieldAtUnread: DeadLetterOperations.replayYieldsAtUnread) { result in
                            switch result {
                            case let .success(.written(entry)):
                                summary.replayed.append("\(record.app)/\(record.id)")
                                onStep(reference, .replayed(record, callsEntry: entry, forecast))
                            case .success(.gone):
                                summary.gone += 1
                                onStep(reference, .gone)
                            case .success(.yielded):
                                summary.yields += 1
                                yielding = write
                                waiting = true
                                return yieldTimer!.schedule(afterMs: DeadLetterOperations.replayYieldWaitMs)
                            case let .failure(error):
                                summary.failure = error
                                return finish()
                            }
                            next()
                        }
                    }
                    write()
                }
            }
        }
        timer = LoopTimer(loop: loop) {
            waiting = false
            next()
        }
        yieldTimer = LoopTimer(loop: loop) {
            waiting = false
            if stopIfCancelled() { return }
            let again = yielding
            yielding = nil
            again?()
        }
        next()
        return run
    }

    /// Reasons of the dead letters that say APNs refused an app's credential: the code of
    /// Routing's `DeadLetterReason.apnsCredentials`, which this module does not import
    /// (`CredentialRefusalReasonTests` holds the two equal).
    public static let credentialRefusalReason = "apns_credentials"
    /// Entries of an app's dead letters, newest first, that `newestCredentialRefusal` reads.
    public static let credentialRefusalScan = 200

    /// The newest dead letter of `app` whose reason says APNs refused its credential
    /// (`credentialRefusalReason`), among its newest `credentialRefusalScan` entries (one
    /// XREVRANGE); nil when none is. What a replay warns of: the replayed calls would likely
    /// die the same way.
    public func newestCredentialRefusal(app: String, completion: @escaping (Result<DeadLetterRecord?, RedisError>) -> Void) {
        var filter = DeadLetterFilter(apps: [app])
        filter.reason = DeadLetterOperations.credentialRefusalReason
        listing(apps: [app], filter: filter, before: nil, limit: 1, scanLimit: DeadLetterOperations.credentialRefusalScan) { result in
            completion(result.map(\.records.first))
        }
    }

    /// The warning before a replay of `app`, whose credential APNs refused (`reason`) at
    /// `atMs` (nil: a router says so now), as the console and `pushgw dead replay` give it.
    public static func credentialRefusalWarning(app: String, reason: String, atMs: Int64?, nowMs: Int64) -> String {
        let when: String
        if let atMs {
            let minutes = max(0, nowMs - atMs) / 60_000
            when = minutes == 0 ? "less than a minute ago" : DeadFormat.count(Int(minutes), "minute") + " ago"
        } else {
            when = "now (this gateway's router withholds its pushes)"
        }
        return "APNs refused \(app)'s credential \(when) (\(reason)): the replayed calls will likely die again."
    }

    /// What a purge removed.
    public struct PurgeSummary: Sendable {
        /// Entries that existed and are gone.
        public var purged = 0
        /// `app/id` of each dead letter in the batches that ran.
        public var ids: [String] = []
        /// The Redis failure that stopped the purge early.
        public var failure: RedisError?

        public init() {}

        /// Adds what a later part of the same purge did.
        public mutating func add(_ part: PurgeSummary) {
            purged += part.purged
            ids += part.ids
            failure = part.failure ?? failure
        }
    }

    /// Deletes `targets` (and the replay ledgers they continued), app by app in batches of 500.
    public func purge(_ targets: [DeadLetterRecord], completion: @escaping (PurgeSummary) -> Void) {
        var summary = PurgeSummary()
        var batches: [(String, ArraySlice<DeadLetterRecord>)] = []
        for app in Array(Set(targets.map(\.app))).sorted() {
            let records = targets.filter { $0.app == app }
            var start = 0
            while start < records.count {
                batches.append((app, records[start..<min(start + 500, records.count)]))
                start += 500
            }
        }
        func next(_ index: Int) {
            guard index < batches.count else { return completion(summary) }
            let (app, batch) = batches[index]
            let ids = batch.map(\.id)
            store.purge(keys(app), ids: ids, ledgerDigests: batch.filter(\.continuesLedger).map(\.eventDigest)) { result in
                switch result {
                case let .success(n):
                    summary.purged += Int(n)
                    summary.ids += ids.map { "\(app)/\($0)" }
                    next(index + 1)
                case let .failure(error):
                    summary.failure = error
                    completion(summary)
                }
            }
        }
        next(0)
    }

    /// Deletes the dead letters `targets` names (each with its app), 50 at a time: each batch
    /// is read first (`lookUp`, for the ledgers the entries continued), then purged. Those
    /// gone meanwhile are not counted.
    public func purge(_ targets: [DeadLetterReference], completion: @escaping (PurgeSummary) -> Void) {
        var summary = PurgeSummary()
        func next(_ start: Int) {
            guard start < targets.count else { return completion(summary) }
            let batch = Array(targets[start..<min(start + 50, targets.count)])
            var found: [DeadLetterRecord?] = Array(repeating: nil, count: batch.count)
            var failure: RedisError?
            var waiting = batch.count
            for (i, reference) in batch.enumerated() {
                lookUp(reference) { [weak self] result in
                    switch result {
                    case let .success(record): found[i] = record
                    case let .failure(error): failure = failure ?? error
                    }
                    waiting -= 1
                    guard waiting == 0, let self else { return }
                    if let failure {
                        summary.failure = failure
                        return completion(summary)
                    }
                    self.purge(found.compactMap { $0 }) { part in
                        summary.add(part)
                        if part.failure != nil { return completion(summary) }
                        next(start + batch.count)
                    }
                }
            }
        }
        next(0)
    }

    // MARK: Counting

    /// One app's figures (`pushgw dead stats`).
    public struct AppStats: Sendable {
        public var app: String
        public var count = 0
        public var reasons: [String: Int] = [:]
        public var oldest: (id: String, timeMs: Int64)?
        public var policy: DeadLetterRetentionPolicy
        /// What a retention trim run now would remove.
        public var trimNow: Int64 = 0

        public init(app: String, policy: DeadLetterRetentionPolicy) {
            self.app = app
            self.policy = policy
        }
    }

    /// Counts every dead letter of `apps` by reason, finds the oldest, and asks what a trim
    /// now would remove. Reads each whole stream, a bounded step at a time: for the command
    /// line, not for a page.
    public func stats(apps: [String], completion: @escaping (Result<[AppStats], RedisError>) -> Void) {
        var stats: [AppStats] = []
        func count(_ index: Int) {
            guard index < apps.count else { return trims() }
            var s = AppStats(app: apps[index], policy: policy(apps[index]))
            let keys = keys(apps[index])
            func read(_ start: String) {
                pacing.run { [store] finished in
                    store.range(keys, start: start, count: DeadLetterOperations.pageSize, newestFirst: false) { result in
                        counted(result)
                        finished()
                    }
                }
            }
            func counted(_ result: Result<DeadLetterStore.RangePage, RedisError>) {
                switch result {
                case let .failure(error): completion(.failure(error))
                case let .success(range):
                    for entry in range.entries {
                        if s.oldest == nil { s.oldest = (entry.id, DeadLetterRecord.timeMs(ofID: entry.id) ?? 0) }
                        s.count += 1
                        s.reasons[entry.fields["reason"] ?? "unknown", default: 0] += 1
                    }
                    guard range.more, let last = range.entries.last else {
                        stats.append(s)
                        return count(index + 1)
                    }
                    read("(" + last.id)
                }
            }
            read("-")
        }
        func trims() {
            pendingTrims(apps: apps, horizonMs: 0) { pending in
                for i in stats.indices {
                    switch pending[stats[i].app] {
                    case let .success(p)?: stats[i].trimNow = p.total
                    case let .failure(error)?: return completion(.failure(error))
                    case nil: break
                    }
                }
                completion(.success(stats))
            }
        }
        count(0)
    }

    /// Per app: the dead stream's length and what a trim `horizonMs` from now would remove
    /// (one script per app, pipelined).
    public func pendingTrims(apps: [String], horizonMs: Int64,
                             completion: @escaping ([String: Result<DeadLetterStore.PendingTrim, RedisError>]) -> Void) {
        let retention = apps.map { DeadLetterRetention.App(keys: keys($0), policy: policy($0)) }
        DeadLetterRetention.pendingTrims(store: store, apps: retention, horizonMs: horizonMs, completion: completion)
    }

    // MARK: Audit

    /// Appends `record` to the audit stream.
    public func audit(_ record: AuditRecord, completion: @escaping (Result<String, RedisError>) -> Void) {
        store.audit(record.streamFields, maxLen: DeadLetterOperations.auditMaxLen, completion: completion)
    }

    /// The newest `count` audit records, newest first, before `cursor` (an exclusive bound,
    /// `(ID`; nil from the newest).
    public func auditTrail(count: Int, before cursor: String? = nil,
                           completion: @escaping (Result<[AuditEntry], RedisError>) -> Void) {
        store.auditRange(end: cursor ?? "+", count: count) { result in
            completion(result.map { $0.map(AuditEntry.init(entry:)) })
        }
    }
}

/// Why an operation on named dead letters did nothing.
public enum DeadLetterOperationError: Error, Equatable, Sendable, CustomStringConvertible {
    case redis(RedisError)
    /// A reference names an app that is not configured.
    case unknownApp(String, id: String)
    /// Named dead letters missing (or in several apps): one problem each.
    case notFound([String])

    public var description: String {
        switch self {
        case let .redis(error): return "\(error)"
        case let .unknownApp(app, id): return "no app \"\(app)\" in the config (in \(app)/\(id))"
        case let .notFound(problems):
            return problems[0] + (problems.count > 1 ? " (and \(problems.count - 1) more)" : "")
        }
    }
}

/// A paced replay under way (`DeadLetterOperations.replayPaced`), to cancel it. Loop-owned.
public final class ReplayRun {
    public private(set) var isCancelled = false
    /// Set by the run: stops it now if it waits, else it stops after the entry in progress.
    var stopWaiting: (() -> Void)?

    init() {}

    /// Stops the run after the entry in progress: no further dead letter is replayed; its
    /// completion comes with `ReplaySummary.cancelled`.
    public func cancel() {
        isCancelled = true
        stopWaiting?()
    }
}
