import APNs
import EventLoop

/// One message for `messages:send`: the registration token and the request body
/// (`{"message": {"token": …, …}}`, written by the caller: Routing writes rings, ends and
/// missed calls with its JSON writer).
public struct FcmMessage: Sendable, Equatable {
    public let token: String
    public let body: [UInt8]

    /// The longest registration token accepted, in bytes (today's are about 160; the cap keeps
    /// a hostile one from growing requests without bound).
    public static let maxTokenBytes = 4096
    /// FCM's limit on a message's payload is 4 KB of data; the whole request is kept under this.
    public static let maxBodyBytes = 16 * 1024

    /// Nil for a token that is empty, too long or not visible ASCII (FCM's tokens are
    /// base64url with `:` and `-`), or a body over `maxBodyBytes`.
    public init?(token: String, body: [UInt8]) {
        guard !token.isEmpty, token.utf8.count <= Self.maxTokenBytes, token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              !body.isEmpty, body.count <= Self.maxBodyBytes else { return nil }
        self.token = token
        self.body = body
    }
}

/// Why a message got no answer from FCM.
public enum FcmClientError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The pool's reason (timeout, lost connection, queue full, withdrawn, closed): as for APNs.
    case transport(ApnsClientError)
    /// No access token: the credential was refused (a human must fix it) or the token endpoint
    /// was not reached (`AccessTokenError.isTransient`).
    case accessToken(AccessTokenError)
    /// The credential's client could not be made (its service-account file does not load, the
    /// CA file): nothing was sent, and nothing can be until a human fixes it.
    case clientUnusable(String)

    public var description: String {
        switch self {
        case let .transport(error): return error.description(server: "FCM")
        case let .accessToken(error): return "no FCM access token: \(error.description)"
        case let .clientUnusable(problem): return "no FCM client: \(problem)"
        }
    }
}

/// Settings of one `FcmClient`: the FCM endpoint and the pool's sizes (the token endpoint comes
/// from the service account).
public struct FcmClientSettings: Sendable {
    public var host: String
    public var port: Int
    public var caFile: String?
    public var connections: Int = 2
    /// Upper bound on streams per connection to FCM, whatever the server allows.
    public var maxStreamsPerConnection: Int = 1000
    public var requestTimeoutMs: Int64 = 10_000
    public var maxQueued: Int = 10_000

    public init(host: String = "fcm.googleapis.com", port: Int = 443, caFile: String? = nil) {
        self.host = host
        self.port = port
        self.caFile = caFile
    }

    /// The HTTP/2 pool's settings for `host`: the APNs client's pool, with each request's own token.
    func pool(host: String, port: Int, connections: Int, serverName: String) -> ApnsClientSettings {
        var settings = ApnsClientSettings(host: host, port: port, caFile: caFile, authentication: .perRequest)
        settings.serverName = serverName
        settings.connections = connections
        settings.maxStreamsPerConnection = maxStreamsPerConnection
        settings.requestTimeoutMs = requestTimeoutMs
        settings.maxQueued = maxQueued
        return settings
    }
}

/// Counters of one client, for metrics and tests.
public struct FcmClientStats: Equatable, Sendable {
    public var sent = 0
    public var accepted = 0
    public var refused = 0
    /// Messages sent again with a new access token after 401 `UNAUTHENTICATED` (not attempts).
    public var resentAfterTokenRefusal = 0
}

/// A message handed to `FcmClient.send`, for `withdraw`.
public final class FcmSendTicket {
    fileprivate enum State {
        case waitingForToken
        case sent(ApnsPushTicket)
        case done
    }
    fileprivate var state = State.waitingForToken
    /// Tells the caller `.withdrawn` while the message waits for its access token.
    fileprivate var onWithdraw: (() -> Void)?

    /// Its completion ran.
    public var isAnswered: Bool {
        switch state {
        case .waitingForToken: return false
        case let .sent(ticket): return ticket.isAnswered
        case .done: return true
        }
    }
}

/// A client for FCM's HTTP v1 API for one service account: its messages go to
/// `POST /v1/projects/PROJECT/messages:send` on an HTTP/2 pool to FCM (the `ApnsClient` pool
/// every APNs push uses, carrying `ProviderPost`s), with the account's access token
/// (`AccessTokenSource`, on a pool of its own to the token endpoint).
///
/// Every `send` gets exactly one completion, FCM's answer or an `FcmClientError`. An answer of
/// 401 `UNAUTHENTICATED` renews the access token and sends the message once more (not an
/// attempt); a second such answer is the caller's. Loop-owned.
public final class FcmClient {
    public let settings: FcmClientSettings
    public let tokens: AccessTokenSource
    private let pool: ApnsClient
    private let path: String
    public private(set) var stats = FcmClientStats()

    /// Prepares the pools; opens nothing yet. Throws when the TLS setup fails (CA file).
    public init(loop: EventLoop, settings: FcmClientSettings, account: ServiceAccount,
                clock: @escaping () -> Int64 = { Clock.unixMs() / 1000 }) throws(TLSError) {
        self.settings = settings
        pool = try ApnsClient(loop: loop, settings: settings.pool(host: settings.host, port: settings.port,
                                                                  connections: settings.connections, serverName: "FCM"))
        let endpoint = account.tokenEndpoint
        let tokenPool = try ApnsClient(loop: loop, settings: settings.pool(host: endpoint.host, port: endpoint.port, connections: 1,
                                                                        serverName: "the token endpoint"))
        tokens = AccessTokenSource(account: account, pool: tokenPool, clock: clock)
        path = "/v1/projects/\(account.projectID)/messages:send"
    }

    /// The message pool, for metrics (connections, queue, in flight).
    public var messagePool: ApnsClient { pool }

    /// Sends `message`; `completion` runs once on the loop. `writeByUnixMs` (unix ms) ends its
    /// time to be written earlier than the request timeout: a ring's deadline, after which it
    /// must never leave.
    @discardableResult
    public func send(_ message: FcmMessage, writeByUnixMs: Int64? = nil,
                     completion: @escaping (Result<FcmResponse, FcmClientError>) -> Void) -> FcmSendTicket {
        let ticket = FcmSendTicket()
        send(message, writeByUnixMs: writeByUnixMs, ticket: ticket, tokenRenewed: false, completion: completion)
        return ticket
    }

    private func send(_ message: FcmMessage, writeByUnixMs: Int64?, ticket: FcmSendTicket, tokenRenewed: Bool,
                      completion: @escaping (Result<FcmResponse, FcmClientError>) -> Void) {
        ticket.state = .waitingForToken
        ticket.onWithdraw = { completion(.failure(.transport(.withdrawn))) }
        tokens.withToken { [unowned self] result in
            guard case .waitingForToken = ticket.state else { return }  // withdrawn meanwhile
            ticket.onWithdraw = nil
            let token: String
            switch result {
            case let .failure(problem):
                ticket.state = .done
                return completion(.failure(.accessToken(problem)))
            case let .success(t):
                token = t
            }
            self.stats.sent += 1
            let post = ProviderPost(path: self.path, bearerToken: token, body: message.body)
            let sent = self.pool.send(post, writeByUnixMs: writeByUnixMs) { [unowned self] result in
                switch result {
                case let .failure(error):
                    ticket.state = .done
                    completion(.failure(.transport(error)))
                case let .success(answer):
                    let response = FcmResponse(answer)
                    if response.kind == .renewAccessToken, !tokenRenewed {
                        self.stats.resentAfterTokenRefusal += 1
                        self.tokens.tokenRefused(token)
                        return self.send(message, writeByUnixMs: writeByUnixMs, ticket: ticket, tokenRenewed: true,
                                         completion: completion)
                    }
                    ticket.state = .done
                    if response.isAccepted { self.stats.accepted += 1 } else { self.stats.refused += 1 }
                    completion(.success(response))
                }
            }
            // The pool answers a refused send at once (closed, queue full): the state is `.done` then.
            if let sent, case .waitingForToken = ticket.state { ticket.state = .sent(sent) }
        }
    }

    /// Takes back a message not written yet: its completion runs at once with
    /// `.transport(.withdrawn)`. False when it was written (FCM may have it) or answered.
    @discardableResult
    public func withdraw(_ ticket: FcmSendTicket) -> Bool {
        switch ticket.state {
        case .done:
            return false
        case let .sent(pushTicket):
            return pool.withdraw(pushTicket)
        case .waitingForToken:
            // The token's answer finds the ticket done and drops the message.
            ticket.state = .done
            let tell = ticket.onWithdraw
            ticket.onWithdraw = nil
            tell?()
            return true
        }
    }

    /// Fails everything pending and closes both pools.
    public func close() {
        pool.close()
        tokens.close()
    }
}
