// APNsSimulator: a fault-injecting APNs stand-in (HTTP/2 server on nghttp2) for tests, the demo
// and benchmarks. Owns: the simulated provider API, its scenarios, its request log.
// Must not be used in production paths.
import APNs

/// How the simulator answers pushes to one device token (docs/simulator.md lists the spellings).
///
/// A scenario applies only to requests that pass validation and authentication, except
/// `expiredProviderToken`, which answers before the JWT is even looked at (a client's token
/// renewal can then be tested without waiting an hour).
public enum Scenario: Equatable, Sendable, CustomStringConvertible {
    /// 200.
    case ok
    /// 410 Unregistered with a millisecond timestamp.
    case unregistered
    /// 410 ExpiredToken with a millisecond timestamp.
    case expiredToken
    /// 400 BadDeviceToken (a token from the other environment looks like this).
    case badToken
    /// 400 DeviceTokenNotForTopic.
    case notForTopic
    /// 429 TooManyRequests.
    case tooMany
    /// 500 InternalServerError.
    case error500
    /// 503 ServiceUnavailable.
    case unavailable
    /// The first N requests for the token get 503 ServiceUnavailable, later ones 200.
    case flaky(Int)
    /// 200, sent after this many milliseconds.
    case slow(Int)
    /// Never answered: the stream stays open until the client gives up or the connection ends.
    case blackhole
    /// 413 PayloadTooLarge whatever the size (APNs' limit may be lower than documented).
    case payloadTooLarge
    /// 403 InvalidProviderToken whatever the JWT: the app's key as if revoked at Apple, for
    /// this token only (a credential APNs refuses, then accepts again, in one test).
    case invalidProviderToken
    /// The first N requests for the token get 403 ExpiredProviderToken whatever their JWT.
    case expiredProviderToken(Int)
    /// The first N requests for the token are refused unprocessed (RST_STREAM REFUSED_STREAM),
    /// later ones get 200.
    case refusedStream(Int)
    /// A request for the token ends its connection at once, without GOAWAY: every push in
    /// flight on that connection is lost unanswered.
    case dropConnection

    /// Parses a scenario's spelling: `ok`, `unregistered`, `expired_token`, `bad_token`,
    /// `not_for_topic`, `too_many`, `error500`, `unavailable`, `flaky:N`, `slow:MS`,
    /// `blackhole`, `payload_too_large`, `invalid_provider_token`, `expired_provider_token:N`, `refused_stream:N`,
    /// `drop_connection` (N, MS non-negative integers).
    public init(parsing text: String) throws(ScenarioParseError) {
        let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        let name = String(parts[0])
        let argument: Int?
        if parts.count == 2 {
            guard let n = Int(parts[1]), n >= 0 else { throw ScenarioParseError(text: text, problem: "argument must be a non-negative integer") }
            argument = n
        } else {
            argument = nil
        }
        switch (name, argument) {
        case ("ok", nil): self = .ok
        case ("unregistered", nil): self = .unregistered
        case ("expired_token", nil): self = .expiredToken
        case ("bad_token", nil): self = .badToken
        case ("not_for_topic", nil): self = .notForTopic
        case ("too_many", nil): self = .tooMany
        case ("error500", nil): self = .error500
        case ("unavailable", nil): self = .unavailable
        case ("blackhole", nil): self = .blackhole
        case ("payload_too_large", nil): self = .payloadTooLarge
        case ("invalid_provider_token", nil): self = .invalidProviderToken
        case ("drop_connection", nil): self = .dropConnection
        case let ("flaky", n?): self = .flaky(n)
        case let ("slow", n?): self = .slow(n)
        case let ("expired_provider_token", n?): self = .expiredProviderToken(n)
        case let ("refused_stream", n?): self = .refusedStream(n)
        case ("flaky", nil), ("slow", nil), ("expired_provider_token", nil), ("refused_stream", nil):
            throw ScenarioParseError(text: text, problem: "\(name) needs an argument, as in \(name):3")
        case (_, .some) where ["ok", "unregistered", "expired_token", "bad_token", "not_for_topic",
                               "too_many", "error500", "unavailable", "blackhole", "payload_too_large",
                               "invalid_provider_token", "drop_connection"].contains(name):
            throw ScenarioParseError(text: text, problem: "\(name) takes no argument")
        default:
            throw ScenarioParseError(text: text, problem: "unknown scenario")
        }
    }

    /// The spelling `init(parsing:)` reads back.
    public var description: String {
        switch self {
        case .ok: return "ok"
        case .unregistered: return "unregistered"
        case .expiredToken: return "expired_token"
        case .badToken: return "bad_token"
        case .notForTopic: return "not_for_topic"
        case .tooMany: return "too_many"
        case .error500: return "error500"
        case .unavailable: return "unavailable"
        case let .flaky(n): return "flaky:\(n)"
        case let .slow(ms): return "slow:\(ms)"
        case .blackhole: return "blackhole"
        case .payloadTooLarge: return "payload_too_large"
        case .invalidProviderToken: return "invalid_provider_token"
        case let .expiredProviderToken(n): return "expired_provider_token:\(n)"
        case let .refusedStream(n): return "refused_stream:\(n)"
        case .dropConnection: return "drop_connection"
        }
    }
}

/// A scenario spelling that `Scenario(parsing:)` does not know.
public struct ScenarioParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text as given.
    public let text: String
    /// What is wrong with it.
    public let problem: String
    public var description: String { "\"\(text)\": \(problem)" }
}

/// What the simulator does with a request that passed validation.
enum Outcome: Equatable {
    /// Answer now: 200 when `reason` is nil.
    case answer(ApnsReason?)
    /// Answer 200 after `ms` milliseconds.
    case answerLater(ms: Int)
    /// Keep the stream open and never answer.
    case never
    /// Refuse the stream unprocessed (RST_STREAM REFUSED_STREAM): the client resends it.
    case refuseStream
    /// Close the connection at once: everything in flight on it is lost.
    case dropConnection
    /// Answer now as written (FCM's endpoints: `FcmEndpoints`).
    case reply(SimulatedReply)
    /// Answer as written after `ms` milliseconds.
    case replyLater(ms: Int, SimulatedReply)
}

/// The scenarios in force and the per-token counters that `flaky` and
/// `expired_provider_token` consume. Loop-owned, like the simulator.
struct ScenarioBook {
    var defaultScenario: Scenario
    private var byToken: [String: Scenario]
    /// Requests already answered under a counting scenario, per token; reset when the
    /// token's scenario is set again.
    private var consumed: [String: Int] = [:]

    /// Listed tokens' environments, and this simulator's (`SimulatorConfig.tokenEnvironments`).
    private let tokenEnvironments: [String: ApnsEnvironment]
    private let environment: ApnsEnvironment

    init(defaultScenario: Scenario, scenarios: [String: Scenario], tokenEnvironments: [String: ApnsEnvironment] = [:],
         environment: ApnsEnvironment = .production) {
        self.defaultScenario = defaultScenario
        byToken = Dictionary(scenarios.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.tokenEnvironments = Dictionary(tokenEnvironments.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.environment = environment
    }

    func scenario(for token: String) -> Scenario { byToken[token] ?? defaultScenario }

    mutating func set(_ scenario: Scenario, for token: String) {
        byToken[token.lowercased()] = scenario
        consumed[token.lowercased()] = nil
    }

    /// True when this request must get 403 ExpiredProviderToken before any auth check;
    /// consumes one of the scenario's N answers.
    mutating func takeExpiredProviderToken(for token: String) -> Bool {
        guard case let .expiredProviderToken(n) = scenario(for: token) else { return false }
        return take(n, for: token)
    }

    /// What the connection does with a request for `token` before reading it at all:
    /// `refused_stream:N` refuses the stream (consuming one of N), `drop_connection` ends the
    /// connection; nil for every other scenario.
    mutating func transportFault(for token: String) -> Outcome? {
        switch scenario(for: token) {
        case let .refusedStream(n): return take(n, for: token) ? .refuseStream : nil
        case .dropConnection: return .dropConnection
        default: return nil
        }
    }

    /// The answer to a valid, authenticated request for `token`.
    mutating func outcome(for token: String) -> Outcome {
        // A token of the other environment is unknown here, whatever its scenario.
        if let own = tokenEnvironments[token], own != environment { return .answer(.badDeviceToken) }
        switch scenario(for: token) {
        case .ok, .expiredProviderToken, .refusedStream, .dropConnection: return .answer(nil)
        case .unregistered: return .answer(.unregistered)
        case .expiredToken: return .answer(.expiredToken)
        case .badToken: return .answer(.badDeviceToken)
        case .notForTopic: return .answer(.deviceTokenNotForTopic)
        case .payloadTooLarge: return .answer(.payloadTooLarge)
        case .invalidProviderToken: return .answer(.invalidProviderToken)
        case .tooMany: return .answer(.tooManyRequests)
        case .error500: return .answer(.internalServerError)
        case .unavailable: return .answer(.serviceUnavailable)
        case let .flaky(n): return take(n, for: token) ? .answer(.serviceUnavailable) : .answer(nil)
        case let .slow(ms): return .answerLater(ms: ms)
        case .blackhole: return .never
        }
    }

    /// Counts one use against a budget of `n`; true while the budget lasts.
    private mutating func take(_ n: Int, for token: String) -> Bool {
        let used = consumed[token, default: 0]
        guard used < n else { return false }
        consumed[token] = used + 1
        return true
    }
}
