import XCTest
import Foundation
import EventLoop
@testable import APNs
import TestSupport

/// The client against nghttp2's own server (`nghttpd`), an independent HTTP/2 implementation:
/// conformance of our framing, flow control and stream handling, over real TLS.
final class NghttpdConformanceTests: XCTestCase {
    var pki: TestPKI!
    var server: ChildProcess!
    var port = 0
    var htdocs = ""
    let tokens = (0..<4).map { i in String(repeating: String(format: "%02x", i + 10), count: 32) }

    override func setUpWithError() throws {
        pki = try TestPKI.shared()
        htdocs = makeTemporaryDirectory("pushgw-nghttpd-htdocs")
        try FileManager.default.createDirectory(atPath: htdocs + "/3/device", withIntermediateDirectories: true)
        for t in tokens { try Data("{}".utf8).write(to: URL(fileURLWithPath: htdocs + "/3/device/" + t)) }
        port = freeLoopbackPort()
        server = try ChildProcess("nghttpd", ["-a", "127.0.0.1", "-d", htdocs, "-m", "50", String(port), pki.serverKey, pki.serverCert])
        try waitForPort(port)
    }

    override func tearDown() {
        server?.stop()
        try? FileManager.default.removeItem(atPath: htdocs)
    }

    private func makeClient(_ loop: EventLoop, connections: Int = 2) throws -> ApnsClient {
        let key = try ES256SigningKey.load(p8File: pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
        var config = ApnsClientSettings(host: "127.0.0.1", port: port, caFile: pki.caCert, authentication: .token(source))
        config.connections = connections
        config.requestTimeoutMs = 5000
        return try ApnsClient(loop: loop, settings: config)
    }

    func testManyPushesOverSeveralConnectionsAllAnswered() throws {
        let loop = EventLoop()
        let client = try makeClient(loop)
        var statuses: [Int: Int] = [:]
        var errors: [ApnsClientError] = []
        let total = 2000
        for i in 0..<total {
            let push = try PushNotification(deviceToken: tokens[i % tokens.count], bundleID: "com.example.app",
                                            pushType: .voip, payload: Array(#"{"caller":"Alice"}"#.utf8))
            client.send(push) { result in
                switch result {
                case let .success(r): statuses[r.status, default: 0] += 1
                case let .failure(e): errors.append(e)
                }
            }
        }
        loop.run(waitingFor: "an answer or an error for each of the \(total) pushes", timeoutMs: 60_000) {
            statuses.values.reduce(0, +) + errors.count == total
        }
        XCTAssertEqual(errors, [], "no transport error against a healthy server")
        XCTAssertEqual(statuses[200], total, "every push is answered 200 by nghttpd")
        XCTAssertEqual(client.stats.peakAnnouncedStreams, 50, "the client reads the server's MAX_CONCURRENT_STREAMS")
        XCTAssertLessThanOrEqual(client.stats.peakInFlight, 2 * 50, "never more streams than the server allows")
        client.close()
        loop.close()
    }

    func testUnknownPathIsARejectionNotAnError() throws {
        let loop = EventLoop()
        let client = try makeClient(loop, connections: 1)
        var result: Result<PushNotificationResponse, ApnsClientError>?
        let push = try PushNotification(deviceToken: "ab" + tokens[0], bundleID: "com.example.app", pushType: .alert,
                                        payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8))
        client.send(push) { result = $0 }
        loop.run(waitingFor: "the push's completion") { result != nil }
        let response = try result!.get()
        XCTAssertEqual(response.status, 404)
        XCTAssertFalse(response.isAccepted)
        client.close()
        loop.close()
    }

    func testFrozenServerIsDetectedByPingAndReplaced() throws {
        let loop = EventLoop()
        let push = try PushNotification(deviceToken: tokens[0], bundleID: "com.example.app", pushType: .voip,
                                        payload: Array("{}".utf8))
        let fast = try makeFastClient(loop)
        var first: Result<PushNotificationResponse, ApnsClientError>?
        fast.send(push) { first = $0 }
        loop.run(waitingFor: "the first push's completion") { first != nil }
        XCTAssertEqual(try first!.get().status, 200, "connected before the freeze")

        // Freeze the server: TCP stays up, but nothing answers, not even PING.
        kill(server.pid, SIGSTOP)
        defer { kill(server.pid, SIGCONT) }
        var frozen: [Result<PushNotificationResponse, ApnsClientError>] = []
        fast.send(push) { frozen.append($0) }
        loop.run(waitingFor: "the frozen server's push to complete") { frozen.count == 1 }
        XCTAssertEqual(frozen.first, .failure(.timeout), "a frozen server's push times out")
        loop.run(waitingFor: "the unanswered PING to mark the connection dead") { fast.stats.deadConnections >= 1 }
        XCTAssertEqual(fast.stats.deadConnections, 1, "the unanswered PING marks the connection dead")
        kill(server.pid, SIGCONT)
        var after: Result<PushNotificationResponse, ApnsClientError>?
        fast.send(push) { after = $0 }
        loop.run(waitingFor: "the push after the thaw to complete") { after != nil }
        XCTAssertEqual(try after!.get().status, 200, "a new connection serves once the server is back")
        fast.close(); loop.close()
    }

    func testReconnectsWithBackoffUntilTheServerComes() throws {
        let loop = EventLoop()
        server.stop()
        let key = try ES256SigningKey.load(p8File: pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
        var config = ApnsClientSettings(host: "127.0.0.1", port: port, caFile: pki.caCert, authentication: .token(source))
        config.connections = 1
        config.requestTimeoutMs = 400
        config.reconnectBaseMs = 20
        config.reconnectCapMs = 100
        let client = try ApnsClient(loop: loop, settings: config)
        let push = try PushNotification(deviceToken: tokens[0], bundleID: "com.example.app", pushType: .voip,
                                        payload: Array("{}".utf8))
        var down: Result<PushNotificationResponse, ApnsClientError>?
        let sentMs = Clock.monotonicMs()
        client.send(push) { down = $0 }
        loop.run(waitingFor: "the push to a closed port to fail") { down != nil }
        let elapsedMs = Clock.monotonicMs() - sentMs
        guard case .failure(.connectionFailed) = down! else { return XCTFail("nothing listens: \(down!)") }
        XCTAssertGreaterThanOrEqual(client.stats.connectFailures, 2, "it kept trying while the push waited")
        // Each retry waits at least half its backoff ceiling (ceilings 20, 40, 80, then 100 ms),
        // and a timer never fires early: within the time the push waited, no more connects fit.
        var fitting = 1, waitedMs: Int64 = 0
        while true {
            let least = min(config.reconnectCapMs, config.reconnectBaseMs << Int64(min(fitting - 1, 20))) / 2
            guard waitedMs + least <= elapsedMs else { break }
            waitedMs += least
            fitting += 1
        }
        XCTAssertLessThanOrEqual(client.stats.connectFailures, fitting,
                                 "no connect before its backoff ran out (\(elapsedMs) ms allow \(fitting))")
        server = try ChildProcess("nghttpd", ["-a", "127.0.0.1", "-d", htdocs, "-m", "50", String(port), pki.serverKey, pki.serverCert])
        try waitForPort(port)
        // The client may still be waiting out a backoff: a push can fail until it reconnects.
        var up: Result<PushNotificationResponse, ApnsClientError>?
        let end = Clock.monotonicMs() + Deadline.defaultMs
        while up.map({ (try? $0.get().status) != 200 }) ?? true, Clock.monotonicMs() < end {
            up = nil
            client.send(push) { up = $0 }
            loop.run(waitingFor: "a push to the restarted server to complete") { up != nil }
        }
        XCTAssertEqual(try up?.get().status, 200, "the client reconnected once the server listened")
        client.close(); loop.close()
    }

    private func makeFastClient(_ loop: EventLoop) throws -> ApnsClient {
        let key = try ES256SigningKey.load(p8File: pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
        var config = ApnsClientSettings(host: "127.0.0.1", port: port, caFile: pki.caCert, authentication: .token(source))
        config.connections = 1
        config.requestTimeoutMs = 200
        config.pingTimeoutMs = 200
        return try ApnsClient(loop: loop, settings: config)
    }
}
