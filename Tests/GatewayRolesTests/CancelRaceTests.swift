import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// A cancel that reaches the gateway before its call's VoIP push is written wins, wherever the
/// call is then (docs/protocol.md, *The event*): read with it, read in the next read, read while
/// the call's lookup is in flight, or while its push waits in the APNs client's queue. A cancel
/// that comes after the push was written says so in its result (`cancelled_after`). Rings are
/// counted at the simulator, per token.
final class CancelRaceTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    private func callJSON(_ id: String, token: String) -> String {
        #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token)","voip":{"caller":"+15551234567"}}"#
    }

    private func cancelJSON(_ id: String) -> String { #"{"v":1,"id":"\#(id)","type":"call_cancelled"}"# }

    /// XADDs of `events` written one after another without waiting for a reply (one pipeline).
    private func pipeline(_ h: RouterHarness, _ events: [String]) {
        var replies = 0
        for event in events {
            h.producer.send(command: RedisCommand([Array("XADD".utf8), Array(h.keys("acme").calls.utf8), Array("*".utf8), Array("event".utf8),
                                    Array(event.utf8)]), blockMs: 0) { result in
                if case let .failure(error) = result { XCTFail("XADD failed: \(error)") }
                replies += 1
            }
        }
        h.runUntil("the pipeline's \(events.count) XADDs") { replies == events.count }
    }

    private func token(_ i: Int) -> String { String(format: "c0%06x", i) }

    /// Each pair is one pipeline (XADD of the call, XADD of its cancel) that lands while the
    /// router is blocked in its read: Redis answers the read with the call alone, and the cancel
    /// comes with the next read, which the call's start waits for.
    func testAHundredCallsEachWrittenWithItsCancelInOnePipelineRingNothing() throws {
        let h = try RouterHarness(simulator: { $0.recordLimit = 1_000 })
        self.h = h
        for i in 0..<100 {
            h.runUntil("the router blocked in its read") { h.runner.reading }
            pipeline(h, [callJSON("pair-\(i)", token: token(i)), cancelJSON("pair-\(i)")])
            guard h.waitForRecords(2 * (i + 1), timeoutMs: 5_000) else { return }
        }
        let rung = (0..<100).filter { !h.requests(token($0)).isEmpty }
        XCTAssertEqual(rung.count, 0, "no VoIP push for a call whose cancel was written right after it: \(rung.count) rang")
        let outcomes = (0..<100).map { h.record("pair-\($0)")?.outcome }
        XCTAssertEqual(outcomes.filter { $0 == .cancelled }.count, 100, "every call cancelled")
        XCTAssertEqual(h.sim.simulator.stats.requests, 0, "nothing reached APNs")
    }

    /// The same with all hundred pairs in one pipeline: pairs split between reads still lose
    /// their push.
    func testAHundredPairsInOnePipelineRingNothing() throws {
        let h = try RouterHarness(simulator: { $0.recordLimit = 1_000 })
        self.h = h
        h.runUntil("the router blocked in its read") { h.runner.reading }
        pipeline(h, (0..<100).flatMap { [callJSON("bulk-\($0)", token: token($0)), cancelJSON("bulk-\($0)")] })
        h.waitForRecords(200)
        XCTAssertEqual((0..<100).filter { !h.requests(token($0)).isEmpty }, [], "no VoIP push")
        XCTAssertEqual((0..<100).filter { h.record("bulk-\($0)")?.outcome != .cancelled }, [], "every call cancelled")
    }

    /// The calls' lookups are held on the store's command connection (a BLPOP queued before
    /// them, as a backlog of records would), the cancels come 5 ms later on the reading
    /// connection: each call learns of its cancel before its lookup answers.
    func testAHundredCancelsReadWhileTheirCallsLookupsAreInFlightWin() throws {
        let h = try RouterHarness(simulator: { $0.recordLimit = 1_000 })
        self.h = h
        h.runUntil("the router blocked in its read") { h.runner.reading }
        var held: Result<RedisReply, RedisError>?
        guard case let .single(commands) = h.store.topology else { return XCTFail("the harness's store is on one Redis") }
        commands.send(["BLPOP", "test:release-lookups", "10"], blockMs: 10_000) { held = $0 }
        pipeline(h, (0..<100).map { callJSON("late-\($0)", token: token($0)) })
        h.runUntil("the hundred calls admitted, their lookups out") { h.runner.inFlight == 100 }
        h.runFor(5)
        XCTAssertNil(held, "the lookups are still held")
        pipeline(h, (0..<100).map { cancelJSON("late-\($0)") })
        h.runUntil("the hundred cancels admitted") { h.runner.inFlight == 200 }
        XCTAssertNil(held, "the lookups are still held when the cancels are read")
        h.command("LPUSH", "test:release-lookups", "go")
        h.waitForRecords(200)
        XCTAssertEqual((0..<100).filter { !h.requests(token($0)).isEmpty }, [], "no VoIP push")
        XCTAssertEqual((0..<100).filter { h.record("late-\($0)")?.outcome != .cancelled }, [], "every call cancelled")
    }

    /// A push waiting in the APNs client's queue (the connection allows one stream until its
    /// first 200, and that stream is taken by a slow push) is taken back when its cancel comes.
    func testACancelTakesBackAPushStillWaitingInTheApnsQueue() throws {
        let h = try RouterHarness(simulator: { $0.scenarios = ["a5a5": .slow(600)] })
        self.h = h
        h.call("first", voip: "a5a5")
        h.runUntil("the slow push on the connection's one stream") { h.sim.simulator.stats.requests == 1 }
        h.call("queued", voip: "b6b6", alert: "a1e7")
        h.runUntil("the second push queued behind it") { h.pools.all.values.reduce(0) { $0 + $1.queuedCount } == 1 }
        h.xadd("acme", ["v": 1, "id": "queued", "type": "call_cancelled"])
        h.waitForRecords(3)
        XCTAssertEqual(h.record("queued")?.outcome, .cancelled)
        XCTAssertEqual(h.record("queued")?.attempts, [], "nothing was sent for it")
        XCTAssertEqual(h.record("first")?.outcome, .deliveredVoip)
        h.runFor(200)
        XCTAssertTrue(h.requests("b6b6").isEmpty, "the withdrawn push never reached APNs")
        XCTAssertTrue(h.requests("a1e7").isEmpty, "nor a missed-call alert")
    }

    /// After delivery: the cancel's own result says the call had rung, and when.
    func testACancelAfterDeliveryReportsCancelledAfter() throws {
        let h = try RouterHarness()
        self.h = h
        let entry = h.call("rang", voip: "a0a0")
        h.waitForRecords(1)
        XCTAssertEqual(h.record("rang")?.outcome, .deliveredVoip)
        h.xadd("acme", ["v": 1, "id": "rang", "type": "call_cancelled"])
        h.waitForRecords(2)
        let cancel = h.results().last { $0["type"] as? String == "call_cancelled" }
        XCTAssertEqual(cancel?["outcome"] as? String, "cancelled")
        XCTAssertEqual(cancel?["cancelled_after"] as? String, "delivered_voip")
        let entryMs = Int64(entry.split(separator: "-")[0])!
        let latency = h.record("rang")?.latencyMs ?? -1
        XCTAssertEqual((cancel?["delivered_at"] as? NSNumber)?.int64Value, entryMs + latency, "the time APNs accepted the push")
        let stored = h.command("GET", h.keys("acme").cancelResult("rang"))?.string
        XCTAssertTrue(stored?.contains(#""cancelled_after":"delivered_voip""#) ?? false, "the cancel's result key: \(stored ?? "nil")")
        XCTAssertEqual(h.requests("a0a0").count, 1)
    }

    /// A cancel read while the push is written and not answered yet waits for the answer, and
    /// says what it was.
    func testACancelWhileThePushIsOnTheWireReportsWhatItBecame() throws {
        let h = try RouterHarness(simulator: { $0.scenarios = ["a5a5": .slow(400)] })
        self.h = h
        h.call("ringing", voip: "a5a5", alert: "a1e7")
        h.runUntil("the push written") { h.sim.simulator.stats.requests == 1 }
        h.xadd("acme", ["v": 1, "id": "ringing", "type": "call_cancelled"])
        h.waitForRecords(2)
        XCTAssertEqual(h.record("ringing")?.outcome, .deliveredVoip, "APNs accepted it: it rang")
        let cancel = h.recorded.first { $0.record.type == .callCancelled }?.record
        XCTAssertEqual(cancel?.outcome, .cancelled)
        XCTAssertEqual(cancel?.cancelledAfter, .deliveredVoip)
        XCTAssertNotNil(cancel?.deliveredAtMs)
        XCTAssertTrue(h.requests("a1e7").isEmpty, "no missed-call alert after a cancel")
    }

    /// Cancels and calls have separate ids: a call named `cancel:X` is its own call.
    func testACallNamedCancelColonXAfterACancelOfXIsRouted() throws {
        let h = try RouterHarness()
        self.h = h
        h.xadd("acme", ["v": 1, "id": "x1", "type": "call_cancelled"])
        h.waitForRecords(1)
        h.call("cancel:x1", voip: "a0b0")
        h.waitForRecords(2)
        XCTAssertEqual(h.record("cancel:x1")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.requests("a0b0").count, 1)
        XCTAssertEqual(h.runner.stats.duplicates, 0)
        // And the other way round: a cancel of X after a call named cancel:X is its own cancel.
        h.call("x2", voip: "a0b1")
        h.xadd("acme", ["v": 1, "id": "cancel:x2", "type": "call_cancelled"])
        h.waitForRecords(4)
        XCTAssertEqual(h.record("x2")?.outcome, .deliveredVoip, "a cancel of cancel:x2 does not cancel x2")
    }
}
