import EventLoop
import Foundation
@testable import APNs
import APNsSimulator
import TestSupport
import XCTest

/// The APNs client's queue keeps lanes in order and shares (apps) in turns (docs/architecture.md,
/// "Scheduling"): a flooded share's backlog delays another share's new push by one push a
/// share, and a new ring goes before every background push queued ahead of it.
final class PushQueueTests: XCTestCase {
    private var server: SimTestServer?

    override func tearDown() {
        server?.close()
        server = nil
    }

    /// A simulator with one stream at a time, each answer `answerAfterMs` late, and a client of it.
    private func oneSlowStream(answerAfterMs: Int, streams: Int = 1) throws -> (SimTestServer, ApnsClient) {
        let server = try SimTestServer {
            $0.initialMaxStreams = streams
            $0.raisedMaxStreams = streams
            $0.defaultScenario = .slow(answerAfterMs)
        }
        self.server = server
        let key = try ES256SigningKey.load(p8File: server.pki.jwtKey)
        let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: server.teamID, keyId: server.keyID, key: key))
        var settings = ApnsClientSettings(host: "127.0.0.1", port: server.port, caFile: server.pki.caCert,
                                          authentication: .token(source))
        settings.connections = 1
        return (server, try ApnsClient(loop: server.loop, settings: settings))
    }

    private func push(_ token: String, lane: PushLane = .live, share: Int = 0, deadlineMs: Int64 = 10_000) throws -> PendingPush {
        let n = try PushNotification(deviceToken: token, bundleID: "com.example.app", pushType: .voip, payload: Array("{}".utf8))
        return PendingPush(n, writeByMs: deadlineMs, lane: lane, share: share) { _ in }
    }

    private func token(_ push: PendingPush) -> String {
        guard case let .apns(notification) = push.request else { return "" }
        return notification.deviceToken
    }

    private func tokens(_ queue: inout PushQueue) -> [String] {
        var out: [String] = []
        while let p = queue.popFirst() { out.append(token(p)) }
        return out
    }

    func testLanesGoInOrderAndSharesTakeTurnsWithinALane() throws {
        var queue = PushQueue()
        for i in 0..<3 { queue.append(try push("a\(i)", share: 0)) }
        queue.append(try push("e0e0", lane: .background, share: 1))
        queue.append(try push("b0", share: 1))
        queue.append(try push("a1e7", lane: .alert, share: 0))
        queue.append(try push("7e77", lane: .retry, share: 2))
        XCTAssertEqual(queue.count, 7)
        XCTAssertEqual([0, 1, 2, 3].map { queue.count(share: $0) }, [4, 2, 1, 0], "a share's pushes in every lane")
        XCTAssertEqual(tokens(&queue), ["a0", "b0", "a1", "a2", "7e77", "a1e7", "e0e0"])
        XCTAssertEqual(queue.count(share: 0), 0)
        XCTAssertTrue(queue.isEmpty)
        XCTAssertFalse(queue.hasResends)
    }

    func testAResendGoesFirstInItsShare() throws {
        var queue = PushQueue()
        queue.append(try push("a0", share: 0))
        queue.append(try push("a1", share: 0))
        queue.append(try push("b0", share: 1))
        let first = queue.popFirst()!
        XCTAssertEqual(token(first), "a0")
        queue.prepend(first)
        XCTAssertTrue(queue.hasResends)
        XCTAssertEqual(tokens(&queue), ["b0", "a0", "a1"], "share 1's turn came before share 0's next one")
    }

    func testExpiredPushesAreFoundInEveryShareAndRemovedKeepingTheOrder() throws {
        var queue = PushQueue()
        queue.append(try push("a0", share: 0, deadlineMs: 500))
        queue.append(try push("a1", share: 0, deadlineMs: 2_000))
        queue.append(try push("b0", share: 1, deadlineMs: 100))
        queue.append(try push("b1", share: 1, deadlineMs: 2_000))
        XCTAssertFalse(queue.mayHoldExpired(nowMs: 50))
        XCTAssertTrue(queue.mayHoldExpired(nowMs: 100), "share 1's first push is due")
        let removed = queue.removeAll { $0.deadlineMs <= 600 }
        XCTAssertEqual(removed.map(token).sorted(), ["a0", "b0"])
        XCTAssertEqual(queue.count, 2)
        XCTAssertEqual(tokens(&queue), ["a1", "b1"])
    }

    /// Over real HTTP/2: one stream, every answer 50 ms late; share 0 floods 40 pushes, then
    /// share 1 sends one. At most two of the flood are written before it: the one on the stream
    /// and the one whose turn came first.
    func testAQuietSharesPushIsWrittenBeforeAFloodedSharesBacklog() throws {
        let (server, client) = try oneSlowStream(answerAfterMs: 50)
        defer { client.close() }
        var answered = 0
        let flood = (0..<40).map { String(format: "f0%02x", $0) }
        for token in flood {
            client.send(try PushNotification(deviceToken: token, bundleID: server.bundleID, pushType: .voip, payload: Array("{}".utf8)),
                        share: 0) { _ in answered += 1 }
        }
        // Share 0's first push is written once the connection is up; the quiet push comes then.
        server.loop.run(waitingFor: "the flood's first push written", timeoutMs: 5_000) { client.stats.sent >= 1 }
        client.send(try PushNotification(deviceToken: "aa01", bundleID: server.bundleID, pushType: .voip, payload: Array("{}".utf8)),
                    share: 1) { _ in answered += 1 }
        server.loop.run(waitingFor: "the quiet push answered", timeoutMs: 10_000) {
            server.simulator.recorded.contains { $0.token == "aa01" }
        }
        let order = server.simulator.recorded.compactMap(\.token)
        let ahead = order.firstIndex(of: "aa01")!
        XCTAssertLessThanOrEqual(ahead, 2, "of the flood's 40, \(ahead) were written before the quiet share's push: \(order)")
        server.loop.run(waitingFor: "every push answered", timeoutMs: 15_000) { answered == 41 }
    }

    /// A ring sent after 30 background pushes of its own share is written before them all but
    /// the one on the stream.
    func testANewRingGoesBeforeBackgroundPushesQueuedAheadOfIt() throws {
        let (server, client) = try oneSlowStream(answerAfterMs: 30)
        defer { client.close() }
        var answered = 0
        for i in 0..<30 {
            client.send(try PushNotification(deviceToken: String(format: "e0%02x", i), bundleID: server.bundleID, pushType: .voip,
                                             payload: Array("{}".utf8)), lane: .background) { _ in answered += 1 }
        }
        server.loop.run(waitingFor: "the first ended push written", timeoutMs: 5_000) { client.stats.sent >= 1 }
        client.send(try PushNotification(deviceToken: "ab01", bundleID: server.bundleID, pushType: .voip, payload: Array("{}".utf8)),
                    lane: .live) { _ in answered += 1 }
        server.loop.run(waitingFor: "every push answered", timeoutMs: 15_000) { answered == 31 }
        let order = server.simulator.recorded.compactMap(\.token)
        XCTAssertLessThanOrEqual(order.firstIndex(of: "ab01")!, 1, "the ring went before the queued background pushes: \(order)")
    }

    /// Eight streams, every answer 300 ms late; share 1 has used the pool once, then share 0
    /// floods 40 pushes: it gets at most 6 of the 8 streams (`mostStreamsPerShare`), so share
    /// 1's next push is written at once on a free one instead of waiting for a flood's answer.
    func testAFloodedShareLeavesStreamsForAnotherShareOfThePool() throws {
        let (server, client) = try oneSlowStream(answerAfterMs: 300, streams: 8)
        defer { client.close() }
        func voip(_ token: String) throws -> PushNotification {
            try PushNotification(deviceToken: token, bundleID: server.bundleID, pushType: .voip, payload: Array("{}".utf8))
        }
        var answered = 0
        client.send(try voip("ab00"), share: 1) { _ in answered += 1 }
        server.loop.run(waitingFor: "share 1's first push answered", timeoutMs: 5_000) { answered == 1 }
        for i in 0..<40 { client.send(try voip(String(format: "f1%02x", i)), share: 0) { _ in answered += 1 } }
        server.loop.run(waitingFor: "the flood's streams taken", timeoutMs: 5_000) { client.inFlightCount >= 6 }
        XCTAssertLessThanOrEqual(client.inFlightCount, 6, "the flood holds at most 6 of the 8 streams")
        client.send(try voip("ab01"), share: 1) { _ in answered += 1 }
        XCTAssertEqual(client.inFlightCount, 7, "share 1's push was written at once, on a stream the flood left")
        server.loop.run(waitingFor: "every push answered", timeoutMs: 20_000) { answered == 42 }
        let order = server.simulator.recorded.compactMap(\.token)
        XCTAssertLessThanOrEqual(order.firstIndex(of: "ab01")!, 7, "written after at most 6 of the flood: \(order)")
    }

    /// The cap is for a pool with more than one share: an app alone on it takes every stream,
    /// whatever its share number (a lone app's share is its index among all apps, often not 0).
    func testALoneShareTakesEveryStreamWhateverItsNumber() throws {
        let (server, client) = try oneSlowStream(answerAfterMs: 300, streams: 8)
        defer { client.close() }
        var answered = 0
        for i in 0..<12 {
            let n = try PushNotification(deviceToken: String(format: "c3%02x", i), bundleID: server.bundleID,
                                         pushType: .voip, payload: Array("{}".utf8))
            client.send(n, share: 3) { _ in answered += 1 }
        }
        server.loop.run(waitingFor: "the lone share's streams taken", timeoutMs: 5_000) { client.inFlightCount >= 8 }
        XCTAssertEqual(client.inFlightCount, 8, "share 3, alone, holds all 8 streams, not 6")
        server.loop.run(waitingFor: "every push answered", timeoutMs: 20_000) { answered == 12 }
    }
}
