import EventLoop
import RedisClient

/// What Redis holds about calls, for operators: by a call's id (`pushgw calls show`), its result
/// key, its cancel's own result and its cancellation marker (docs/protocol.md, *Finding
/// results*); and the app's results and feedback streams a bounded page at a time (`pushgw
/// export`). The router writes them (`CallStore`, `RetrySchedule.cancel`); this only reads. The
/// call's dead letters, scheduled retry and tokens are read through `DeadLetterStore`,
/// `RetrySchedule.pending` and `TokenStore`.
///
/// Completions run on the loop, once each. Loop-owned, like the topology it sends on.
public final class CallHistoryStore {
    public let topology: RedisTopology

    public init(topology: RedisTopology) {
        self.topology = topology
    }

    /// The keys of one call id, as read.
    public struct Keys: Equatable, Sendable {
        /// `AppKeys.result(id)`: the result JSON (starts with `{`), or `in_flight:GATEWAY` while
        /// a gateway routes the call; nil when absent (never seen, or older than the app's result window).
        public var result: String?
        /// `AppKeys.cancelResult(id)`: the result of the call's `call_cancelled` event.
        public var cancelResult: String?
        /// Whether `AppKeys.cancelled(id)` is set: a cancel came, later pushes are not sent.
        public var cancelled: Bool
        /// The call's first outcome from its compact record (`AppKeys.outcomes`), which lasts
        /// the idempotency window; nil when it has none.
        public var compactOutcome: String?

        public init(result: String?, cancelResult: String?, cancelled: Bool, compactOutcome: String? = nil) {
            self.result = result
            self.cancelResult = cancelResult
            self.cancelled = cancelled
            self.compactOutcome = compactOutcome
        }

        /// The result's detail expired (`RetentionWindows.resultDetailSeconds`) but its first
        /// outcome is still known: `compactOutcome`, answered as `detail_expired`.
        public var detailExpired: Bool { result == nil && compactOutcome != nil }

        /// The gateway named by an in-flight claim in `result`; nil when it holds a result or nothing.
        public var inFlightGateway: String? {
            guard let result, result.hasPrefix(CallHistoryStore.inFlightPrefix) else { return nil }
            return String(result.dropFirst(CallHistoryStore.inFlightPrefix.count))
        }

        /// `result` when it is a result (JSON), not a claim.
        public var resultJSON: String? { result?.hasPrefix("{") == true ? result : nil }
    }

    /// What an in-flight claim in a result key starts with (`AppKeys.result`).
    public static let inFlightPrefix = "in_flight:"

    private let readScript = RedisScript(CallHistoryLua.read)

    /// The three keys of call `callID` in `app` and its compact record in the live buckets of
    /// `window` (the app's `RetentionWindows`), in one script (one slot: the app's). A code not
    /// in `CompactOutcome`'s table fails the read.
    public func read(_ app: AppKeys, callID: String, window: RetentionWindows = .defaults,
                     completion: @escaping (Result<Keys, RedisError>) -> Void) {
        let buckets = window.liveBuckets(atUnixSeconds: Clock.unixMs() / 1000).map { app.outcomes($0) }
        let keys = [app.result(callID), app.cancelResult(callID), app.cancelled(callID)] + buckets
        readScript.run(on: topology.channel(for: keys[0]), keys: keys, args: [callID]) { result in
            completion(result.flatMap { reply in
                guard let values = reply.array, values.count == 4 else {
                    return .failure(.unexpectedReply("read call keys \(reply)"))
                }
                var compact: String?
                if let code = values[3].string {
                    do { compact = try CompactOutcome.decode(code) } catch {
                        return .failure(.unexpectedReply("call \(callID): \(error)"))
                    }
                }
                return .success(Keys(result: values[0].string, cancelResult: values[1].string, cancelled: !values[2].isNull,
                                     compactOutcome: compact))
            })
        }
    }

    /// The app's streams of what happened to its calls, besides the dead letters
    /// (`DeadLetterStore.range` reads those).
    public enum Stream: String, Sendable, CaseIterable {
        /// `PREFIX:{APP}:results`: one entry per event, its `result` JSON.
        case results
        /// `PREFIX:{APP}:feedback`: one entry per token APNs or FCM declared invalid.
        case feedback

        func key(_ app: AppKeys) -> String {
            switch self {
            case .results: return app.results
            case .feedback: return app.feedback
            }
        }
    }

    /// At most `count` (> 0) entries of the app's `stream` from `start` to `end` (XRANGE bounds:
    /// `-`, `+`, `MS`, `ID`, `(ID` exclusive), oldest first: one `XRANGE … COUNT`, so Redis
    /// does a bounded amount of work per call however long the stream.
    public func range(_ app: AppKeys, _ stream: Stream, start: String, end: String, count: Int,
                      completion: @escaping (Result<[StreamEntry], RedisError>) -> Void) {
        precondition(count > 0, "range needs a positive count")
        let key = stream.key(app)
        topology.send(["XRANGE", key, start, end, "COUNT", String(count)], key: key) { result in
            completion(result.flatMap { reply in
                do { return .success(try StreamReplies.range(reply)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// The id of the newest entry of the app's `stream`; nil when it is empty.
    public func newestID(_ app: AppKeys, _ stream: Stream, completion: @escaping (Result<String?, RedisError>) -> Void) {
        newest(app, stream, count: 1) { completion($0.map { $0.first?.id }) }
    }

    /// The newest `count` (> 0) entries of the app's `stream`, newest first: one `XREVRANGE … COUNT`.
    public func newest(_ app: AppKeys, _ stream: Stream, count: Int, completion: @escaping (Result<[StreamEntry], RedisError>) -> Void) {
        precondition(count > 0, "newest needs a positive count")
        let key = stream.key(app)
        topology.send(["XREVRANGE", key, "+", "-", "COUNT", String(count)], key: key) { result in
            completion(result.flatMap { reply in
                do { return .success(try StreamReplies.range(reply)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }
}

/// CallHistoryStore's script.
enum CallHistoryLua {
    /// KEYS: the call's result key, its cancel's result key, its cancellation marker, then the
    /// app's live outcomes buckets, newest first. ARGV: the call id.
    /// Returns {the three keys' values, the call's outcome code from the newest bucket holding
    /// one, or false}.
    static let read = """
        local out = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
        local code = false
        for b = 4, #KEYS do
          code = redis.call('HGET', KEYS[b], ARGV[1])
          if code then break end
        end
        out[4] = code
        return out
        """
}
