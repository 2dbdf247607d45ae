import EventLoop
import Foundation
@testable import APNs
import APNsSimulator
import TestSupport
import XCTest

/// A push is never written once its time budget is spent (it then fails unsent, so a retry
/// cannot make it arrive twice), a written push gets its whole answer time from the write, a
/// VoIP push is never written at or after its call's deadline, and a pool whose connects fail
/// tries again within a second while pushes wait (docs/architecture.md, the APNs client).
final class ApnsClientBudgetTests: XCTestCase {
    private var server: SimTestServer?

    override func tearDown() {
        server?.close()
        server = nil
    }

    /// One stream at a time, every answer 1 s late: pushes queue behind each other.
    private func oneSlowStream() throws -> SimTestServer {
        let server = try SimTestServer {
            $0.initialMaxStreams = 1
            $0.raisedMaxStreams = 1
            $0.defaultScenario = .slow(1_000)
        }
        self.server = server
        return server
    }

    private func client(_ server: SimTestServer, port: Int? = nil,
                        _ configure: (inout ApnsClientSettings) -> Void = { _ in }) throws -> ApnsClient {
        let key = try ES256SigningKey.load(p8File: server.pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: server.teamID, keyId: server.keyID, key: key))
        var config = ApnsClientSettings(host: "127.0.0.1", port: port ?? server.port, caFile: server.pki.caCert,
                                        authentication: .token(source))
        config.connections = 1
        configure(&config)
        return try ApnsClient(loop: server.loop, settings: config)
    }

    private func voip(_ server: SimTestServer, _ token: String) throws -> PushNotification {
        try PushNotification(deviceToken: token, bundleID: server.bundleID, pushType: .voip, payload: Array(#"{"a":1}"#.utf8))
    }

    private func failure(_ result: Result<PushNotificationResponse, ApnsClientError>?) -> ApnsClientError? {
        guard case let .failure(error)? = result else { return nil }
        return error
    }

    func testAPushWhoseBudgetIsSpentInTheQueueIsNeverWrittenAndAWrittenOneGetsItsWholeAnswerTime() throws {
        let server = try oneSlowStream()
        // 1.5 s to be written, then 1.5 s to be answered; each answer takes 1 s.
        let c = try client(server) { $0.requestTimeoutMs = 1_500 }
        defer { c.close() }
        let tokens = (1...5).map { String(format: "b0%02x", $0) }
        var results: [String: Result<PushNotificationResponse, ApnsClientError>] = [:]
        for token in tokens { c.send(try voip(server, token)) { results[token] = $0 } }
        server.loop.run(waitingFor: "every push completed", timeoutMs: 10_000) { results.count == tokens.count }
        let received = Set(server.simulator.recorded.compactMap(\.token))
        // b001 is written at once and answered after 1 s; b002 is written then, with 0.5 s of
        // its budget left, and answered after 2 s in all — within its answer time from the write.
        for token in received {
            guard case .success(let response) = results[token] else {
                return XCTFail("\(token) reached APNs, so its answer must reach the caller, not a timeout: \(String(describing: results[token]))")
            }
            XCTAssertEqual(response.status, 200)
        }
        XCTAssertEqual(received, ["b001", "b002"], "the pushes whose budget ran out in the queue never left")
        for token in ["b003", "b004", "b005"] {
            XCTAssertEqual(failure(results[token]), .timeout, "\(token) failed as a timeout, unsent")
        }
        XCTAssertEqual(c.stats.expiredUnsent, 3)
        XCTAssertEqual(c.stats.sent, 2, "two pushes written")
    }

    func testAVoipPushIsNeverWrittenAtOrAfterItsCallsDeadline() throws {
        let server = try SimTestServer {
            $0.initialMaxStreams = 1
            $0.raisedMaxStreams = 1
            $0.defaultScenario = .slow(600)
        }
        self.server = server
        // The client sweeps its queue every 250 ms from the first send; the only stream frees
        // at ~600 ms, between two sweeps: the push whose call stops ringing at 520 ms is still
        // queued then, and must be failed rather than written.
        let c = try client(server) { $0.requestTimeoutMs = 1_000 }
        defer { c.close() }
        var first: Result<PushNotificationResponse, ApnsClientError>?
        var late: Result<PushNotificationResponse, ApnsClientError>?
        c.send(try voip(server, "c001")) { first = $0 }
        c.send(try voip(server, "c002"), writeByUnixMs: Clock.unixMs() + 520) { late = $0 }
        server.loop.run(waitingFor: "both pushes completed", timeoutMs: 5_000) { first != nil && late != nil }
        XCTAssertEqual(failure(late), .timeout, "failed unsent")
        server.loop.run(forMs: 300)
        XCTAssertFalse(server.simulator.recorded.contains { $0.token == "c002" }, "never written after the call's deadline")
        XCTAssertEqual(c.stats.expiredUnsent, 1)
    }

    func testTheReconnectDelayIsCappedWhilePushesWait() throws {
        let key = try ES256SigningKey.load(p8File: TestPKI.shared().jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
        var config = ApnsClientSettings(host: "x", authentication: .token(source))
        config.reconnectBaseMs = 100
        config.reconnectCapMs = 30_000
        config.reconnectCapWhileWaitingMs = 1_000
        XCTAssertEqual(config.reconnectDelayMs(failures: 1, unit: 1, pushesWaiting: true), 100)
        XCTAssertEqual(config.reconnectDelayMs(failures: 10, unit: 1, pushesWaiting: false), 30_000, "idle: the long backoff")
        XCTAssertEqual(config.reconnectDelayMs(failures: 10, unit: 1, pushesWaiting: true), 1_000, "waiting: at most 1 s")
        XCTAssertEqual(config.reconnectDelayMs(failures: 10, unit: 0, pushesWaiting: true), 500)
    }

    func testWhilePushesWaitAFailingPoolTriesAgainEverySecondAndDeliversSoonAfterAPNsReturns() throws {
        // A simulator to borrow the PKI from, and a port where nothing listens yet.
        let pkiServer = try SimTestServer()
        self.server = pkiServer
        let port = freeLoopbackPort()
        let c = try client(pkiServer, port: port) { $0.requestTimeoutMs = 20_000 }
        defer { c.close() }
        var failures: [Int64] = []
        var back: Int64?
        c.onReachability = { event in
            switch event {
            case .connectFailed: failures.append(Clock.monotonicMs())
            case .reachableAgain: back = Clock.monotonicMs()
            }
        }
        var answer: Result<PushNotificationResponse, ApnsClientError>?
        c.send(try voip(pkiServer, "d001")) { answer = $0 }
        pkiServer.loop.run(forMs: 6000)
        let gaps = zip(failures.dropFirst(), failures).map { $0 - $1 }
        XCTAssertGreaterThanOrEqual(failures.count, 6, "connects keep being tried: \(failures.count) in 6 s")
        XCTAssertLessThanOrEqual(gaps.max() ?? .max, 1_300, "never more than about a second apart while a push waits: \(gaps)")
        XCTAssertNotNil(c.unreachableSinceMs, "the pool knows it is unreachable")
        XCTAssertNil(answer, "the push still waits")

        // APNs comes back on that port (on the same loop as the client).
        let returned = Clock.monotonicMs()
        var config = SimulatorConfig(certFile: pkiServer.pki.serverCert, keyFile: pkiServer.pki.serverKey)
        config.tokenKeys = [pkiServer.keyID: pkiServer.pki.jwtPublicKey]
        config.teamId = pkiServer.teamID
        config.port = port
        let apns = try ApnsSimulator(loop: pkiServer.loop, config: config)
        try apns.start()
        defer { apns.close() }
        pkiServer.loop.run(waitingFor: "the waiting push answered", timeoutMs: 5_000) { answer != nil }
        guard case .success(let response)? = answer else { return XCTFail("delivered once APNs returned: \(String(describing: answer))") }
        XCTAssertEqual(response.status, 200)
        XCTAssertLessThanOrEqual((back ?? .max) - returned, 2_000, "reachable again within about a second of APNs' return")
        XCTAssertNil(c.unreachableSinceMs)
    }
}
