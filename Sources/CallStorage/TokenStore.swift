import RedisClient

/// What the gateway keeps about one device token, for operators (`pushgw tokens show` and
/// `forget`): its known-invalid marks (`AppKeys.invalidPrefix`, set by the recording script
/// when APNs declared it invalid) and the app's feedback entries that name it. The router
/// writes both (`CallStore.finish`); this reads them and removes a mark.
///
/// Completions run on the loop, once each. Loop-owned, like the topology it sends on.
public final class TokenStore {
    public let topology: RedisTopology
    private let marksScript = RedisScript(TokenLua.marks)
    private let forgetScript = RedisScript(TokenLua.forget)

    public init(topology: RedisTopology) {
        self.topology = topology
    }

    /// A known-invalid mark: since when (APNs' timestamp, unix ms) and for how much longer the
    /// mark lasts (ms; nil when it has no TTL).
    public struct Mark: Equatable, Sendable {
        public var sinceMs: Int64
        public var expiresInMs: Int64?
    }

    /// One feedback entry (`PREFIX:{APP}:feedback`) naming the token.
    public struct Feedback: Equatable, Sendable {
        public var entryID: String
        public var channel: String
        public var reason: String
        public var timestampMs: Int64?
        /// `environment_mismatch` entries: the environment that accepted the token.
        public var environment: String?
    }

    /// The token's known-invalid marks in `app`, by channel (absent: not marked).
    public func marks(_ app: AppKeys, token: String, completion: @escaping (Result<[TokenChannel: Mark], RedisError>) -> Void) {
        let keys = TokenChannel.allCases.map { app.invalidPrefix($0) + token }
        marksScript.run(on: topology.channel(for: keys[0]), keys: keys, args: []) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 2 * keys.count else {
                    return .failure(.unexpectedReply("token marks \(reply)"))
                }
                var out: [TokenChannel: Mark] = [:]
                for (i, channel) in TokenChannel.allCases.enumerated() {
                    guard let text = parts[2 * i].string, let since = Int64(text) else { continue }
                    let ttl = parts[2 * i + 1].integer ?? -1
                    out[channel] = Mark(sinceMs: since, expiresInMs: ttl >= 0 ? ttl : nil)
                }
                return .success(out)
            })
        }
    }

    /// The feedback entries of `app` naming `token`, newest first, among the stream's newest
    /// `scanning` entries (the stream is capped; older ones are gone anyway).
    public func feedback(_ app: AppKeys, token: String, scanning: Int,
                         completion: @escaping (Result<[Feedback], RedisError>) -> Void) {
        precondition(scanning > 0, "feedback needs a positive count")
        topology.send(["XREVRANGE", app.feedback, "+", "-", "COUNT", String(scanning)], key: app.feedback) { result in
            completion(result.flatMap { reply in
                let entries: [StreamEntry]
                do { entries = try StreamReplies.range(reply) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
                let wanted = Array(token.utf8)
                return .success(entries.compactMap { e in
                    guard e.values["token"] == wanted else { return nil }
                    func text(_ name: String) -> String? { e.values[name].map { String(decoding: $0, as: UTF8.self) } }
                    return Feedback(entryID: e.id, channel: text("channel") ?? "", reason: text("reason") ?? "",
                                    timestampMs: text("timestamp").flatMap { Int64($0) }, environment: text("environment"))
                })
            })
        }
    }

    /// Removes the token's known-invalid marks in `app` on `channels`: later calls push to it
    /// again. Answers the channels whose mark was there.
    public func forget(_ app: AppKeys, token: String, channels: [TokenChannel],
                       completion: @escaping (Result<[TokenChannel], RedisError>) -> Void) {
        precondition(!channels.isEmpty, "forget needs a channel")
        let keys = channels.map { app.invalidPrefix($0) + token }
        forgetScript.run(on: topology.channel(for: keys[0]), keys: keys, args: []) { result in
            completion(result.flatMap { reply in
                guard let flags = reply.array, flags.count == channels.count else {
                    return .failure(.unexpectedReply("token forget \(reply)"))
                }
                return .success(zip(channels, flags).compactMap { $1.integer == 1 ? $0 : nil })
            })
        }
    }
}

/// The scripts of `TokenStore`; their keys are one app's (one slot).
enum TokenLua {
    /// KEYS: known-invalid keys. Returns per key {value or false, PTTL}.
    static let marks = """
        local out = {}
        for i, key in ipairs(KEYS) do
          out[#out + 1] = redis.call('GET', key)
          out[#out + 1] = redis.call('PTTL', key)
        end
        return out
        """

    /// KEYS: known-invalid keys. Returns per key 1 (removed) or 0 (was not there).
    static let forget = """
        local out = {}
        for i, key in ipairs(KEYS) do out[i] = redis.call('DEL', key) end
        return out
        """
}
