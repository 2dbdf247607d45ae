import APNs
import APNsSimulator
import EventLoop
import Foundation
import TestSupport
import XCTest
@testable import FCM

/// The FCM client over real HTTP/2 and TLS against the simulator's FCM endpoints: the OAuth
/// exchange (an RS256 JWT the simulator verifies with the account's public key), the token
/// cached and renewed ahead of its expiry and once after a 401, `messages:send` on the shared
/// pool, and every FCM answer read through the one table. Messages are counted per token at
/// the simulator.
final class FcmClientTests: XCTestCase {
    private var server: SimTestServer!
    private var clients: [FcmClient] = []

    override func setUpWithError() throws {
        server = try SimTestServer { $0.fcmRetryAfterSeconds = 7 }
    }

    override func tearDown() {
        for client in clients { client.close() }
        server?.close()
    }

    private func account(changes: [String: Any] = [:]) throws -> ServiceAccount {
        try ServiceAccount.parse(Data(try server.pki.serviceAccountJSON(tokenURI: server.fcmTokenURI, changes: changes).utf8))
    }

    private func client(_ account: ServiceAccount? = nil, clock: (() -> Int64)? = nil) throws -> FcmClient {
        var settings = FcmClientSettings(host: "127.0.0.1", port: server.port, caFile: server.pki.caCert)
        settings.requestTimeoutMs = 5_000
        let client = try FcmClient(loop: server.loop, settings: settings, account: try account ?? self.account(),
                                   clock: clock ?? { Clock.unixMs() / 1000 })
        clients.append(client)
        return client
    }

    /// A ring as Routing writes it: data only, high priority, the TTL, the call id as collapse key.
    private func ring(_ token: String, data: String = #"{"type":"incoming_call","id":"call-1"}"#) -> FcmMessage {
        FcmMessage(token: token, body: Array(#"{"message":{"token":"\#(token)","data":\#(data),"android":{"priority":"HIGH","ttl":"27s","collapse_key":"call-1"}}}"#.utf8))!
    }

    private func send(_ client: FcmClient, _ message: FcmMessage, writeByUnixMs: Int64? = nil) -> Result<FcmResponse, FcmClientError> {
        var result: Result<FcmResponse, FcmClientError>?
        client.send(message, writeByUnixMs: writeByUnixMs) { result = $0 }
        drive(server.loop, waitingFor: "FCM's answer", until: { result != nil })
        return result!
    }

    func testAMessageGoesWithAnAccessTokenThatIsReused() throws {
        let client = try client()
        let token = "fcm-token-pixel-1:APA91bH"
        let first = try XCTUnwrap(send(client, ring(token)).value())
        XCTAssertTrue(first.isAccepted)
        XCTAssertNil(first.kind)
        XCTAssertEqual(first.messageName?.hasPrefix("projects/\(server.pki.fcmProjectID)/messages/"), true)
        XCTAssertTrue(try XCTUnwrap(send(client, ring(token)).value()).isAccepted)
        XCTAssertEqual(server.simulator.requestCount(for: token), 2)
        XCTAssertEqual(server.simulator.fcmTokensGranted, 1, "one exchange serves both messages")
        let recorded = try XCTUnwrap(server.simulator.recorded.last { $0.token == token })
        XCTAssertEqual(recorded.path, "/v1/projects/\(server.pki.fcmProjectID)/messages:send")
        XCTAssertEqual(recorded.header("authorization")?.hasPrefix("Bearer ya29.sim-"), true)
        XCTAssertEqual(recorded.header("content-type"), "application/json")
        XCTAssertTrue(String(decoding: recorded.body, as: UTF8.self).contains(#""priority":"HIGH""#))
        let exchange = try XCTUnwrap(server.simulator.recorded.first { $0.path == "/token" })
        XCTAssertEqual(exchange.header("content-type"), "application/x-www-form-urlencoded")
        XCTAssertNil(exchange.header("authorization"))
    }

    func testAnExpiredAccessTokenIsRenewedOnceAndTheMessageDelivered() throws {
        let client = try client()
        let token = "fcm-token-renewed"
        XCTAssertTrue(try XCTUnwrap(send(client, ring(token)).value()).isAccepted)
        server.simulator.expireFcmAccessTokens()
        XCTAssertTrue(try XCTUnwrap(send(client, ring(token)).value()).isAccepted, "renewed and sent again")
        XCTAssertEqual(server.simulator.fcmTokensGranted, 2)
        XCTAssertEqual(client.stats.resentAfterTokenRefusal, 1)
        XCTAssertEqual(server.simulator.requestCount(for: token), 3, "the first, the refused one, its resend")
        XCTAssertEqual(server.simulator.recorded.filter { $0.token == token && $0.status == 401 }.count, 1)
        // A refusal that stays after the renewal is the caller's: a credential problem.
        server.simulator.setScenario(.expiredProviderToken(2), for: token)
        let twice = try XCTUnwrap(send(client, ring(token)).value())
        XCTAssertEqual(twice.code, .unauthenticated)
        XCTAssertEqual(twice.kind, .renewAccessToken)
        XCTAssertEqual(client.stats.resentAfterTokenRefusal, 2, "renewed once, not again")
    }

    func testEveryAnswerIsClassifiedByTheTable() throws {
        let client = try client()
        let cases: [(Scenario, FcmErrorCode, Int, FcmAnswerClass)] = [
            (.unregistered, .unregistered, 404, .tokenInvalid),
            (.notForTopic, .senderIDMismatch, 403, .tokenInvalid),
            (.badToken, .invalidArgument, 400, .tokenInvalid),
            (.payloadTooLarge, .invalidArgument, 400, .requestError),
            (.tooMany, .quotaExceeded, 429, .retryable),
            (.unavailable, .unavailable, 503, .retryable),
            (.error500, .internalError, 500, .retryable),
            (.invalidProviderToken, .thirdPartyAuthError, 401, .credential),
        ]
        for (i, (scenario, code, status, kind)) in cases.enumerated() {
            let token = "fcm-token-\(i)-\(scenario)"
            server.simulator.setScenario(scenario, for: token)
            let response = try XCTUnwrap(send(client, ring(token)).value())
            XCTAssertEqual(response.status, status, "\(scenario)")
            XCTAssertEqual(response.code, code, "\(scenario)")
            XCTAssertEqual(response.kind, kind, "\(scenario)")
            XCTAssertEqual(response.retryAfterSeconds, status == 429 || status == 503 ? 7 : nil, "\(scenario): Retry-After")
            XCTAssertEqual(server.simulator.requestCount(for: token), 1, "\(scenario): sent once")
        }
        XCTAssertEqual(client.stats.refused, cases.count)
    }

    func testAMessageOfTheWrongFormIsARequestError() throws {
        let client = try client()
        let response = try XCTUnwrap(send(client, ring("fcm-token-form", data: #"{"type":"incoming_call","attempt":1}"#)).value())
        XCTAssertEqual(response.code, .invalidArgument)
        XCTAssertFalse(response.namesToken)
        XCTAssertEqual(response.kind, .requestError)
    }

    func testAnAccountTheEndpointDoesNotKnowIsRefusedAndNothingIsSent() throws {
        let client = try client(try account(changes: ["client_email": "someone@else.iam.gserviceaccount.com"]))
        let token = "fcm-token-unsent"
        guard case let .failure(.accessToken(.refused(status, error, description))) = send(client, ring(token)) else {
            return XCTFail("expected the token endpoint's refusal")
        }
        XCTAssertEqual(status, 400)
        XCTAssertEqual(error, "invalid_grant")
        XCTAssertEqual(description, "Invalid JWT Signature.")
        XCTAssertEqual(server.simulator.requestCount(for: token), 0)
        XCTAssertEqual(server.simulator.fcmTokensRefused, 1)
        // The next message within the pause hears the same refusal without asking again.
        guard case .failure(.accessToken(.refused)) = send(client, ring(token)) else { return XCTFail("expected the refusal") }
        XCTAssertEqual(server.simulator.fcmTokensRefused, 1)
    }

    func testAMessagePastItsDeadlineIsNeverWritten() throws {
        let client = try client()
        let token = "fcm-token-late"
        guard case .failure(.transport(.timeout)) = send(client, ring(token), writeByUnixMs: Clock.unixMs() - 1) else {
            return XCTFail("expected a timeout without a write")
        }
        XCTAssertEqual(server.simulator.requestCount(for: token), 0)
    }

    func testAMessageWaitingForItsTokenIsWithdrawn() throws {
        let client = try client()
        let token = "fcm-token-withdrawn"
        var result: Result<FcmResponse, FcmClientError>?
        let ticket = client.send(ring(token)) { result = $0 }
        XCTAssertTrue(client.withdraw(ticket))
        guard case .failure(.transport(.withdrawn))? = result else { return XCTFail("expected .withdrawn at once, got \(String(describing: result))") }
        drive(server.loop, waitingFor: "the token exchange", until: { server.simulator.fcmTokensGranted == 1 })
        pause(server.loop, ms: 50)
        XCTAssertEqual(server.simulator.requestCount(for: token), 0)
        XCTAssertFalse(client.withdraw(ticket))
    }

    func testTheTokenIsRenewedAheadOfItsExpiryWhileItStillServes() throws {
        // The client's clock starts 3,400 s back, so its first token (an hour from then, as the
        // client counts) is 200 s from expiry at the real now, when the second message goes:
        // within the renewal window but still usable. (The simulator checks JWTs against the
        // real clock, so every JWT is issued at a time it accepts.)
        let real = Clock.unixMs() / 1000
        var now = real - 3400
        let client = try client(clock: { now })
        let token = "fcm-token-ahead"
        XCTAssertTrue(try XCTUnwrap(send(client, ring(token)).value()).isAccepted)
        now = real
        var answered: String?
        client.tokens.withToken { answered = try? $0.get() }
        XCTAssertNotNil(answered, "the current token serves at once")
        drive(server.loop, waitingFor: "the renewal's answer", until: { client.tokens.exchanges == 2 })
        XCTAssertTrue(try XCTUnwrap(send(client, ring(token)).value()).isAccepted)
        XCTAssertEqual(server.simulator.fcmTokensGranted, 2, "the renewed token serves")
        XCTAssertEqual(server.simulator.recorded.filter { $0.token == token }.count, 2)
    }
}
