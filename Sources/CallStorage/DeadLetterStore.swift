import EventLoop
import RedisClient

/// The Redis side of the dead letters (docs/protocol.md, `PREFIX:{APP}:dead`): reading entries
/// and replay ledgers, replaying, purging, retention trims and the operators' audit stream.
/// Dead letters are *written* by `CallStore.deadLetter` (the router); everything an operator
/// or the retention runner does to them afterwards goes through here.
///
/// Invariants:
/// - Every change is one Lua script (`DeadLetterLua`) touching one app's hash slot, except the
///   audit XADD, which is one command on the gateway-wide `GatewayKeys.audit`.
/// - A replay puts the event back on `calls` with fields `event` (unchanged text), `replay`
///   (the dead entry id) and `replays` (the new count), and stores the accumulated history in
///   the app's replay ledger (`AppKeys.replayLedger`, keyed by the event's digest): the
///   router writes a new dead letter without knowing about replays, and the DeadLetters
///   module joins the two when it reads.
///
/// Completions run on the loop, once each, with a `RedisError` on failure.
/// Loop-owned: call everything on the loop thread of its connection (or cluster), which the
/// caller owns (starts and closes). On a cluster each command goes to its key's slot owner.
public final class DeadLetterStore {
    /// Where its commands go: one connection, or a cluster.
    public let topology: RedisTopology
    public let gatewayKeys: GatewayKeys
    private let rangeScript = RedisScript(DeadLetterLua.range)
    private let replayScript = RedisScript(DeadLetterLua.replay)
    private let purgeScript = RedisScript(DeadLetterLua.purge)
    private let trimScript = RedisScript(DeadLetterLua.trim)
    private let pendingTrimScript = RedisScript(DeadLetterLua.pendingTrim)

    /// Each app's retention windows (`apps.APP.retention`), by app id: a replay forgets the
    /// event's compact record in the app's live outcomes buckets (`OutcomeBuckets`).
    public var windows: [String: RetentionWindows]

    public init(topology: RedisTopology, prefix: String, windows: [String: RetentionWindows] = [:]) {
        self.topology = topology
        self.gatewayKeys = GatewayKeys(prefix: prefix)
        self.windows = windows
    }

    // MARK: Reading

    /// The most a `range` reads in one step: at most `count` entries (callers ask at most 500)
    /// and, once this many bytes of field names and values were read, no further entry. Redis
    /// spends about 10 µs per entry moving it through the script and about 2 ms on an entry of
    /// 1 MB (measured on Redis 7.0), so a step of 100 ordinary entries, or one of a megabyte,
    /// holds Redis for a millisecond or two.
    public static let rangeByteBudget = 256 << 10
    /// An `event` longer than this is read as its first `DeadLetterEntry.keptPrefixBytes`
    /// bytes, with `event_bytes` saying its length. It is the router's own limit
    /// (`CallEvent.maxEventBytes`): such an event was refused for its size, replaying it
    /// would be refused again, and reading it whole would let one dead letter cost megabytes.
    public static let wholeEventLimit = 65_536

    /// One bounded step of a range read.
    public struct RangePage: Equatable, Sendable {
        /// The entries, in the order asked; an `event` over `wholeEventLimit` cut to its prefix
        /// and followed by `event_bytes` (its length).
        public var entries: [StreamEntry]
        /// True when the step stopped at its count or byte budget: more may follow after the
        /// last entry. False at the end of the range.
        public var more: Bool
    }

    /// The entries of the app's dead stream between `start` and `end` (`-`/`+` for the ends,
    /// `(id` exclusive; give them in XRANGE order whatever the direction), oldest or newest
    /// first: at most `count` (> 0) of them, and no more once `rangeByteBudget` bytes were
    /// read. One script (`DeadLetterLua.range`), so Redis does a bounded amount of work per
    /// call and the gateway holds a bounded reply, however large the entries.
    public func range(_ app: AppKeys, start: String = "-", end: String = "+", count: Int, newestFirst: Bool,
                      completion: @escaping (Result<RangePage, RedisError>) -> Void) {
        precondition(count > 0, "range needs a positive count")
        let args = [start, end, String(count), String(DeadLetterStore.rangeByteBudget), String(DeadLetterStore.wholeEventLimit),
                    String(DeadLetterEntry.keptPrefixBytes), newestFirst ? "1" : "0"]
        rangeScript.run(on: topology.channel(for: app.dead), keys: [app.dead], args: args) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 2, let more = parts[0].integer else {
                    return .failure(.unexpectedReply("range script \(reply)"))
                }
                do { return .success(RangePage(entries: try StreamReplies.range(parts[1]), more: more == 1)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// The dead letter `id` of the app, nil when there is none (its event cut as `range` cuts it).
    public func entry(_ app: AppKeys, id: String, completion: @escaping (Result<StreamEntry?, RedisError>) -> Void) {
        range(app, start: id, end: id, count: 1, newestFirst: false) { result in
            completion(result.map { $0.entries.first })
        }
    }

    /// XLEN of the app's dead stream.
    public func length(_ app: AppKeys, completion: @escaping (Result<Int64, RedisError>) -> Void) {
        topology.send(["XLEN", app.dead], key: app.dead) { result in
            completion(result.flatMap { reply in
                reply.integer.map { .success($0) } ?? .failure(.unexpectedReply("XLEN \(reply)"))
            })
        }
    }

    /// The replay ledgers of `digests` (pipelined HGETALLs), by digest; digests without a
    /// ledger are absent.
    public func ledgers(_ app: AppKeys, digests: [String],
                        completion: @escaping (Result<[String: [String: String]], RedisError>) -> Void) {
        let unique = Array(Set(digests)).sorted()
        guard !unique.isEmpty else { return completion(.success([:])) }
        var found: [String: [String: String]] = [:]
        var failure: RedisError?
        var remaining = unique.count
        for digest in unique {
            topology.send(["HGETALL", app.replayLedger(digest)], key: app.dead) { result in
                switch result {
                case let .success(reply):
                    if let items = reply.array, items.count % 2 == 0 {
                        var fields: [String: String] = [:]
                        var i = 0
                        while i < items.count {
                            if let k = items[i].string, let v = items[i + 1].string { fields[k] = v }
                            i += 2
                        }
                        if !fields.isEmpty { found[digest] = fields }
                    } else if failure == nil {
                        failure = .unexpectedReply("HGETALL \(reply)")
                    }
                case let .failure(error):
                    if failure == nil { failure = error }
                }
                remaining -= 1
                if remaining == 0 { completion(failure.map { .failure($0) } ?? .success(found)) }
            }
        }
    }

    // MARK: Changing

    /// What one replay writes.
    public struct Replay: Equatable, Sendable {
        /// The dead letter to replay (deleted in the same step).
        public var deadEntryID: String
        /// The event, the bytes the dead letter holds.
        public var event: [UInt8]
        /// The event's `id`, whose recorded outcome is forgotten so the replay is routed;
        /// nil for an event without a readable id.
        public var eventId: String?
        /// The ledger key's digest of `event`.
        public var eventDigest: String
        /// How many times the event has been replayed, this replay included (≥ 1).
        public var replays: Int
        /// The ledger's `history`: the earlier dead letters of the event, as JSON.
        public var historyJSON: String
        /// How long the ledger is kept, seconds (> 0).
        public var ledgerTTLSeconds: Int
        /// The original call's deadline, unix ms (>= 0): the new calls entry's `call_deadline`,
        /// which the router takes as the deadline of an event without its own, and the
        /// ledger's, for a replay of the replay.
        public var callDeadlineMs: Int64
        /// For one device's dead letter (`DeadLetterEntry.device`), that device: the new calls
        /// entry's `replayed_device`, so the replay rings it alone of the event's devices.
        public var device: String?

        public init(deadEntryID: String, event: [UInt8], eventId: String?, eventDigest: String, replays: Int,
                    historyJSON: String, ledgerTTLSeconds: Int, callDeadlineMs: Int64, device: String? = nil) {
            self.device = device
            self.deadEntryID = deadEntryID
            self.event = event
            self.eventId = eventId
            self.eventDigest = eventDigest
            self.replays = replays
            self.historyJSON = historyJSON
            self.ledgerTTLSeconds = ledgerTTLSeconds
            self.callDeadlineMs = callDeadlineMs
        }
    }

    /// What one replay step did.
    public enum ReplayWrite: Equatable, Sendable {
        /// The event is on the calls stream as this entry; the dead letter is gone.
        case written(callsEntry: String)
        /// The dead letter no longer exists: nothing was written.
        case gone
        /// The calls stream held `unread` entries the routers had not read, at least the
        /// replay's `yieldAtUnread`: nothing was written (try again later).
        case yielded(unread: Int)
    }

    /// Replays one dead letter (see `DeadLetterLua.replay`) unless the app's calls stream holds
    /// `yieldAtUnread` or more entries the routers have not read (0: whatever it holds).
    public func replay(_ app: AppKeys, _ replay: Replay, yieldAtUnread: Int = 0,
                       completion: @escaping (Result<ReplayWrite, RedisError>) -> Void) {
        precondition(replay.replays >= 1 && replay.ledgerTTLSeconds > 0 && replay.callDeadlineMs >= 0 && yieldAtUnread >= 0,
                     "a replay counts from 1, its ledger needs a TTL, its deadline is a unix time and its yield is not negative")
        var keys = [app.calls, app.dead, app.replayLedger(replay.eventDigest)]
        if let eventId = replay.eventId {
            keys.append(app.result(eventId))
            let buckets = RetentionWindows.of(app, in: windows).liveBuckets(atUnixSeconds: Clock.unixMs() / 1000)
            keys += buckets.map { app.outcomes($0) }
        }
        let args: [RedisArgument] = [.text(replay.deadEntryID), .bytes(replay.event), .text(String(replay.replays)),
                                     .text(replay.historyJSON), .text(String(replay.ledgerTTLSeconds)),
                                     .text(String(replay.callDeadlineMs)), .text(String(yieldAtUnread)),
                                     .text(GatewayKeys.routersGroup), .text(replay.device ?? ""), .text(replay.eventId ?? "")]
        replayScript.run(on: topology.channel(for: keys[0]), keys: keys, arguments: args) { result in
            completion(result.flatMap { reply in
                if reply.isNull { return .success(.gone) }
                if let unread = reply.integer { return .success(.yielded(unread: Int(unread))) }
                return reply.string.map { .success(.written(callsEntry: $0)) } ?? .failure(.unexpectedReply("replay script \(reply)"))
            })
        }
    }

    /// Deletes the dead letters `ids` of the app and the replay ledgers of `ledgerDigests`
    /// (those the deleted entries continued). Returns how many entries existed and are gone.
    public func purge(_ app: AppKeys, ids: [String], ledgerDigests: [String],
                      completion: @escaping (Result<Int64, RedisError>) -> Void) {
        guard !ids.isEmpty else { return completion(.success(0)) }
        let keys = [app.dead] + Array(Set(ledgerDigests)).sorted().map(app.replayLedger)
        purgeScript.run(on: topology.channel(for: keys[0]), keys: keys, args: ids) { result in
            completion(result.flatMap { reply in
                reply.integer.map { .success($0) } ?? .failure(.unexpectedReply("purge script \(reply)"))
            })
        }
    }

    // MARK: Retention

    /// What one retention trim removed.
    public struct Trim: Equatable, Sendable {
        /// Entries older than the maximum age.
        public var byAge: Int64
        /// The oldest entries beyond the maximum count (after the age trim).
        public var byCount: Int64
        /// Redis-server time of the trim, unix ms.
        public var serverTimeMs: Int64
        /// The oldest entries over the maximum size (after the other two).
        public var bySize: Int64 = 0
        public var total: Int64 { byAge + byCount + bySize }
    }

    /// Trims the app's dead stream to `maxEntries` entries none older than `maxAgeMs`
    /// (Redis-server clock), exactly, then to about `maxBytes` of memory (`MEMORY USAGE`; at
    /// most 8 MiB of entries go per run).
    public func trim(_ app: AppKeys, maxEntries: Int, maxAgeMs: Int64, maxBytes: Int, completion: @escaping (Result<Trim, RedisError>) -> Void) {
        precondition(maxEntries > 0 && maxAgeMs > 0 && maxBytes > 0, "retention needs a positive count, age and size")
        trimScript.run(on: topology.channel(for: app.dead), keys: [app.dead],
                       args: [String(maxEntries), String(maxAgeMs), String(maxBytes)]) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 4, let age = parts[0].integer, let count = parts[1].integer,
                      let now = parts[2].integer, let size = parts[3].integer else { return .failure(.unexpectedReply("trim script \(reply)")) }
                return .success(Trim(byAge: age, byCount: count, serverTimeMs: now, bySize: size))
            })
        }
    }

    /// What a trim would remove: the dead stream's length and the entries a trim run
    /// `horizonMs` from now would remove, by age, by count and by size.
    public struct PendingTrim: Equatable, Sendable {
        public var length: Int64
        public var byAge: Int64
        public var byCount: Int64
        /// Redis-server time of the count, unix ms.
        public var serverTimeMs: Int64
        /// True when a count stopped at the scan limit (the real number is larger).
        public var capped: Bool
        public var bySize: Int64 = 0
        public var total: Int64 { byAge + byCount + bySize }
    }

    /// Counts what `trim` would remove if it ran `horizonMs` from now (0: now), reading at
    /// most about `scanLimit` old entries. Changes nothing.
    public func pendingTrim(_ app: AppKeys, maxEntries: Int, maxAgeMs: Int64, maxBytes: Int, horizonMs: Int64, scanLimit: Int = 100_000,
                            completion: @escaping (Result<PendingTrim, RedisError>) -> Void) {
        precondition(maxEntries > 0 && maxAgeMs > 0 && maxBytes > 0 && horizonMs >= 0 && scanLimit > 0, "pendingTrim needs positive limits")
        let args = [String(maxEntries), String(maxAgeMs), String(horizonMs), String(scanLimit), String(maxBytes)]
        pendingTrimScript.run(on: topology.channel(for: app.dead), keys: [app.dead], args: args) { result in
            completion(result.flatMap { reply in
                guard let p = reply.array, p.count == 6, let len = p[0].integer, let age = p[1].integer,
                      let count = p[2].integer, let now = p[3].integer, let capped = p[4].integer, let size = p[5].integer else {
                    return .failure(.unexpectedReply("pending trim script \(reply)"))
                }
                return .success(PendingTrim(length: len, byAge: age, byCount: count, serverTimeMs: now, capped: capped != 0, bySize: size))
            })
        }
    }

    // MARK: Audit

    /// The audit stream's newest `count` records at or before `end` (`+` for the newest, `(id`
    /// exclusive), newest first.
    public func auditRange(end: String = "+", count: Int, completion: @escaping (Result<[StreamEntry], RedisError>) -> Void) {
        precondition(count > 0, "auditRange needs a positive count")
        topology.send(["XREVRANGE", gatewayKeys.audit, end, "-", "COUNT", String(count)], key: gatewayKeys.audit) { result in
            completion(result.flatMap { reply in
                do { return .success(try StreamReplies.range(reply)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// Appends one record to the audit stream (`GatewayKeys.audit`, `MAXLEN ~ maxLen`),
    /// fields in the order given. Returns the entry id.
    public func audit(_ fields: [(String, String)], maxLen: Int, completion: @escaping (Result<String, RedisError>) -> Void) {
        precondition(!fields.isEmpty && maxLen > 0, "an audit record needs fields and a cap")
        var args = ["XADD", gatewayKeys.audit, "MAXLEN", "~", String(maxLen), "*"]
        for (name, value) in fields { args += [name, value] }
        topology.send(args, key: args[1]) { result in
            completion(result.flatMap { reply in
                reply.string.map { .success($0) } ?? .failure(.unexpectedReply("XADD audit \(reply)"))
            })
        }
    }
}
