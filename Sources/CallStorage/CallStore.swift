import EventLoop
import RedisClient

/// The typed Redis operations of the router and the workers: reading call events, looking
/// them up (with the in-flight claim), recording outcomes, dead letters and known-invalid
/// tokens, consumer liveness and the take-over of abandoned entries. Cancellations and
/// retries are `RetrySchedule`'s.
///
/// Invariants:
/// - Every operation that changes state, but the consumer group's creation, is one Lua
///   script (one atomic step); reads are one round trip.
/// - Keys come from `AppKeys`/`GatewayKeys` only; a script for one app touches only that
///   app's hash slot (the consumer registry and the scripts over several apps need a single
///   Redis).
/// - An outcome is recorded at most once per event id within the app's idempotency window
///   (`RetentionWindows.resultSeconds`), and an entry is acknowledged (and deleted) only in
///   the same step that records its outcome (or, in `RetrySchedule`, schedules its retry), so delivery is
///   at least once (docs/protocol.md).
/// - One `RedisTopology` carries every command but `readNew`: one connection (`pushgw-write`
///   in the process), or the owners of their keys' slots on a cluster. `readNew` goes to the
///   store's `StreamReads`, which never share a connection with the other commands (a blocked
///   XREADGROUP holds up its connection) and keep every configured app's consumer group, so
///   `NOGROUP` does not stick after a Redis restart without persistence.
///
/// Completions run on the loop, once each. Errors are `RedisError`s: `.disconnected` and
/// `.connectFailed` are transient (retry later), `.server` is Redis refusing the command.
/// Loop-owned: call everything on the loop thread; `start()` before use, `close()` at the end.
public final class CallStore {
    /// Names, caps and windows. Defaults are the production values. (How Redis is reached is
    /// the store's `RedisTopology`.)
    public struct Config: Sendable {
        /// The key prefix; must equal every `AppKeys.prefix` given to the store.
        public var prefix: String
        /// The consumer group on every calls stream.
        public var group: String
        /// Where a newly created group starts: `0` (default) delivers entries written before
        /// the group existed — safe because finished entries are deleted, so the stream holds
        /// only unfinished work; `$` would skip them.
        public var groupStartID: String
        /// `MAXLEN ~` of the results and feedback streams; of the dead stream when not nil.
        public var resultsMaxLen: Int
        public var feedbackMaxLen: Int
        public var deadMaxLen: Int?
        /// Each app's retention windows (`apps.APP.retention`), by app id: the idempotency
        /// window of its result keys, its cancellation markers' and known-invalid tokens' TTLs.
        /// An app not listed has `RetentionWindows.defaults`.
        public var windows: [String: RetentionWindows]
        /// A consumer whose lease lapsed this long ago is dropped from the registry, ms.
        public var consumerForgetMs: Int64
        /// `claimAbandoned` reads at most this many XPENDING pages per call.
        public var claimScanPages: Int
        /// With ring receipts on, how long a VoIP token stays suspected of iOS's silent ban
        /// once marked, and how long its silent count and the app's calls without a receipt
        /// last since their last change, seconds (24 h; docs/protocol.md).
        public var voipSuspicionTTLSeconds = 86_400

        public init(prefix: String = "pushgw", group: String = GatewayKeys.routersGroup, groupStartID: String = "0",
                    resultsMaxLen: Int = 100_000, feedbackMaxLen: Int = 100_000, deadMaxLen: Int? = nil,
                    windows: [String: RetentionWindows] = [:], consumerForgetMs: Int64 = 86_400_000, claimScanPages: Int = 10) {
            precondition(resultsMaxLen > 0 && feedbackMaxLen > 0 && (deadMaxLen ?? 1) > 0, "stream caps must be positive")
            precondition(claimScanPages > 0, "claimScanPages must be positive")
            self.prefix = prefix
            self.group = group
            self.groupStartID = groupStartID
            self.resultsMaxLen = resultsMaxLen
            self.feedbackMaxLen = feedbackMaxLen
            self.deadMaxLen = deadMaxLen
            self.windows = windows
            self.consumerForgetMs = consumerForgetMs
            self.claimScanPages = claimScanPages
        }

        /// The retry schedule's names, caps and windows, the store's.
        var retryScheduleConfig: RetrySchedule.Config {
            RetrySchedule.Config(prefix: prefix, group: group, windows: windows, resultsMaxLen: resultsMaxLen)
        }
    }

    /// Its windows change with the apps (`updateApps`).
    public private(set) var config: Config
    /// The configured apps: their groups are (re)created by the reads (`StreamReads.apps`).
    public private(set) var apps: [AppKeys]
    public let gatewayKeys: GatewayKeys
    /// Where every command but `readNew` goes: one connection, or the cluster.
    public let topology: RedisTopology
    /// The durable retry schedule, on `topology` (the router schedules and cancels retries
    /// there; the mover uses a schedule on a topology of its own).
    public let retries: RetrySchedule
    /// Where `readNew` goes: a connection of its own beside `topology`'s on one Redis, a lane
    /// per app of the cluster client on a cluster.
    private let reads: any StreamReads

    private let finishScript = RedisScript(CallStoreLua.finish)
    private let deadLetterScript = RedisScript(CallStoreLua.deadLetter)
    private let claimScript = RedisScript(CallStoreLua.claim)
    private let heartbeatScript = RedisScript(CallStoreLua.heartbeat)
    private let registerScript = RedisScript(CallStoreLua.register)
    private let retireScript = RedisScript(CallStoreLua.retire)
    private let claimOwnScript = RedisScript(CallStoreLua.claimOwn)
    private let claimCallsScript = RedisScript(CallStoreLua.claimCalls)
    private let takeOverScript = RedisScript(CallStoreLua.takeOverClaims)
    private let liveConsumersScript = RedisScript(CallStoreLua.liveConsumers)
    private let registryScript = RedisScript(CallStoreLua.registry)
    private let forgetLapsedScript = RedisScript(CallStoreLua.forgetLapsed)
    private let backlogsScript = RedisScript(CallStoreLua.backlogs)
    private let clearSuspicionScript = RedisScript(CallStoreLua.clearVoipSuspicion)

    /// A store whose commands go to `topology`, which it starts and closes (make it with
    /// `RedisTopology.own(…clientName: "pushgw-write")`; nothing else may close it).
    ///
    /// New entries are read apart (`StreamReads`): on one Redis on a sibling of the topology's
    /// connection named `pushgw-read` (the same sentinels' watch); on a cluster each app's
    /// stream by a blocking read of its own on the app's primary that blocks `readBlockMs`
    /// (`ClusterStreamReads`; on one Redis the caller's `blockMs` is the read's).
    public init(config: Config, apps: [AppKeys], topology: RedisTopology, readBlockMs: Int64 = 30_000) {
        precondition(apps.allSatisfy { $0.prefix == config.prefix }, "every AppKeys must use the store's prefix")
        self.config = config
        self.apps = apps
        self.gatewayKeys = GatewayKeys(prefix: config.prefix)
        self.topology = topology
        retries = RetrySchedule(topology: topology, config: config.retryScheduleConfig)
        switch topology {
        case .single(let commands):
            reads = SingleStreamReads(connection: commands.sibling(clientName: "pushgw-read"), apps: apps,
                                      group: config.group, groupStartID: config.groupStartID)
        case .cluster(let cluster):
            reads = ClusterStreamReads(cluster: cluster, apps: apps, group: config.group, groupStartID: config.groupStartID,
                                       blockMs: readBlockMs)
        }
        reads.onReadLost = { [unowned self] in self.onReadReplyMayBeLost?() }
    }

    /// Runs when a read of new entries may have been served by Redis with its reply lost: on
    /// one Redis after every reconnect of the reads' connection, once its groups are re-created (a hung
    /// Redis reads its input when it resumes, so a read in flight on the dropped connection
    /// may still be served); on a cluster when an app's read failed with its connection. Its
    /// entries are then pending for the consumer, and the router claims them back (`claimOwn`).
    public var onReadReplyMayBeLost: (() -> Void)?

    /// Switches to a new set of apps (a config reload): their groups are created now and on
    /// every later connect; removed apps are no longer read (their streams stay in Redis).
    /// `windows` are the apps' retention windows from then on (`Config.windows`), here and in
    /// `retries`: a key written before keeps the TTL it was given.
    public func updateApps(_ newApps: [AppKeys], windows: [String: RetentionWindows]) {
        precondition(newApps.allSatisfy { $0.prefix == config.prefix }, "every AppKeys must use the store's prefix")
        let added = newApps.filter { !apps.contains($0) }
        apps = newApps
        config.windows = windows
        retries.config.windows = windows
        reads.apps = newApps
        for app in added { ensureGroup(app) { _ in } }
    }

    /// Connects the topology and the reads; on a cluster, reads its slot map and creates every
    /// app's group.
    public func start() {
        topology.start()
        reads.start()
    }

    /// Closes the reads, then the topology (the reads' connection may use the topology's watch
    /// of the sentinels); operations in flight complete `.disconnected`.
    public func close() {
        reads.close()
        topology.close()
    }

    /// The store's connections by name, for metrics and the admin endpoint: `read` and `write`
    /// on one Redis, each node connection on a cluster.
    public var links: [(name: String, connection: RedisConnection)] {
        switch topology {
        case .single(let commands): return reads.ownLinks + [("write", commands)]
        case .cluster(let cluster): return reads.ownLinks + cluster.nodeConnections
        }
    }

    /// The admin endpoint's probe: succeeds when Redis serves commands. `PING` on one Redis;
    /// on a cluster `EXISTS` of the registry's key on its primary instead, because a cluster
    /// node answers `PING` even while it refuses every keyed command (`-CLUSTERDOWN`: a slot
    /// without a primary, as between a primary's loss and its replica's promotion), and the
    /// probe must fail then.
    public func ping(completion: @escaping (Result<Void, RedisError>) -> Void) {
        let probe: [String]
        switch topology {
        case .single: probe = ["PING"]
        case .cluster: probe = ["EXISTS", gatewayKeys.consumers]
        }
        channel(gatewayKeys.consumers).send(command: RedisCommand(probe), blockMs: 0) { result in
            completion(result.flatMap { reply in
                switch reply {
                case .status("PONG"), .integer: return .success(())
                default: return .failure(.unexpectedReply("\(probe[0]) \(reply)"))
                }
            })
        }
    }

    /// The admin endpoint's write probe: one small write on every node that holds pushgw's keys
    /// — the one Redis, or each primary of a cluster (a key in a slot it owns) — answered per
    /// node, so readiness names a node that refuses writes (`RedisError.writeRefusal`: `OOM`,
    /// `NOREPLICAS`, `MISCONF`, `READONLY`), which a `PING` does not see: Redis answers it while
    /// refusing every write. The write is `SET PREFIX:write-probe… 1 PX 10000` (a key of a few
    /// bytes that expires; it needs only `+set` on the prefix). Nodes are named `primary` on one
    /// Redis and by their address on a cluster.
    public func probeWrites(completion: @escaping ([(node: String, result: Result<Void, RedisError>)]) -> Void) {
        var probes: [(node: String, key: String)]
        switch topology {
        case .single:
            probes = [("primary", gatewayKeys.writeProbe)]
        case .cluster(let cluster):
            let map = cluster.map
            probes = map.primaries.map { node in
                // The first probe key whose slot the node owns (a few tries: each node owns a
                // share of the 16,384 slots).
                var n = 0
                while map.owner(of: HashSlot(key: gatewayKeys.writeProbe(n))) != node, n < 100_000 { n += 1 }
                return (node.description, gatewayKeys.writeProbe(n))
            }
            if probes.isEmpty { probes = [("cluster", gatewayKeys.writeProbe)] }  // no slot map yet: wherever it goes
        }
        var answers: [(node: String, result: Result<Void, RedisError>)?] = Array(repeating: nil, count: probes.count)
        var remaining = probes.count
        for (i, probe) in probes.enumerated() {
            channel(probe.key).send(command: RedisCommand(["SET", probe.key, "1", "PX", "10000"]), blockMs: 0) { result in
                answers[i] = (probe.node, result.map { _ in () })
                remaining -= 1
                if remaining == 0 { completion(answers.compactMap { $0 }) }
            }
        }
    }

    /// Where a command whose first key is `key` goes.
    @inline(__always)
    private func channel(_ key: String) -> any RedisCommandChannel { topology.channel(for: key) }

    // MARK: Groups and reading

    /// `XGROUP CREATE calls group <start> MKSTREAM`; an existing group (`BUSYGROUP`) is success.
    public func ensureGroup(_ app: AppKeys, completion: @escaping (Result<Void, RedisError>) -> Void) {
        createConsumerGroup(app, group: config.group, startID: config.groupStartID, on: channel(app.calls), completion: completion)
    }

    /// One read of new entries over `apps`: at most `count` new entries per app. Returns the
    /// entries of the apps that had any (an empty dictionary when BLOCK timed out).
    /// `blockMs` nil does not block. After a `NOGROUP` answer the groups of `apps` are
    /// re-created before the next read and the error is returned: retry. After any error
    /// wait a little before reading again (an error answers at once, so an immediate retry
    /// loop would spin). On one Redis one `XREADGROUP GROUP g consumer COUNT count [BLOCK
    /// blockMs] STREAMS calls… > …`; on a cluster one read per app (`StreamReads`).
    public func readNew(apps: [AppKeys], consumer: String, count: Int, blockMs: Int64?,
                        completion: @escaping (Result<[AppKeys: [StreamEntry]], RedisError>) -> Void) {
        precondition(!apps.isEmpty && count > 0, "readNew needs apps and a positive count")
        reads.read(apps: apps, consumer: consumer, count: count, blockMs: blockMs, completion: completion)
    }

    // MARK: Recording outcomes

    /// Records the outcomes of several events of one app in one step (one script), each
    /// result replacing the call's in-flight claim in its result key: under load the router
    /// records every outcome reached in one loop turn together, so Redis runs one script per
    /// app per turn instead of one per event. Per record: SET result key = `record.resultJSON`
    /// EX the app's `resultSeconds` and XADD results (`result` = the same JSON, MAXLEN ~), one
    /// feedback entry and one known-invalid key (EX its `invalidTokenSeconds`) per
    /// `invalidTokens`; if a result already claims the event id, only the record's `duplicate`
    /// result is written (`ResultEntry.Keying`). Then the entries are acknowledged and deleted
    /// by one XACK and one XDEL. Every `records[i].record.eventId` must be set.
    public func finish(_ app: AppKeys, _ records: [FinishRecord],
                       completion: @escaping (Result<FinishReport, RedisError>) -> Void) {
        guard !records.isEmpty else { return completion(.success(FinishReport(recorded: [], acknowledged: 0))) }
        // Keys first (calls, results, feedback, then per record its result key and invalid-token
        // keys), then ARGV, written straight into one command buffer: no string per key.
        let guarded = records.contains { $0.ringTally != nil }
        let deadLettering = records.contains { !$0.deadLetters.isEmpty }
        var keyCount = guarded ? 6 : 4
        var size = 0
        for r in records {
            guard let eventId = r.record.eventId else {
                preconditionFailure("finish needs the event id (its idempotency key); use deadLetter for events without one")
            }
            keyCount += 1 + r.invalidTokens.count + (r.deadLetters.isEmpty ? 0 : 1)
            size += app.cancelResultPrefix.utf8.count + eventId.utf8.count + r.record.resultJSON.utf8.count + 64
                + r.invalidTokens.count * 256
            for d in r.deadLetters { size += d.event.count + d.reason.utf8.count + d.attemptsJSON.utf8.count + 256 }
            switch r.ringTally {
            case nil: break
            case let .call(rings, _):
                keyCount += 3 * rings.count
                size += rings.count * 800
            case .receipt:
                keyCount += 1
                size += 400
            }
        }
        if app.sendsWebhooks { keyCount += 1 }
        var body = RedisCommand(reservingBytes: size + 256, arguments: keyCount + 10 + 6 * records.count)
        body.append(app.calls)
        body.append(app.results)
        body.append(app.feedback)
        let windows = RetentionWindows.of(app, in: config.windows)
        let bucket = windows.buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000)
        body.append(app.outcomes(bucket))
        if guarded {
            body.append(app.callsWithoutReceipt)
            body.append(app.voipSuspectedTokens)
        }
        for r in records {
            body.append(app.resultKeyPrefix(r.record.namespace), r.record.eventId!)
            for t in r.invalidTokens { body.append(app.invalidPrefix(t.channel), t.token) }
            switch r.ringTally {
            case nil: break
            case let .call(rings, _):
                for ring in rings {
                    body.append(app.voipSilentPrefix, ring.voipToken)
                    body.append(app.voipSuspectedPrefix, ring.voipToken)
                    body.append(app.silentRingPrefix, ring.ringingID)
                }
            case let .receipt(ringingID):
                body.append(app.silentRingPrefix, ringingID)
            }
            if !r.deadLetters.isEmpty { body.append(app.dead) }
        }
        if app.sendsWebhooks { body.append(app.webhooks) }
        for arg in [config.group, String(windows.resultSeconds), String(config.resultsMaxLen), String(config.feedbackMaxLen),
                    String(windows.invalidTokenSeconds), String(records.count),
                    guarded ? String(config.voipSuspicionTTLSeconds) : "", app.sendsWebhooks ? "webhooks" : "",
                    deadLettering ? app.app : "", config.deadMaxLen.map { String($0) } ?? "",
                    String(windows.detailSeconds), String(windows.buckets.expiresAt(bucket)), String(app.resultPrefix.utf8.count)] {
            body.append(arg)
        }
        for r in records {
            precondition(r.record.keying != .provisional, "finish records outcomes; provisional results are dead letters")
            body.append(r.entryID ?? "")
            body.append(r.record.resultJSON)
            body.append(r.record.keying.rawValue)
            body.append(windows.recordedCode(r.record.compactCode))
            body.append(String(r.invalidTokens.count))
            for t in r.invalidTokens {
                body.append(t.token)
                body.append(t.channel.rawValue)
                body.append(t.reason)
                body.append(String(t.timestampMs))
                body.append(t.environment ?? "")
            }
            if guarded {
                switch r.ringTally {
                case nil:
                    body.append("")
                case let .call(rings, suspectAfter):
                    body.append("c")
                    body.append(String(suspectAfter))
                    body.append(String(rings.count))
                    for ring in rings {
                        body.append(ring.voipToken)
                        body.append(ring.silent ? "1" : "0")
                    }
                case .receipt:
                    body.append("r")
                }
            }
            guard deadLettering else { continue }
            body.append(String(r.deadLetters.count))
            for d in r.deadLetters {
                body.append(bytes: d.event)
                body.append(d.reason)
                body.append(d.attemptsJSON)
                body.append(String(d.firstFailureMs))
                body.append(String(d.lastFailureMs))
                body.append(String(d.replays))
                body.append(d.device ?? "")
                body.append(d.eventBytes.map { String($0) } ?? "")
                body.append(d.eventSHA256 ?? "")
            }
        }
        let count = records.count
        finishScript.run(on: channel(app.calls), keyCount: keyCount, body: body) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == count + (guarded ? 4 : 1), let acked = parts[count].integer else {
                    return .failure(.unexpectedReply("finish script \(reply)"))
                }
                var recorded: [Bool] = []
                var firstOutcomes: [String?] = []
                recorded.reserveCapacity(count)
                firstOutcomes.reserveCapacity(count)
                for part in parts.prefix(count) {
                    if let flag = part.integer, flag == 0 || flag == 1 {
                        recorded.append(flag == 1)
                        firstOutcomes.append(nil)
                    } else if let first = part.string {
                        recorded.append(false)
                        firstOutcomes.append(first)
                    } else {
                        return .failure(.unexpectedReply("finish script \(reply)"))
                    }
                }
                var report = FinishReport(recorded: recorded, firstOutcomes: firstOutcomes, acknowledged: acked)
                if guarded {
                    report.callsWithoutReceipt = parts[count + 1].integer
                    report.suspected = parts[count + 2].array?.compactMap(\.string) ?? []
                    report.rangLate = parts[count + 3].array?.compactMap(\.string) ?? []
                }
                return .success(report)
            })
        }
    }

    /// Clears what the guard against iOS's silent VoIP ban holds of `voipTokens` of `app`
    /// (their silent counts and suspicion marks): they rang (a receipt that came after its
    /// call's record: `FinishReport.rangLate`). Answers how many marks went.
    public func clearVoipSuspicion(_ app: AppKeys, voipTokens: [String], completion: @escaping (Result<Int, RedisError>) -> Void) {
        guard !voipTokens.isEmpty else { return completion(.success(0)) }
        var keys = [app.voipSuspectedTokens]
        for token in voipTokens {
            keys.append(app.voipSilentRings(token))
            keys.append(app.voipSuspected(token))
        }
        clearSuspicionScript.run(on: channel(app.calls), keys: keys, args: voipTokens) { result in
            completion(result.flatMap { reply in
                guard let n = reply.integer else { return .failure(.unexpectedReply("clear VoIP suspicion \(reply)")) }
                return .success(Int(n))
            })
        }
    }

    /// Writes a dead letter in one step: XADD dead (fields of `DeadLetterEntry` + `app`), XADD
    /// results, SET result key (when `record.eventId` is given, as `record.keying` says: `once`
    /// replaces an in-flight claim, and writes only a `duplicate` result when the id already
    /// has an outcome; `provisional`, for invalid events, writes everything and keys the result
    /// only if the key is free), XACK + XDEL of `entryID` if given (dead letters that did not
    /// come from the stream have none).
    public func deadLetter(_ app: AppKeys, entryID: String?, deadLetter: DeadLetterEntry, record: ResultEntry,
                           completion: @escaping (Result<RecordReport, RedisError>) -> Void) {
        precondition(record.keying != .duplicate, "a dead letter is an outcome, not a duplicate's answer")
        let windows = RetentionWindows.of(app, in: config.windows)
        let bucket = windows.buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000)
        var keys = [app.calls, app.results, app.dead]
        if let eventId = record.eventId {
            keys.append(app.resultKeyPrefix(record.namespace) + eventId)
            keys.append(app.outcomes(bucket))
        }
        if app.sendsWebhooks { keys.append(app.webhooks) }
        let args: [RedisArgument] = [.text(config.group), .text(entryID ?? ""), .text(record.resultJSON),
                                     .text(record.keying.rawValue), .text(String(windows.resultSeconds)),
                                     .text(String(config.resultsMaxLen)), .text(config.deadMaxLen.map { String($0) } ?? ""),
                                     .bytes(deadLetter.event), .text(deadLetter.reason), .text(deadLetter.attemptsJSON),
                                     .text(String(deadLetter.firstFailureMs)), .text(String(deadLetter.lastFailureMs)),
                                     .text(String(deadLetter.replays)), .text(app.app),
                                     .text(deadLetter.eventBytes.map { String($0) } ?? ""), .text(deadLetter.eventSHA256 ?? ""),
                                     .text(app.sendsWebhooks ? "webhooks" : ""), .text(windows.recordedCode(record.compactCode)),
                                     .text(String(windows.detailSeconds)), .text(String(windows.buckets.expiresAt(bucket))),
                                     .text(record.eventId ?? "")]
        deadLetterScript.run(on: channel(keys[0]), keys: keys, arguments: args) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 3, parts[0].integer.map({ $0 == 0 || $0 == 1 }) ?? (parts[0].string != nil),
                      let acked = parts[1].integer else {
                    return .failure(.unexpectedReply("dead-letter script \(reply)"))
                }
                return .success(RecordReport(recorded: parts[0].integer == 1, firstOutcome: parts[0].string,
                                             acknowledged: acked == 1, deadEntryID: parts[2].string))
            })
        }
    }

    // MARK: Looking up

    /// One round trip for several events of one app (the router looks up every event of a read
    /// together): per event, the outcome already recorded for its id (read from its result
    /// key), whether it is cancelled, and since when its tokens are known invalid, in one
    /// `MGET` (but for the result keys of the queries that claim). Answers in the order of
    /// `queries`. A result key holding an in-flight
    /// claim (`AppKeys.result`) or an invalid event's result is no outcome
    /// (`ResultEntry.claimedOutcome`). For an app with the compact record (unless `outcomes`
    /// is false and nothing claims), a call whose result key expired is found done by its
    /// compact record (`AppKeys.outcomes`: one `HMGET` per live bucket).
    ///
    /// With `claimAs`, the queries that ask for it (`LookupQuery.claim`) also take the call's
    /// in-flight claim for `claimAs` (`CallStoreLua.claimCalls`, sent right after the `MGET`:
    /// no extra round trip; their result keys and compact records are read there, atomically
    /// with the claim): taken when the call is neither done nor claimed, for `claimTTLMs`.
    /// Each such answer names the holder afterwards (`EventLookup.claimHolder`; nil when the
    /// call is done): `claimAs`, or another consumer, whose claim `takeOverLapsedClaims` takes
    /// over if that consumer's lease lapsed. That is a step of its own, so the other answers
    /// of a lookup need not wait for it: the router acts on each answer in turn with the
    /// answers of its other steps on the app's keys (docs/architecture.md, *How a call event
    /// travels through the router*, Recording). The cancelled markers and token marks are read
    /// just before the claims, not with them: a cancel or a mark written in between is one
    /// written just after (the cancel step reads the call's result, not its claim).
    public func lookup(_ app: AppKeys, _ queries: [LookupQuery], claimAs: String? = nil, claimTTLMs: Int64 = 60_000,
                       outcomes: Bool = true, completion: @escaping (Result<[EventLookup], RedisError>) -> Void) {
        guard !queries.isEmpty else { return completion(.success([])) }
        let claims = claimAs == nil ? 0 : queries.reduce(0) { $0 + ($1.claim ? 1 : 0) }
        let buckets = claims > 0 || outcomes
            ? RetentionWindows.of(app, in: config.windows).liveBuckets(atUnixSeconds: Clock.unixMs() / 1000) : []
        var command = RedisCommand(reservingBytes: queries.count * (2 * app.cancelledPrefix.utf8.count + 190) + 512,
                                   arguments: 1 + 6 * queries.count)
        command.append("MGET")
        var claimed = RedisCommand(reservingBytes: claims > 0 ? claims * (app.resultPrefix.utf8.count + 40) + 128 : 0,
                                   arguments: claims > 0 ? claims + 9 : 0)  // sent only when claims > 0
        var unclaimedIDs: [String] = []
        for q in queries {
            if claims > 0 && q.claim {
                claimed.append(app.resultPrefix, q.eventId)
            } else {
                command.append(app.resultPrefix, q.eventId)
                if !buckets.isEmpty { unclaimedIDs.append(q.eventId) }
            }
            command.append(app.cancelledPrefix, q.eventId)
            if let token = q.voipToken {
                command.append(app.invalidVoipPrefix, token)
                if q.voipSuspicion { command.append(app.voipSuspectedPrefix, token) }
            }
            if let token = q.alertToken { command.append(app.invalidAlertPrefix, token) }
            if let token = q.fcmToken { command.append(app.invalidFcmPrefix, token) }
            for (voip, alert) in zip(q.deviceVoipTokens, q.deviceAlertTokens) {
                if let voip {
                    command.append(app.invalidVoipPrefix, voip)
                    if q.voipSuspicion { command.append(app.voipSuspectedPrefix, voip) }
                }
                if let alert { command.append(app.invalidAlertPrefix, alert) }
            }
            for case let fcm? in q.deviceFcmTokens { command.append(app.invalidFcmPrefix, fcm) }
        }
        let reads = command.count - 1
        // The pipeline: the MGET, one HMGET per bucket of the ids that claim nothing, the claims.
        var sent = [command]
        if !unclaimedIDs.isEmpty {
            for b in buckets {
                var hmget = RedisCommand(reservingBytes: 64 + unclaimedIDs.count * 40, arguments: 2 + unclaimedIDs.count)
                hmget.append("HMGET")
                hmget.append(app.outcomes(b))
                for id in unclaimedIDs { hmget.append(id) }
                sent.append(hmget)
            }
        }
        if claims > 0 {
            for b in buckets { claimed.append(app.outcomes(b)) }
            claimed.append(claimAs ?? "")
            claimed.append(String(claimTTLMs))
            claimed.append(String(buckets.count))
            claimed.append(String(app.resultPrefix.utf8.count))
        }
        // Per claim, the script answers what the key held and, with buckets, the code.
        let perClaim = buckets.isEmpty ? 1 : 2
        let hmgets = sent.count - 1
        let parse: ([RedisReply]) -> Result<[EventLookup], RedisError> = { replies in
            guard let values = replies[0].array, values.count == reads else {
                return .failure(.unexpectedReply("lookup \(replies[0])"))
            }
            var bucketValues: [[RedisReply]] = []
            for reply in replies[1..<1 + hmgets] {
                guard let found = reply.array, found.count == unclaimedIDs.count else {
                    return .failure(.unexpectedReply("lookup's HMGET \(reply)"))
                }
                bucketValues.append(found)
            }
            var held: [RedisReply] = []
            if claims > 0 {
                guard let answers = replies[1 + hmgets].array, answers.count == perClaim * claims else {
                    return .failure(.unexpectedReply("lookup's claims \(replies[1 + hmgets])"))
                }
                held = answers
            }
            var out: [EventLookup] = []
            out.reserveCapacity(queries.count)
            var i = 0, unclaimed = 0, claim = 0
            for q in queries {
                var stored: String?
                var code: String?
                var holder: String?
                var takenNow = false
                if claims > 0 && q.claim {
                    let answer = held[claim]
                    if perClaim == 2 { code = held[claim + 1].string }
                    claim += perClaim
                    if answer == .integer(1) {
                        holder = claimAs
                        takenNow = true
                    } else if let value = answer.string {
                        if value.hasPrefix(CallHistoryStore.inFlightPrefix) {
                            holder = String(value.dropFirst(CallHistoryStore.inFlightPrefix.utf8.count))
                        } else {
                            stored = value
                        }
                    }
                } else {
                    stored = values[i].string
                    i += 1
                    for found in bucketValues where code == nil { code = found[unclaimed].string }
                    unclaimed += 1
                }
                var outcome = ResultEntry.claimedOutcome(stored)
                if outcome == nil, let code {
                    do { outcome = try CompactOutcome.decode(code) } catch {
                        return .failure(.unexpectedReply("lookup of \(q.eventId): \(error)"))
                    }
                }
                var found = EventLookup.Fields(outcome: outcome, cancelled: !values[i].isNull)
                if found.cancelled, let marker = values[i].string, marker != "1" { found.endMarker = marker }
                i += 1
                if q.voipToken != nil {
                    found.voipInvalidSinceMs = values[i].integer
                    i += 1
                    if q.voipSuspicion { found.voipSuspected = !values[i].isNull; i += 1 }
                }
                if q.alertToken != nil { found.alertInvalidSinceMs = values[i].integer; i += 1 }
                if q.fcmToken != nil { found.fcmInvalidSinceMs = values[i].integer; i += 1 }
                for (voip, alert) in zip(q.deviceVoipTokens, q.deviceAlertTokens) {
                    found.deviceVoipInvalidSinceMs.append(voip == nil ? nil : values[i].integer)
                    if voip != nil { i += 1 }
                    if q.voipSuspicion {
                        found.deviceVoipSuspected.append(voip != nil && !values[i].isNull)
                        if voip != nil { i += 1 }
                    }
                    found.deviceAlertInvalidSinceMs.append(alert == nil ? nil : values[i].integer)
                    if alert != nil { i += 1 }
                }
                for fcm in q.deviceFcmTokens {
                    found.deviceFcmInvalidSinceMs.append(fcm == nil ? nil : values[i].integer)
                    if fcm != nil { i += 1 }
                }
                found.claimHolder = holder
                found.claimTakenNow = takenNow
                out.append(EventLookup(found))
            }
            return .success(out)
        }
        // Sent together on the app's connection: nothing this process sends goes between them
        // unless a command is sent again on its own (a script Redis lost: `RedisScript`'s
        // `EVAL`; a cluster's redirect), which only makes the MGET's values older than the
        // claims, as a cancel or a mark written just after would. Answered once every reply
        // is in, with the first failure if any.
        let on = channel(app.calls)
        let count = sent.count + (claims > 0 ? 1 : 0)
        var replies = [RedisReply](repeating: .null, count: count)
        var failure: RedisError?
        var remaining = count
        func take(_ n: Int) -> (Result<RedisReply, RedisError>) -> Void {
            { result in
                switch result {
                case let .success(reply): replies[n] = reply
                case let .failure(error): failure = failure ?? error
                }
                remaining -= 1
                if remaining == 0 { completion(failure.map { .failure($0) } ?? parse(replies)) }
            }
        }
        for (n, c) in sent.enumerated() { on.send(command: c, blockMs: 0, completion: take(n)) }
        if claims > 0 { claimCallsScript.run(on: on, keyCount: claims + buckets.count, body: claimed, completion: take(sent.count)) }
    }

    /// The in-flight claims of other consumers that `lookup` found (event id and holder): a
    /// live consumer's stays; a lapsed one's (a dead or retired gateway's) is taken over for
    /// `claimAs`, for `claimTTLMs`, if it is still there. Two round trips: the leases are read
    /// from the registry (in a slot of its own on a cluster), then the lapsed holders' claims
    /// are taken over in one step on the app's keys. Answers each call's holder afterwards,
    /// in the order of `claims`: `claimAs` where taken over, else the holder found.
    public func takeOverLapsedClaims(_ app: AppKeys, _ claims: [(eventId: String, holder: String)], claimAs: String,
                                     claimTTLMs: Int64, completion: @escaping (Result<[String], RedisError>) -> Void) {
        let found = claims.map(\.holder)
        guard !claims.isEmpty else { return completion(.success(found)) }
        liveConsumers { [self] result in
            guard case .success(let live) = result else { return completion(result.map { _ in found }) }
            let lapsed = claims.indices.filter { !live.contains(claims[$0].holder) }
            guard !lapsed.isEmpty else { return completion(.success(found)) }
            takeOverScript.run(on: channel(app.calls), keys: lapsed.map { app.result(claims[$0].eventId) },
                               args: [claimAs, String(claimTTLMs)] + lapsed.map { claims[$0].holder }) { result in
                completion(result.flatMap { reply in
                    guard let flags = reply.array, flags.count == lapsed.count else {
                        return .failure(.unexpectedReply("take over claims \(reply)"))
                    }
                    var holders = found
                    for (i, flag) in zip(lapsed, flags) where flag.integer == 1 { holders[i] = claimAs }
                    return .success(holders)
                })
            }
        }
    }

    /// Renews `claimAs`'s in-flight claims of `eventIds` for `claimTTLMs` (a call that rings
    /// longer than a claim lasts: a call with devices waiting for an answer), each only if it
    /// still holds that claim; one script on the app's keys (`CallStoreLua.takeOverClaims`, with
    /// `claimAs` as the holder). Answers per id whether the claim was renewed.
    /// The ring receipts' own results (`AppKeys.ringResult`) of `receipts` (call id, device),
    /// one `MGET`: each the result JSON, or nil when no receipt of that device was recorded.
    public func ringReceipts(_ app: AppKeys, _ receipts: [(callID: String, device: String?)],
                             completion: @escaping (Result<[String?], RedisError>) -> Void) {
        guard !receipts.isEmpty else { return completion(.success([])) }
        var command = RedisCommand(reservingBytes: receipts.count * (app.ringResultPrefix.utf8.count + 160) + 16,
                                   arguments: 1 + receipts.count)
        command.append("MGET")
        for r in receipts { command.append(app.ringResult(r.callID, device: r.device)) }
        channel(app.calls).send(command: command, blockMs: 0) { result in
            completion(result.flatMap { reply in
                guard let values = reply.array, values.count == receipts.count else {
                    return .failure(.unexpectedReply("ring receipts \(reply)"))
                }
                return .success(values.map { $0.string.flatMap { $0.hasPrefix("{") ? $0 : nil } })
            })
        }
    }

    public func renewClaims(_ app: AppKeys, _ eventIds: [String], claimAs: String, claimTTLMs: Int64,
                            completion: @escaping (Result<[Bool], RedisError>) -> Void) {
        guard !eventIds.isEmpty else { return completion(.success([])) }
        takeOverScript.run(on: channel(app.calls), keys: eventIds.map { app.result($0) },
                           args: [claimAs, String(claimTTLMs)] + eventIds.map { _ in claimAs }) { result in
            completion(result.flatMap { reply in
                guard let flags = reply.array, flags.count == eventIds.count else {
                    return .failure(.unexpectedReply("renew claims \(reply)"))
                }
                return .success(flags.map { $0.integer == 1 })
            })
        }
    }

    // MARK: Consumers and take-over

    /// Declares `consumer` live for `ttlMs` from now (Redis server clock), held by `instance`
    /// (a random id per process): its score in the `GatewayKeys.consumers` sorted set becomes
    /// now + ttl. Beat well within the TTL. Proposes `signingKey` as the retry signing key
    /// (`GatewayKeys.retrySigningKey`, kept when one is there). Answers the other instance that
    /// held the name's live lease until this beat, if any (two processes run under one name),
    /// and the signing key Redis holds.
    public func heartbeat(consumer: String, instance: String = "", ttlMs: Int64, signingKey: String = "",
                          completion: @escaping (Result<HeartbeatAnswer, RedisError>) -> Void) {
        precondition(ttlMs > 0, "a heartbeat needs a positive TTL")
        heartbeatScript.run(on: channel(gatewayKeys.consumers), keys: registryKeys,
                            args: [consumer, String(ttlMs), String(config.consumerForgetMs), instance, signingKey]) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 3 else { return .failure(.unexpectedReply("heartbeat \(reply)")) }
                return .success(HeartbeatAnswer(otherInstance: parts[1].string, signingKey: parts[2].string))
            })
        }
    }

    /// The registry's keys, with the signing key in their slot.
    private var registryKeys: [String] { [gatewayKeys.consumers, gatewayKeys.consumerInstances, gatewayKeys.retrySigningKey] }

    /// Takes `consumer`'s lease for `instance` at start, unless another instance holds a live
    /// one: then nothing is written and the holder and its lease's end are returned. Proposes
    /// `signingKey` as `heartbeat` does.
    public func register(consumer: String, instance: String, ttlMs: Int64, signingKey: String = "",
                         completion: @escaping (Result<ConsumerRegistration, RedisError>) -> Void) {
        precondition(ttlMs > 0, "a lease needs a positive TTL")
        registerScript.run(on: channel(gatewayKeys.consumers), keys: registryKeys,
                           args: [consumer, String(ttlMs), instance, signingKey]) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count >= 2, let flag = parts[0].integer else {
                    return .failure(.unexpectedReply("register \(reply)"))
                }
                if flag == 1, let live = parts[1].array {
                    return .success(.registered(live: Set(live.compactMap(\.string)), signingKey: parts.count > 2 ? parts[2].string : nil))
                }
                guard parts.count == 3, let until = parts[2].string.flatMap(RedisReply.milliseconds) else {
                    return .failure(.unexpectedReply("register \(reply)"))
                }
                return .success(.taken(instance: parts[1].string, leaseUntilMs: until))
            })
        }
    }

    /// Retires `consumer` (clean shutdown) if `instance` holds it: its lease lapses at once, so
    /// its pending entries are taken over at the other gateways' next claim round.
    public func retire(consumer: String, instance: String, completion: @escaping (Result<Void, RedisError>) -> Void) {
        retireScript.run(on: channel(gatewayKeys.consumers), keys: [gatewayKeys.consumers, gatewayKeys.consumerInstances],
                         args: [consumer, instance]) { result in completion(result.map { _ in () }) }
    }

    /// Claims back up to `count` per app of `consumer`'s own pending entries, except those in
    /// `routing` (the entries it is still working on, by app), in one step for all `apps`.
    /// These are entries whose delivery it never saw (a read served on a connection the
    /// watchdog had dropped) or that it left pending after a failed step, and a previous run's
    /// under the same name. `thisRunMs`: how long this process has held the name; an entry
    /// delivered to it within that time keeps its delivery count (this process is alive:
    /// claiming back is not a delivery), an older one counts one more (the previous run died).
    /// Answers per app as `claimAbandoned` does.
    public func claimOwn(_ apps: [AppKeys], consumer: String, count: Int, routing: [AppKeys: [String]], thisRunMs: Int64,
                         completion: @escaping (Result<[AppKeys: ClaimResult], RedisError>) -> Void) {
        precondition(count > 0 && thisRunMs >= 0, "claimOwn needs a positive count and a run's length")
        bySlot(apps, completion: completion) { [self] apps, completion in
            claimOwnInOneStep(apps, consumer: consumer, count: count, routing: routing, thisRunMs: thisRunMs, completion: completion)
        }
    }

    private func claimOwnInOneStep(_ apps: [AppKeys], consumer: String, count: Int, routing: [AppKeys: [String]], thisRunMs: Int64,
                                   completion: @escaping (Result<[AppKeys: ClaimResult], RedisError>) -> Void) {
        var args = [config.group, consumer, String(count), String(thisRunMs)]
        for app in apps {
            let ids = routing[app] ?? []
            args.append(String(ids.count))
            args += ids
        }
        claimOwnScript.run(on: channel(apps[0].calls), keys: apps.map(\.calls), args: args) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == apps.count else {
                    return .failure(.unexpectedReply("claim own \(reply)"))
                }
                var out: [AppKeys: ClaimResult] = [:]
                for (app, part) in zip(apps, parts) {
                    do { out[app] = try CallStore.parseClaim(part) } catch {
                        return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                    }
                }
                return .success(out)
            })
        }
    }

    /// The consumers whose heartbeat has not lapsed (Redis server clock).
    public func liveConsumers(completion: @escaping (Result<Set<String>, RedisError>) -> Void) {
        liveConsumersScript.run(on: channel(gatewayKeys.consumers), keys: [gatewayKeys.consumers], args: []) { result in
            completion(result.flatMap { reply in
                guard let items = reply.array else { return .failure(.unexpectedReply("live consumers \(reply)")) }
                return .success(Set(items.compactMap(\.string)))
            })
        }
    }

    /// The consumer registry in one read: the live consumers and the lapsed ones still
    /// registered (dead, or stalled past their lease, and not yet forgotten).
    public func consumerRegistry(completion: @escaping (Result<ConsumerRegistry, RedisError>) -> Void) {
        registryScript.run(on: channel(gatewayKeys.consumers), keys: [gatewayKeys.consumers], args: []) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 2, let live = parts[0].array, let lapsed = parts[1].array else {
                    return .failure(.unexpectedReply("consumer registry \(reply)"))
                }
                return .success(ConsumerRegistry(live: Set(live.compactMap(\.string)), lapsed: Set(lapsed.compactMap(\.string))))
            })
        }
    }

    /// Forgets lapsed consumers whose entries were all taken over: each of `names` is removed
    /// from the registry if its lease is still lapsed. Returns how many were removed.
    public func forgetLapsed(_ names: [String], completion: @escaping (Result<Int64, RedisError>) -> Void) {
        guard !names.isEmpty else { return completion(.success(0)) }
        forgetLapsedScript.run(on: channel(gatewayKeys.consumers), keys: [gatewayKeys.consumers], args: names) { result in
            completion(result.flatMap { $0.integer.map { .success($0) } ?? .failure(.unexpectedReply("forget lapsed \($0)")) })
        }
    }

    /// Takes over, for `consumer`, up to `count` in-flight entries of the app whose owner is
    /// not in `liveConsumers` and that have been idle at least `minIdleMs`, in one step
    /// (XPENDING IDLE pages, then XCLAIM; at most `claimScanPages` pages are scanned, so call
    /// again while it returns `count` entries). Live consumers' entries are never taken.
    /// Each claimed entry carries its delivery count; entries deleted while pending are
    /// returned as `lostIDs`. With `ownIdleMs`, `consumer`'s own entries idle at least that
    /// long are claimed again too: a live process finds the entries it left pending after a
    /// Redis error (it knows which of its entries it is still routing; the others are lost to
    /// it until it claims them); with `thisRunMs` (as `claimOwn`), those it was given within
    /// its run keep their delivery count.
    public func claimAbandoned(_ app: AppKeys, consumer: String, minIdleMs: Int64, count: Int, liveConsumers: Set<String>,
                               ownIdleMs: Int64? = nil, thisRunMs: Int64? = nil,
                               completion: @escaping (Result<ClaimResult, RedisError>) -> Void) {
        precondition(count > 0 && count <= 1000 && minIdleMs >= 0, "claimAbandoned needs 0 < count <= 1000 and minIdleMs >= 0")
        precondition((ownIdleMs ?? minIdleMs) >= minIdleMs, "ownIdleMs is at least minIdleMs")
        let live = liveConsumers.sorted()
        let args = [config.group, consumer, String(minIdleMs), String(count), String(config.claimScanPages),
                    ownIdleMs.map { String($0) } ?? "", thisRunMs.map { String($0) } ?? "", String(live.count)] + live
        claimScript.run(on: channel(app.calls), keys: [app.calls], args: args) { result in
            completion(result.flatMap { reply in
                do { return .success(try CallStore.parseClaim(reply)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// Parses the claim script's `{claimed entries, requested ids, delivery counts after the claim}`.
    static func parseClaim(_ reply: RedisReply) throws -> ClaimResult {
        guard let parts = reply.array, parts.count == 3, let ids = parts[1].array, let counts = parts[2].array,
              ids.count == counts.count else {
            throw RedisError.unexpectedReply("claim script \(reply)")
        }
        let claimed = try StreamReplies.entryList(parts[0])
        var byID: [String: StreamEntry] = [:]
        for entry in claimed.entries { byID[entry.id] = entry }
        var result = ClaimResult(entries: [], lostIDs: [])
        for (idReply, countReply) in zip(ids, counts) {
            guard let id = idReply.string, let deliveries = countReply.integer else { throw RedisError.unexpectedReply("claim ids") }
            if let entry = byID[id] {
                result.entries.append(ClaimedEntry(entry: entry, deliveries: deliveries))
            } else {
                result.lostIDs.append(id)
            }
        }
        result.lostIDs += claimed.deletedIDs
        return result
    }

    // MARK: Metrics

    /// The backlogs of `apps` in one command (one Lua step), so that sampling a hundred apps
    /// for metrics costs one round trip, not two hundred commands.
    /// On a cluster, one command per app.
    public func backlogs(_ apps: [AppKeys], completion: @escaping (Result<[AppKeys: Backlog], RedisError>) -> Void) {
        bySlot(apps, completion: completion) { [self] apps, completion in backlogsInOneStep(apps, completion: completion) }
    }

    private func backlogsInOneStep(_ apps: [AppKeys], completion: @escaping (Result<[AppKeys: Backlog], RedisError>) -> Void) {
        backlogsScript.run(on: channel(apps[0].calls), keys: apps.map(\.calls), args: [config.group]) { result in
            completion(result.flatMap { reply in
                guard let items = reply.array, items.count == 2 * apps.count else {
                    return .failure(.unexpectedReply("backlogs script \(reply)"))
                }
                var out: [AppKeys: Backlog] = [:]
                for (i, app) in apps.enumerated() {
                    guard let length = items[2 * i].integer, let pending = items[2 * i + 1].integer else {
                        return .failure(.unexpectedReply("backlogs script \(reply)"))
                    }
                    out[app] = Backlog(length: length, pending: pending)
                }
                return .success(out)
            })
        }
    }

    /// Runs `step` once for all of `apps` on one Redis, or once per app on a cluster (a script's
    /// keys must share a slot), and answers with every app's answer, or the first error.
    private func bySlot<T>(_ apps: [AppKeys], completion: @escaping (Result<[AppKeys: T], RedisError>) -> Void,
                           _ step: (_ apps: [AppKeys], _ completion: @escaping (Result<[AppKeys: T], RedisError>) -> Void) -> Void) {
        guard !apps.isEmpty else { return completion(.success([:])) }
        guard case .cluster = topology else { return step(apps, completion) }
        eachApp(apps, completion: { completion($0.map { $0.values.reduce(into: [:]) { $0.merge($1) { $1 } } }) }) { app, done in
            step([app], done)
        }
    }
}

/// Runs `step` for each of `apps` at once, and answers with every app's answer, or the first
/// error, once all answered.
func eachApp<T>(_ apps: [AppKeys], completion: @escaping (Result<[AppKeys: T], RedisError>) -> Void,
                _ step: (AppKeys, @escaping (Result<T, RedisError>) -> Void) -> Void) {
    eachOf(apps, completion: completion, step)
}

/// `step` for each of `items` at once (pipelined); `completion` once all answered, with every
/// value or the first failure.
func eachOf<K: Hashable, T>(_ items: [K], completion: @escaping (Result<[K: T], RedisError>) -> Void,
                            _ step: (K, @escaping (Result<T, RedisError>) -> Void) -> Void) {
    guard !items.isEmpty else { return completion(.success([:])) }
    var found: [K: T] = [:]
    var failure: RedisError?
    var remaining = items.count
    for app in items {
        step(app) { result in
            switch result {
            case let .success(value): found[app] = value
            case let .failure(error): failure = failure ?? error
            }
            remaining -= 1
            if remaining == 0 { completion(failure.map { .failure($0) } ?? .success(found)) }
        }
    }
}
