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
    private let suspicionScript = RedisScript(TokenLua.suspicion)
    private let suspectedScript = RedisScript(TokenLua.suspected)

    public init(topology: RedisTopology) {
        self.topology = topology
    }

    /// The token in lower case (as pushgw keys it), or nil when it is no hex token (an even
    /// number of hex digits, at most 400).
    public static func normalized(_ text: String) -> String? {
        let lower = text.lowercased()
        guard !lower.isEmpty, lower.utf8.count % 2 == 0, lower.utf8.count <= 400,
              lower.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else { return nil }
        return lower
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

    /// What the guard against iOS's silent VoIP ban (ring receipts, docs/protocol.md) holds of
    /// a VoIP token: since when it is suspected (unix ms) and for how much longer (ms), nil when
    /// it is not; and its silent rings in a row so far (a VoIP push accepted, no receipt).
    public struct VoipSuspicion: Equatable, Sendable {
        public var suspectedSinceMs: Int64?
        public var expiresInMs: Int64?
        public var silentRings: Int64
    }

    /// The guard's state of VoIP token `token` in `app`.
    public func voipSuspicion(_ app: AppKeys, token: String, completion: @escaping (Result<VoipSuspicion, RedisError>) -> Void) {
        suspicionScript.run(on: topology.channel(for: app.voipSuspected(token)),
                            keys: [app.voipSuspected(token), app.voipSilentRings(token)], args: []) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count == 3 else { return .failure(.unexpectedReply("VoIP suspicion \(reply)")) }
                let ttl = parts[1].integer ?? -1
                return .success(VoipSuspicion(suspectedSinceMs: parts[0].integer, expiresInMs: ttl >= 0 ? ttl : nil,
                                              silentRings: parts[2].integer ?? 0))
            })
        }
    }

    /// The VoIP tokens of `app` suspected of iOS's silent ban now (`AppKeys.voipSuspectedTokens`,
    /// marks not lapsed by Redis' clock), most recently marked first, at most `limit`, and
    /// whether there are more.
    public func suspectedVoipTokens(_ app: AppKeys, limit: Int,
                                    completion: @escaping (Result<(tokens: [String], more: Bool), RedisError>) -> Void) {
        precondition(limit > 0, "a listing needs a positive limit")
        suspectedScript.run(on: topology.channel(for: app.voipSuspectedTokens), keys: [app.voipSuspectedTokens],
                            args: [String(limit + 1)]) { result in
            completion(result.flatMap { reply in
                guard let members = reply.array else { return .failure(.unexpectedReply("suspected VoIP tokens \(reply)")) }
                let tokens = members.compactMap(\.string)
                return .success((Array(tokens.prefix(limit)), tokens.count > limit))
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

    /// KEYS: a VoIP token's suspicion mark, its silent count. Returns {mark or false, its PTTL,
    /// count or false}.
    static let suspicion = """
        return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
        """

    /// KEYS: the app's suspected tokens' set. ARGV: limit. Drops the members whose mark lapsed
    /// (Redis' clock), then returns the `limit` latest to lapse (the most recently marked).
    static let suspected = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
        return redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1, 'REV')
        """

    /// KEYS: known-invalid keys. Returns per key 1 (removed) or 0 (was not there).
    static let forget = """
        local out = {}
        for i, key in ipairs(KEYS) do out[i] = redis.call('DEL', key) end
        return out
        """
}
