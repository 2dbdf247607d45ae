import EventLoop
import RedisClient

/// The producer's side of the contract (docs/protocol.md), for the HTTP API: an event added to
/// an app's calls stream, unless its id already has an outcome, and a result read by id. What
/// it writes is what any producer's `XADD` writes: the router cannot tell the two apart.
///
/// Completions run on the loop, once each. Loop-owned, like the topology it sends on.
public final class CallIntake {
    /// What `submit` did.
    public enum Submission: Equatable, Sendable {
        /// The event is in the calls stream as entry `entryID`.
        case added(entryID: String)
        /// The id has an outcome already (its result key holds a result, not a claim nor an
        /// invalid event's result): nothing was written. `firstOutcome` and the result's JSON.
        case duplicate(firstOutcome: String, result: String)
    }

    /// What an event's result key holds (docs/protocol.md, "Finding results").
    public enum StoredResult: Equatable, Sendable {
        /// Nothing: no such event, or it waits in the retry schedule, or its result expired.
        case none
        /// A gateway routes it now (`in_flight:GATEWAY`).
        case inFlight
        /// Its result JSON.
        case result(String)
        /// Its result's detail expired (`RetentionWindows.resultDetailSeconds`); its first
        /// outcome, from its compact record, is known for the idempotency window.
        case detailExpired(firstOutcome: String)
    }

    public let topology: RedisTopology
    private let submitScript = RedisScript(CallIntakeLua.submit)

    public init(topology: RedisTopology) {
        self.topology = topology
    }

    /// Adds `event` (the JSON, as the producer sent it) to `app`'s calls stream unless event
    /// id `id` has an outcome in `namespace` already. One script: the check and the `XADD`
    /// are one step, so two copies sent together are both added (the router answers the
    /// second `duplicate`) or the second is refused here, never lost.
    public func submit(_ app: AppKeys, id: String, namespace: ResultEntry.Namespace, event: [UInt8],
                       completion: @escaping (Result<Submission, RedisError>) -> Void) {
        let key = app.resultKeyPrefix(namespace) + id
        submitScript.run(on: topology.channel(for: app.calls), keys: [app.calls, key], arguments: [.bytes(event)]) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, let first = parts.first?.integer else {
                    return .failure(.unexpectedReply("submit \(reply)"))
                }
                if first == 1, parts.count == 2, let entry = parts[1].string { return .success(.added(entryID: entry)) }
                if first == 0, parts.count == 3, let outcome = parts[1].string, let json = parts[2].string {
                    return .success(.duplicate(firstOutcome: outcome, result: json))
                }
                return .failure(.unexpectedReply("submit \(reply)"))
            })
        }
    }

    /// What the result key of event `id` in `namespace` holds; for a call whose key is empty,
    /// its compact record in the live buckets of `window` (the app's windows): one `GET`, and
    /// one script more only when a call's key is empty.
    public func result(_ app: AppKeys, id: String, namespace: ResultEntry.Namespace, window: RetentionWindows = .defaults,
                       completion: @escaping (Result<StoredResult, RedisError>) -> Void) {
        let key = app.resultKeyPrefix(namespace) + id
        topology.send(["GET", key], key: key) { [topology, outcomeScript] result in
            switch result {
            case let .failure(error): return completion(.failure(error))
            case let .success(reply):
                if let text = reply.string {
                    if text.hasPrefix("{") { return completion(.success(.result(text))) }
                    if text.hasPrefix("in_flight:") { return completion(.success(.inFlight)) }
                }
                guard namespace == .call else { return completion(.success(.none)) }
                let buckets = window.liveBuckets(atUnixSeconds: Clock.unixMs() / 1000).map { app.outcomes($0) }
                guard !buckets.isEmpty else { return completion(.success(.none)) }  // no compact record kept
                outcomeScript.run(on: topology.channel(for: key), keys: buckets, args: [id]) { found in
                    completion(found.flatMap { reply in
                        guard let code = reply.string else { return .success(.none) }
                        do { return .success(.detailExpired(firstOutcome: try CompactOutcome.decode(code))) } catch {
                            return .failure(.unexpectedReply("call \(id): \(error)"))
                        }
                    })
                }
            }
        }
    }
    private let outcomeScript = RedisScript(CallIntakeLua.compactOutcome)
}

/// The intake's scripts, on the result rules of `CallStoreLua.resultValues`.
enum CallIntakeLua {
    /// KEYS: the app's live outcomes buckets, newest first. ARGV: the call id. Returns its code
    /// from the newest bucket holding one, or false.
    static let compactOutcome = """
        for b = 1, #KEYS do
          local code = redis.call('HGET', KEYS[b], ARGV[1])
          if code then return code end
        end
        return false
        """

    /// KEYS: the calls stream, the event's result key. ARGV: the event JSON.
    /// Returns {1, entry id} after the `XADD`, or {0, first outcome, result} when the key holds
    /// an outcome (a claim or an invalid event's result does not count: the router decides).
    static let submit = CallStoreLua.resultValues + """
        local prev = redis.call('GET', KEYS[2])
        if prev and not isClaim(prev) and not isProvisional(prev) then
          return {0, string.match(prev, '^{"outcome":"([%a_]+)"') or 'unknown', prev}
        end
        return {1, redis.call('XADD', KEYS[1], '*', 'event', ARGV[1])}
        """
}
