import APNs
import EventLoop
import Foundation

/// Why no access token could be had for a service account.
public enum AccessTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The token endpoint refused the account's JWT: Google's `error` and
    /// `error_description` (`invalid_grant`, "Invalid JWT Signature."). The credential is wrong
    /// (a deleted or rotated key, a wrong account); a human must fix it.
    case refused(status: Int, error: String, description: String?)
    /// The key could not sign the JWT.
    case unsigned(ServiceAccountError)
    /// The endpoint answered 200 with something that is not a token.
    case malformedAnswer(String)
    /// No answer from the token endpoint (the pool's reason): may be tried again.
    case unreachable(ApnsClientError)

    /// True when trying again later may help (the endpoint was not reached).
    public var isTransient: Bool {
        if case .unreachable = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case let .refused(status, error, description):
            return "the token endpoint refused the service account (HTTP \(status) \(error)\(description.map { ": \($0)" } ?? ""))"
        case let .unsigned(problem): return "the service account's key \(problem.description)"
        case let .malformedAnswer(why): return "the token endpoint's answer is not an access token: \(why)"
        case let .unreachable(why): return "the token endpoint did not answer: \(why.description(server: "the token endpoint"))"
        }
    }
}

/// One service account's OAuth 2.0 access token (Google's server-to-server flow): an RS256 JWT
/// (`ServiceAccount.assertion`) exchanged at `token_uri` with the JWT-bearer grant, through an
/// HTTP/2 pool to the token endpoint (the same `ApnsClient` pool code every push uses). One per
/// credential, shared by every FCM connection of it: a token is reused until
/// `usableMarginSeconds` before it expires, and renewed `renewAheadSeconds` before, while the
/// current one still serves, so no message waits for a renewal that starts in time.
///
/// | state | a message asks | decision |
/// |---|---|---|
/// | no token, or within `usableMarginSeconds` of expiry | — | wait for an exchange (one at a time) |
/// | token, within `renewAheadSeconds` of expiry | — | use it; start an exchange if none runs |
/// | token | — | use it |
/// | a send was refused 401 with the current token | `tokenRefused` | forget it: the next ask exchanges |
/// | the last exchange was refused under `refusalPauseSeconds` ago | — | fail at once with that refusal |
///
/// Loop-owned; waiters hear the result in the order they asked.
public final class AccessTokenSource {
    public let account: ServiceAccount
    private let pool: ApnsClient
    /// Wall-clock unix seconds; injected so tests can move time.
    private let clock: () -> Int64
    private var token: String?
    private var expiresAt: Int64 = 0
    private var waiters: [(Result<String, AccessTokenError>) -> Void] = []
    private var exchanging = false
    private var closed = false
    /// Exchanges answered with a token, the first included.
    public private(set) var exchanges = 0
    /// The last refusal or failure of an exchange, until one succeeds.
    public private(set) var lastProblem: AccessTokenError?
    /// Unix seconds before which no exchange is tried again after one failed: a refused
    /// credential is not asked about once per message.
    private var nextExchangeAt: Int64 = 0

    /// How long after a failed exchange the next is tried.
    public static let refusalPauseSeconds: Int64 = 10

    /// A token is renewed this long before it expires (Google's tokens live an hour).
    public static let renewAheadSeconds: Int64 = 300
    /// A token is not sent this close to its expiry: a message written just before it would be refused.
    public static let usableMarginSeconds: Int64 = 60

    /// `pool` must reach `account.tokenEndpoint` (host and port) with `.perRequest`
    /// authentication; the source owns it from here and closes it in `close()`.
    public init(account: ServiceAccount, pool: ApnsClient, clock: @escaping () -> Int64 = { Clock.unixMs() / 1000 }) {
        self.account = account
        self.pool = pool
        self.clock = clock
    }

    /// Calls `body` with a token to send with: at once when the current one is usable, else
    /// once an exchange answered. Every call gets exactly one answer.
    public func withToken(_ body: @escaping (Result<String, AccessTokenError>) -> Void) {
        guard !closed else { return body(.failure(.unreachable(.clientClosed))) }
        let now = clock()
        if let token, now < expiresAt - Self.usableMarginSeconds {
            if now >= expiresAt - Self.renewAheadSeconds, now >= nextExchangeAt { exchange() }
            return body(.success(token))
        }
        if let lastProblem, !lastProblem.isTransient, now < nextExchangeAt { return body(.failure(lastProblem)) }
        waiters.append(body)
        exchange()
    }

    /// A message sent with `refused` was answered 401 `UNAUTHENTICATED`: that token is not good
    /// any more (expired early, revoked). The next `withToken` exchanges for a new one.
    public func tokenRefused(_ refused: String) {
        guard refused == token else { return }
        token = nil
        expiresAt = 0
    }

    /// Fails the waiters and closes the pool.
    public func close() {
        guard !closed else { return }
        closed = true
        pool.close()
        finish(.failure(.unreachable(.clientClosed)))
    }

    private func exchange() {
        guard !exchanging, !closed else { return }
        let issuedAt = clock()
        let assertion: String
        do {
            assertion = try account.assertion(issuedAt: issuedAt)
        } catch {
            lastProblem = .unsigned(error)
            nextExchangeAt = issuedAt + Self.refusalPauseSeconds
            return finish(.failure(.unsigned(error)))
        }
        exchanging = true
        // RFC 7523's grant; the JWT is base64url and dots, nothing to escape.
        let form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
        let post = ProviderPost(path: account.tokenEndpoint.path, contentType: "application/x-www-form-urlencoded",
                                bearerToken: nil, body: Array(form.utf8))
        pool.send(post) { [weak self] result in
            guard let self, !self.closed else { return }
            self.exchanging = false
            switch result {
            case let .failure(error):
                self.lastProblem = .unreachable(error)
                self.nextExchangeAt = self.clock() + 1
                self.finish(.failure(.unreachable(error)))
            case let .success(answer):
                switch Self.read(answer) {
                case let .success((token, lifeSeconds)):
                    self.token = token
                    self.expiresAt = issuedAt + lifeSeconds
                    self.exchanges += 1
                    self.lastProblem = nil
                    self.finish(.success(token))
                case let .failure(problem):
                    self.lastProblem = problem
                    self.nextExchangeAt = self.clock() + Self.refusalPauseSeconds
                    self.finish(.failure(problem))
                }
            }
        }
    }

    private func finish(_ result: Result<String, AccessTokenError>) {
        let answered = waiters
        waiters.removeAll()
        for waiter in answered { waiter(result) }
    }

    /// The token and its life in seconds from a 200 (`{"access_token", "expires_in",
    /// "token_type": "Bearer"}`), or the endpoint's refusal (`{"error", "error_description"}`).
    static func read(_ answer: ProviderPostAnswer) -> Result<(String, Int64), AccessTokenError> {
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
        guard answer.status == 200 else {
            let error = object?["error"] as? String ?? "HTTP \(answer.status)"
            return .failure(.refused(status: answer.status, error: String(error.prefix(200)),
                                     description: (object?["error_description"] as? String).map { String($0.prefix(300)) }))
        }
        guard let object else { return .failure(.malformedAnswer("not a JSON object")) }
        guard let token = object["access_token"] as? String, !token.isEmpty, token.utf8.count <= 4096,
              token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            return .failure(.malformedAnswer("no access_token of visible ASCII"))
        }
        if let type = object["token_type"] as? String, type.lowercased() != "bearer" {
            return .failure(.malformedAnswer("token_type \(type.prefix(40)), not Bearer"))
        }
        guard let life = (object["expires_in"] as? NSNumber)?.int64Value, life > Self.usableMarginSeconds else {
            return .failure(.malformedAnswer("no expires_in over \(Self.usableMarginSeconds) s"))
        }
        return .success((token, min(life, 86_400)))
    }
}
