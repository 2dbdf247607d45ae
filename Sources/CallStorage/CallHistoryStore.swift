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

    /// The three keys of call `callID` in `app`, in one MGET (one slot: the app's).
    public func read(_ app: AppKeys, callID: String, completion: @escaping (Result<Keys, RedisError>) -> Void) {
        let keys = [app.result(callID), app.cancelResult(callID), app.cancelled(callID)]
        topology.send(["MGET"] + keys, key: keys[0]) { result in
            completion(result.flatMap { reply in
                guard let values = reply.array, values.count == keys.count else {
                    return .failure(.unexpectedReply("MGET call keys \(reply)"))
                }
                return .success(Keys(result: values[0].string, cancelResult: values[1].string, cancelled: !values[2].isNull))
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
