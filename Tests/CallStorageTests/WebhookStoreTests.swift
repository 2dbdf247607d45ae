import EventLoop
import Foundation
import TestSupport
import XCTest
@testable import CallStorage
@testable import RedisClient

/// WebhookStore against a real redis-server: the group's reads, take-over, touch, the
/// dead-letter step and replay, read back with plain commands.
final class WebhookStoreTests: XCTestCase {
    var server: RedisServer!
    var loop: EventLoop!
    var topology: RedisTopology!
    var store: WebhookStore!
    var producer: RedisConnection!
    let app = AppKeys(app: "acme", sendsWebhooks: true)

    override func setUpWithError() throws {
        server = try RedisServer.start()
        loop = EventLoop()
        let connection = RedisConnection.Config(url: try RedisURL(parsing: server.url), backoff: ReconnectBackoff(baseMs: 20, capMs: 200))
        topology = .own(loop: loop, redis: connection, cluster: nil, clientName: "pushgw-webhooks")
        topology.start()
        store = WebhookStore(topology: topology)
        producer = try connect(loop, server.url)
    }

    override func tearDown() {
        topology.close()
        producer.close()
        loop.close()
        server.stop()
    }

    private func redis(_ args: String...) -> RedisReply? { call(producer, args).value() }

    /// Queues `n` deliveries as the record scripts do; returns their results entry ids.
    private func queue(_ n: Int) -> [String] {
        (0..<n).map { i in
            let results = "\(1_700_000_000_000 + i)-0"
            _ = redis("XADD", app.webhooks, "*", "result", #"{"outcome":"expired","id":"c-\#(i)"}"#, "results_entry", results)
            return results
        }
    }

    func testReadTakeOverTouchAndAcknowledge() throws {
        XCTAssertNotNil(complete(loop) { store.ensureGroup(app, completion: $0) }.value())
        XCTAssertNotNil(complete(loop) { store.ensureGroup(app, completion: $0) }.value(), "BUSYGROUP is success")
        let ids = queue(3)
        let first = complete(loop) { store.read(app, consumer: "gw-a", own: false, count: 10, completion: $0) }.value() ?? []
        XCTAssertEqual(first.map(\.resultsEntry), ids)
        XCTAssertEqual(first[0].retriedSinceMs, 1_700_000_000_000, "the retry window starts at the result's time")
        XCTAssertEqual(complete(loop) { store.read(app, consumer: "gw-a", own: true, count: 10, completion: $0) }.value()?.count, 3,
                       "a restart under the same name reads its own pending ones")
        XCTAssertEqual(complete(loop) { store.read(app, consumer: "gw-a", own: false, count: 10, completion: $0) }.value()?.count, 0)

        pause(loop, ms: 30)
        XCTAssertNotNil(complete(loop) { store.touch(app, consumer: "gw-a", entryIDs: [first[0].entryID], completion: $0) }.value())
        let taken = complete(loop) { store.takeOver(app, consumer: "gw-b", minIdleMs: 20, count: 10, completion: $0) }.value() ?? []
        XCTAssertEqual(taken.map(\.entryID), [first[1].entryID, first[2].entryID], "a touched delivery is not taken over")

        XCTAssertNotNil(complete(loop) { store.delivered(app, entryID: first[0].entryID, completion: $0) }.value())
        XCTAssertEqual(redis("XLEN", app.webhooks)?.integer, 2, "a delivered entry is deleted")
        XCTAssertEqual(redis("XPENDING", app.webhooks, WebhookStore.group)?.array?.first?.integer, 2, "and acknowledged")
    }

    func testADeadLetterIsWrittenOnlyForAPendingDeliveryAndReplayKeepsItsKey() throws {
        XCTAssertNotNil(complete(loop) { store.ensureGroup(app, completion: $0) }.value())
        let ids = queue(2)
        let got = complete(loop) { store.read(app, consumer: "gw-a", own: false, count: 10, completion: $0) }.value() ?? []
        for d in got {
            XCTAssertNotNil(complete(loop) { store.deadLetter(app, d, reason: "status 400", attempts: 1, failedAtMs: 5, completion: $0) }.value())
        }
        // Again for the first: no longer pending (taken and finished elsewhere), nothing written.
        XCTAssertNotNil(complete(loop) { store.deadLetter(app, got[0], reason: "status 400", attempts: 2, failedAtMs: 6, completion: $0) }.value())
        XCTAssertEqual(redis("XLEN", app.webhooks)?.integer, 0)
        let dead = complete(loop) { store.dead(app, count: 10, completion: $0) }.value() ?? []
        XCTAssertEqual(dead.map { $0.fields["results_entry"] }, ids)
        XCTAssertEqual(dead.first?.fields["reason"], "status 400")
        XCTAssertEqual(dead.first?.fields["attempts"], "1")
        XCTAssertEqual(dead.first?.fields["result"], #"{"outcome":"expired","id":"c-0"}"#)

        XCTAssertEqual(complete(loop) { store.replay(app, entryIDs: [dead[1].entryID], count: 100, completion: $0) }.value(), 1)
        XCTAssertEqual(complete(loop) { store.replay(app, entryIDs: ["1-1"], count: 100, completion: $0) }.value(), 0, "an unknown id moves nothing")
        let back = complete(loop) { store.read(app, consumer: "gw-a", own: false, count: 10, completion: $0) }.value() ?? []
        XCTAssertEqual(back.map(\.resultsEntry), [ids[1]], "the replay keeps the Idempotency-Key")
        XCTAssertGreaterThan(back.first?.retriedSinceMs ?? 0, 1_700_000_000_001, "and starts the retry window again")
        XCTAssertEqual(complete(loop) { store.replay(app, count: 100, completion: $0) }.value(), 1, "the rest, oldest first")
        XCTAssertEqual(redis("XLEN", app.webhooksDead)?.integer, 0)
    }
}
