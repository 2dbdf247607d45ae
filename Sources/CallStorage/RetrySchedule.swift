import EventLoop
import RedisClient

/// The durable retry schedule in Redis: where a call waits between two attempts,
/// instead of in a gateway's memory, so a crash at any moment neither loses nor duplicates a
/// scheduled retry.
///
/// Keys (all built in CallStorage.swift): per app `retrySchedule` (ZSET retry id → due ms),
/// `retryData` (HASH: the snapshot, raw event and call id of each retry), `retryByCall` (HASH
/// call id → retry id), and one due index `GatewayKeys.retryDue` (ZSET app → earliest due ms)
/// that spares an idle mover a look at every app. Every change of a retry is one Lua script on
/// the app's keys only (RetryScripts.swift), so the schedule runs on Redis Cluster as on a
/// single Redis:
///
/// - `schedule`: the router's step when a call must wait. Puts the retry in the schedule and
///   acknowledges + deletes the calls entry in the same step, so the call is either pending in
///   the stream or scheduled, never both and never neither. After it the call leaves the
///   process's memory.
/// - `moveDue`: the mover's step. Due retries go back to the app's calls stream as new entries
///   carrying the snapshot (field `retry`) beside the raw event, for any router to resume.
///   A move and its removal from the schedule are one step.
/// - `cancel`: a `call_cancelled` event's step. Sets the cancellation marker, removes the
///   call's scheduled retry and records the call's `cancelled` outcome with its history, and
///   records + acknowledges the cancel event, all at once. The marker closes the races:
///   `schedule` refuses to schedule a cancelled call, and a retry that was moved before the
///   cancel is stopped when resumed (the router looks the marker up first).
///
/// The due index lives in a slot of its own, so it is kept by separate commands and is a hint
/// that may only be early, never late for long:
/// - after a `schedule` step, `ZADD LT` of the due time (sent once the step answered);
/// - after a `moveDue` step, the app's score is set to what the step left (or the app removed),
///   then the app's earliest due time is read again and added with `ZADD LT`. A retry scheduled
///   meanwhile is either seen by that read or its own `ZADD LT` comes after the score was set;
/// - a process that dies between a step and its index command leaves a retry the index does
///   not show: `repairDueIndex` (the mover runs it at start and every few minutes) adds each
///   app's earliest due time again. A score too early costs one empty move, which refreshes it.
///
/// The retry id is the id of the calls entry the retry replaces: unique in the app's stream,
/// and scheduled at most once, because `schedule` runs only while that entry is still pending
/// for the calling consumer and deletes it.
///
/// Times are unix ms from the gateways' clocks (the same clock decides deadlines): movers
/// and routers on different hosts need synchronized clocks.
///
/// Completions run on the loop, once each. Loop-owned.
public final class RetrySchedule {
    /// Names, caps and windows shared with `CallStore` (the cancel step writes results).
    public struct Config: Sendable {
        /// The key prefix (`pushgw`).
        public var prefix: String
        /// The consumer group of the calls streams.
        public var group: String
        /// Each app's retention windows, by app id (`CallStore.Config.windows`): only the cancel
        /// step, the router's, uses them (it writes results and the cancellation marker); the
        /// mover's schedule and the tools' need none.
        public var windows: [String: RetentionWindows]
        /// `MAXLEN ~` of the results streams.
        public var resultsMaxLen: Int

        public init(prefix: String = "pushgw", group: String = GatewayKeys.routersGroup,
                    windows: [String: RetentionWindows] = [:], resultsMaxLen: Int = 100_000) {
            precondition(resultsMaxLen > 0, "the results cap must be positive")
            self.prefix = prefix
            self.group = group
            self.windows = windows
            self.resultsMaxLen = resultsMaxLen
        }
    }

    /// Its windows change with the store's apps (`CallStore.updateApps`).
    public internal(set) var config: Config
    /// Where its commands go: one connection, or a cluster.
    public let topology: RedisTopology
    public let gatewayKeys: GatewayKeys

    private let scheduleScript = RedisScript(RetryLua.schedule)
    private let moveScript = RedisScript(RetryLua.move)
    private let pendingScript = RedisScript(RetryLua.pending)
    private let cancelScript = RedisScript(RetryLua.cancel)

    /// A schedule on one connection (`.single`: shared with other users, or the mover's own)
    /// or a cluster; the caller starts and closes it.
    public init(topology: RedisTopology, config: Config) {
        self.topology = topology
        self.config = config
        self.gatewayKeys = GatewayKeys(prefix: config.prefix)
    }

    // MARK: The router's side

    /// Schedules `retry` in place of the calls entry `retry.retryID`, which `consumer` holds
    /// pending: one step (ZADD + HSET + XACK + XDEL), then the due index (`ZADD LT`).
    /// `.cancelled` and `.notOwned` write nothing.
    public func schedule(_ app: AppKeys, consumer: String, retry: ScheduledRetry,
                         completion: @escaping (Result<ScheduleOutcome, RedisError>) -> Void) {
        let keys = [app.calls, app.retrySchedule, app.retryData, app.retryByCall, app.cancelled(retry.callID),
                    app.result(retry.callID)]
        let args: [RedisArgument] = [.text(config.group), .text(consumer), .text(retry.retryID), .text(String(retry.dueAtMs)),
                                     .text(retry.callID), .bytes(retry.event), .text(retry.state), .text(retry.mac)]
        scheduleScript.run(on: topology.channel(for: app.calls), keys: keys, arguments: args) { [self] result in
            if case .success(let reply) = result, reply.string == "scheduled" {
                // Completes once the index shows it (an index command that fails is left to
                // repairDueIndex): the mover then finds the retry at its next look.
                return showInIndex(app, dueAtMs: retry.dueAtMs) { _ in completion(.success(.scheduled)) }
            }
            completion(result.flatMap { reply in
                switch reply.string {
                case "cancelled": return .success(.cancelled)
                case "not_owned": return .success(.notOwned)
                default: return .failure(.unexpectedReply("schedule script \(reply)"))
                }
            })
        }
    }

    /// The retry last scheduled for `callID`, if it is still in the schedule (one read).
    public func pending(_ app: AppKeys, callID: String, completion: @escaping (Result<ScheduledRetry?, RedisError>) -> Void) {
        pendingScript.run(on: topology.channel(for: app.retrySchedule), keys: [app.retrySchedule, app.retryData, app.retryByCall], args: [callID]) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array else { return .failure(.unexpectedReply("pending retry \(reply)")) }
                if parts.isEmpty { return .success(nil) }
                guard parts.count == 4, let id = parts[0].string, let due = parts[1].string.flatMap(RetrySchedule.ms),
                      let state = parts[2].string, let event = parts[3].bytes else {
                    return .failure(.unexpectedReply("pending retry \(reply)"))
                }
                return .success(ScheduledRetry(retryID: id, callID: callID, dueAtMs: due, event: event, state: state))
            })
        }
    }

    /// The cancel step of `callID` (see the type's doc): marker for the app's `cancelSeconds`, the
    /// listed retries removed with their `cancelled` record each (`removing`: retry id and the
    /// call's result JSON), the cancel event's own result `resultJSON` (idempotency key
    /// `AppKeys.cancelResult(callID)`; it gains `cancelled_after` when the call had been
    /// delivered), and XACK + XDEL of `cancelEntryID`. `marker` is the marker's value: `1` for
    /// a cancel, the end's name and device for an answer or a decline (`EventLookup.endMarker`);
    /// the first end's stays.
    public func cancel(_ app: AppKeys, callID: String, cancelEntryID: String?, resultJSON: String,
                       removing: [(retryID: String, resultJSON: String)], marker: String = "1",
                       completion: @escaping (Result<CancelReport, RedisError>) -> Void) {
        let windows = RetentionWindows.of(app, in: config.windows)
        let bucket = windows.buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000)
        let keys = [app.calls, app.results, app.cancelResult(callID), app.cancelled(callID), app.retrySchedule, app.retryData,
                    app.retryByCall, app.result(callID), app.outcomes(bucket)] + (app.sendsWebhooks ? [app.webhooks] : [])
        var args = [config.group, cancelEntryID ?? "", resultJSON, String(windows.cancelSeconds),
                    String(windows.resultSeconds), String(config.resultsMaxLen), callID, String(removing.count)]
        for r in removing { args += [r.retryID, r.resultJSON] }
        args.append(marker)
        args.append(app.sendsWebhooks ? "webhooks" : "")
        args += [String(windows.detailSeconds), String(windows.buckets.expiresAt(bucket)), windows.recordedCode(CompactOutcome.code(of: "cancelled"))]
        cancelScript.run(on: topology.channel(for: app.calls), keys: keys, args: args) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 6, let recorded = parts[0].integer, let acked = parts[1].integer,
                      let removed = parts[2].array, let recordedIDs = parts[3].array else {
                    return .failure(.unexpectedReply("cancel script \(reply)"))
                }
                return .success(CancelReport(cancelRecorded: recorded == 1, answeredBefore: recorded == -1, acknowledged: acked == 1,
                                             removed: removed.compactMap(\.string),
                                             recorded: recordedIDs.compactMap(\.string),
                                             callDelivered: parts[4].string.flatMap { $0.isEmpty ? nil : $0 },
                                             callDeliveredAtMs: parts[5].integer.flatMap { $0 < 0 ? nil : $0 }))
            })
        }
    }

    // MARK: The mover's side

    /// The `limit` apps with the earliest due times, earliest first (one ZRANGE of the index).
    public func earliest(limit: Int, completion: @escaping (Result<[DueApp], RedisError>) -> Void) {
        precondition(limit > 0, "earliest needs a positive limit")
        send(["ZRANGE", gatewayKeys.retryDue, "0", String(limit - 1), "WITHSCORES"]) { result in
            completion(result.flatMap { reply in
                guard let items = reply.array, items.count % 2 == 0 else {
                    return .failure(.unexpectedReply("ZRANGE retry-due \(reply)"))
                }
                var out: [DueApp] = []
                for i in stride(from: 0, to: items.count, by: 2) {
                    guard let app = items[i].string, let due = items[i + 1].string.flatMap(RetrySchedule.ms) else {
                        return .failure(.unexpectedReply("ZRANGE retry-due \(reply)"))
                    }
                    out.append(DueApp(app: app, dueAtMs: due))
                }
                return .success(out)
            })
        }
    }

    /// Moves up to `limit` retries of `app` due at `nowMs` back to its calls stream (one step),
    /// then sets the app's due-index score to what is left (see the type's doc). Completes once
    /// the index is done; an index command that fails is left to `repairDueIndex`.
    public func moveDue(_ app: AppKeys, nowMs: Int64, limit: Int, completion: @escaping (Result<MoveReport, RedisError>) -> Void) {
        precondition(limit > 0, "moveDue needs a positive limit")
        let keys = [app.calls, app.retrySchedule, app.retryData, app.retryByCall]
        moveScript.run(on: topology.channel(for: app.calls), keys: keys, args: [String(nowMs), String(limit)]) { [self] result in
            let report = result.flatMap { reply -> Result<MoveReport, RedisError> in
                guard let parts = reply.array, parts.count == 3, let moved = parts[0].array, let dropped = parts[2].array else {
                    return .failure(.unexpectedReply("move script \(reply)"))
                }
                let dues = moved.compactMap { $0.string.flatMap(RetrySchedule.ms) }
                guard dues.count == moved.count else { return .failure(.unexpectedReply("move script \(reply)")) }
                let next = parts[1].string.flatMap(RetrySchedule.ms)
                return .success(MoveReport(movedDueAtMs: dues, nextDueAtMs: next, dropped: dropped.compactMap(\.string),
                                           more: moved.count + dropped.count >= limit))
            }
            guard case .success(let moved) = report else { return completion(report) }
            let set = moved.nextDueAtMs.map { ["ZADD", gatewayKeys.retryDue, String($0), app.app] }
                ?? ["ZREM", gatewayKeys.retryDue, app.app]
            send(set) { [self] _ in
                // Read the schedule again after setting the score: a retry scheduled since the
                // move is seen here, or its own ZADD LT comes after the score was set.
                repairDueIndex([app]) { _ in completion(report) }
            }
        }
    }

    /// Sends `args` (`args[1]` is the key) where its key lives.
    private func send(_ args: [String], completion: @escaping RedisConnection.Completion) {
        topology.channel(for: args[1]).send(command: RedisCommand(args), blockMs: 0, completion: completion)
    }

    /// Adds the due time `dueAtMs` of `app` to the due index unless an earlier one is there.
    private func showInIndex(_ app: AppKeys, dueAtMs: Int64, completion: @escaping (Result<RedisReply, RedisError>) -> Void) {
        send(["ZADD", gatewayKeys.retryDue, "LT", String(dueAtMs), app.app], completion: completion)
    }

    /// Reads each app's earliest due time and adds it to the due index (`ZADD LT`): the retries
    /// of a process that died between a step and its index command are found again. One read
    /// per app, pipelined, plus one write per app with something scheduled; completes with how
    /// many apps have retries, or the first error.
    public func repairDueIndex(_ apps: [AppKeys], completion: @escaping (Result<Int, RedisError>) -> Void) {
        guard !apps.isEmpty else { return completion(.success(0)) }
        var remaining = apps.count
        var scheduled = 0
        var failure: RedisError?
        func done(_ error: RedisError?) {
            if let error, failure == nil { failure = error }
            remaining -= 1
            if remaining == 0 { completion(failure.map { .failure($0) } ?? .success(scheduled)) }
        }
        for app in apps {
            send(["ZRANGE", app.retrySchedule, "0", "0", "WITHSCORES"]) { [self] result in
                switch result {
                case .failure(let error):
                    done(error)
                case .success(let reply):
                    guard let items = reply.array, items.count == 2, let due = items[1].string.flatMap(RetrySchedule.ms) else {
                        return done(reply.array == [] ? nil : .unexpectedReply("ZRANGE retry \(reply)"))
                    }
                    scheduled += 1
                    showInIndex(app, dueAtMs: due) { added in
                        if case .failure(let error) = added { done(error) } else { done(nil) }
                    }
                }
            }
        }
    }

    /// A sorted-set score as whole milliseconds (Redis prints integral doubles without a point);
    /// nil for a score no due time has (`RedisReply.milliseconds`).
    static func ms(_ text: String) -> Int64? { RedisReply.milliseconds(text) }
}

/// One retry as the schedule keeps it.
public struct ScheduledRetry: Equatable, Sendable {
    /// The id of the calls entry the retry replaces (the member of the app's schedule).
    public var retryID: String
    /// The call's id (for cancellation).
    public var callID: String
    /// When it is due, unix ms.
    public var dueAtMs: Int64
    /// The producer's raw event, its bytes, put back on the calls stream as field `event`.
    public var event: [UInt8]
    /// The router's snapshot JSON, put back as field `retry`.
    public var state: String
    /// The MAC of `state` with the event (`RetrySigner.sign`), put back as field `retry_mac`;
    /// empty where it is not read back (`pending`).
    public var mac: String

    public init(retryID: String, callID: String, dueAtMs: Int64, event: [UInt8], state: String, mac: String = "") {
        self.retryID = retryID
        self.callID = callID
        self.dueAtMs = dueAtMs
        self.event = event
        self.state = state
        self.mac = mac
    }

    /// A retry whose event is given as text.
    public init(retryID: String, callID: String, dueAtMs: Int64, event: String, state: String, mac: String = "") {
        self.init(retryID: retryID, callID: callID, dueAtMs: dueAtMs, event: Array(event.utf8), state: state, mac: mac)
    }
}

/// What `schedule` did.
public enum ScheduleOutcome: Equatable, Sendable {
    /// In the schedule; the calls entry is acknowledged and deleted.
    case scheduled
    /// The call is cancelled: nothing written, the entry is still pending (finish it as cancelled).
    case cancelled
    /// The entry is no longer pending for this consumer (taken over, or finished elsewhere):
    /// nothing written; forget the call.
    case notOwned
}

/// An app in the due index.
public struct DueApp: Equatable, Sendable {
    public var app: String
    /// The earliest due time of its schedule, unix ms.
    public var dueAtMs: Int64
}

/// What `moveDue` did.
public struct MoveReport: Equatable, Sendable {
    /// The due time of each retry moved back to the calls stream, in due order.
    public var movedDueAtMs: [Int64]
    /// The app's earliest remaining due time; nil when its schedule is empty.
    public var nextDueAtMs: Int64?
    /// Retry ids removed because their data was missing (should not happen; counted, logged).
    public var dropped: [String]
    /// The batch limit was reached: more may be due already.
    public var more: Bool
}

/// What `cancel` did.
public struct CancelReport: Equatable, Sendable {
    /// The cancel event's own result was written (false: a cancel of the call was recorded
    /// before, and this one's `duplicate` result written).
    public var cancelRecorded: Bool
    /// Nothing was written for the cancel event: the result there is its own entry's (the
    /// entry was delivered again after its record ran).
    public var answeredBefore: Bool = false
    /// The cancel entry was pending and is now acknowledged.
    public var acknowledged: Bool
    /// Retry ids removed from the schedule.
    public var removed: [String]
    /// Of those, the ones whose `cancelled` outcome was recorded (not already done).
    public var recorded: [String]
    /// The call's outcome when it had been delivered before the cancel (`delivered_voip`,
    /// `delivered_alert`), and when APNs accepted its push (unix ms): the cancel's result
    /// carries them as `cancelled_after` and `delivered_at`.
    public var callDelivered: String? = nil
    public var callDeliveredAtMs: Int64? = nil
}
