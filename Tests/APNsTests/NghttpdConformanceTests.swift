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
    let tokens = (0..<4).map { i in String(repeating: String(format: "%02x", i + 10), count: 32) }

    override func setUpWithError() throws {
        pki = try TestPKI.make()
        let htdocs = makeTemporaryDirectory("nghttpd-htdocs")
        try FileManager.default.createDirectory(atPath: htdocs + "/3/device", withIntermediateDirectories: true)
        for t in tokens { try Data("{}".utf8).write(to: URL(fileURLWithPath: htdocs + "/3/device/" + t)) }
        port = freeLoopbackPort()
        server = try ChildProcess("nghttpd", ["-a", "127.0.0.1", "-d", htdocs, "-m", "50", String(port), pki.serverKey, pki.serverCert])
        try waitForPort(port)
    }

    override func tearDown() { server?.stop() }

    private func makeClient(_ loop: EventLoop, connections: Int = 2) throws -> ApnsClient {
        let key = try ES256SigningKey.load(p8File: pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
        var config = ApnsClientConfiguration(host: "127.0.0.1", port: port, caFile: pki.caCert, authentication: .token(source))
        config.connections = connections
        config.requestTimeoutMs = 5000
        return try ApnsClient(loop: loop, configuration: config)
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
        loop.run(until: { statuses.values.reduce(0, +) + errors.count == total })
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
        loop.run(until: { result != nil })
        let response = try result!.get()
        XCTAssertEqual(response.status, 404)
        XCTAssertFalse(response.isAccepted)
        client.close()
        loop.close()
    }
}
