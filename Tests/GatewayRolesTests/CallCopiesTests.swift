import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
import Routing
import TestSupport
import CallStorage
import XCTest
@testable import GatewayRoles

/// Copies of one call routed at the same time push once (docs/protocol.md: a duplicate id is
/// not delivered again), and entries left pending for this consumer without its knowing are
/// claimed back within seconds.
final class CallCopiesTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    func testTheDecisionForACopy() {
        func decide(_ kind: CallEvent.Kind = .incomingCall, done: Bool = false, cancelled: Bool = false, holder: String? = "me",
                    here: Bool = false) -> CallCopies.Decision {
            CallCopies.decide(kind: kind, alreadyDone: done, cancelled: cancelled, claimHolder: holder, consumer: "me",
                              copyRoutingHere: here)
        }
        XCTAssertEqual(decide(), .route, "claimed by this process and no other copy here: routed")
        XCTAssertEqual(decide(here: true), .waitForCopyHere, "another copy routes here: wait for it")
        XCTAssertEqual(decide(holder: "gw-B"), .waitForCopyElsewhere(holder: "gw-B"), "another live gateway holds the claim")
        XCTAssertEqual(decide(done: true, holder: "gw-B", here: true), .route, "a finished call goes to its router (a duplicate)")
        XCTAssertEqual(decide(cancelled: true, holder: "gw-B"), .route, "a cancelled call finishes cancelled without a push")
        XCTAssertEqual(decide(.callCancelled, holder: nil, here: true), .route, "a cancel never waits")
    }

    func testFourHundredCopiesReadTogetherWithTheirOriginalsArePushedOnce() throws {
        let h = try RouterHarness(simulator: { $0.recordLimit = 2_000 }, startRouter: false)
        self.h = h
        for i in 0..<400 {
            let token = String(format: "c0%06x", i)
            h.call("pair-\(i)", voip: token)
            h.call("pair-\(i)", voip: token)
        }
        h.runner.start()
        h.runUntil("all 800 entries acknowledged", timeoutMs: 30_000) { h.entries(h.keys("acme").calls).isEmpty }
        let pushes = (0..<400).map { h.requests(String(format: "c0%06x", $0)).count }
        XCTAssertEqual(pushes.filter { $0 != 1 }.count, 0, "every call pushed exactly once: \(Dictionary(grouping: pushes, by: { $0 }).mapValues(\.count))")
        let outcomes = h.results().map { $0["outcome"] as? String ?? "" }
        XCTAssertEqual(outcomes.filter { $0 == "delivered_voip" }.count, 400, "one outcome per call")
        XCTAssertEqual(outcomes.filter { $0 == "duplicate" }.count, 400, "and a duplicate result per copy")
        XCTAssertEqual(h.runner.stats.finished, ["delivered_voip": 400])
        XCTAssertEqual(h.runner.stats.duplicates, 400)
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 0, "the copies are acknowledged")
    }

    func testACopyArrivingWhileItsOriginalIsInFlightWaitsAndGetsADuplicateResult() throws {
        let h = try RouterHarness(simulator: { $0.scenarios = ["a1a1": .slow(400)] })
        self.h = h
        h.call("slow-twin", voip: "a1a1")
        h.runUntil("the original is out") { h.requests("a1a1").count == 1 || h.sim.simulator.stats.requests >= 1 }
        // What a producer reading the result key sees meanwhile: the claim, which is no result
        // (docs/protocol.md: a result starts with `{`).
        XCTAssertEqual(h.command("GET", h.keys("acme").result("slow-twin"))?.string, "in_flight:" + h.consumer)
        h.call("slow-twin", voip: "a1a1")
        XCTAssertTrue(h.waitForRecords(2))
        h.runUntil("the copy is acknowledged") { h.entries(h.keys("acme").calls).isEmpty }
        h.runFor(200)
        XCTAssertEqual(h.requests("a1a1").count, 1, "the copy did not push while the original was in flight")
        let results = h.results()
        XCTAssertEqual(results.map { $0["outcome"] as? String }, ["delivered_voip", "duplicate"])
        XCTAssertEqual(results.last?["first_outcome"] as? String, "delivered_voip", "the copy's result names the first outcome")
        let stored = h.command("GET", h.keys("acme").result("slow-twin"))?.string ?? ""
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"delivered_voip","#), "the key holds the first result: \(stored)")
    }

    func testAnInvalidEventWithTheIdOfACallInFlightLeavesItsClaim() throws {
        // The push is answered after 1.5 s: the invalid event is read and recorded meanwhile.
        let h = try RouterHarness(simulator: { $0.scenarios = ["a7a7": .slow(1_500)] })
        self.h = h
        h.call("busy", voip: "a7a7")
        h.runUntil("the call is out") { h.sim.simulator.stats.requests >= 1 }
        h.xadd("acme", ["v": 1, "id": "busy", "type": "incoming_call", "voip_token": "not-hex"])
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.recorded.first?.record.outcome, .deadLettered, "the invalid event is dead-lettered at once")
        XCTAssertEqual(h.command("GET", h.keys("acme").result("busy"))?.string, "in_flight:" + h.consumer,
                       "its result did not take the key from the call being routed")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.recorded.last?.record.outcome, .deliveredVoip, "the call is not answered as a duplicate")
        let stored = h.command("GET", h.keys("acme").result("busy"))?.string ?? ""
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"delivered_voip","#), "the call's result replaced the claim: \(stored)")
    }

    func testACorrectedEventAfterAnInvalidOneClaimsTheId() throws {
        // The invalid event's result claims nothing: the corrected event's lookup takes the
        // claim in its place, so a copy of the corrected event waits for it like any copy.
        let h = try RouterHarness(simulator: { $0.scenarios = ["a8a8": .slow(1_500)] })
        self.h = h
        h.xadd("acme", ["v": 1, "id": "fixed", "type": "incoming_call", "voip_token": "not-hex"])
        XCTAssertTrue(h.waitForRecords(1))
        h.call("fixed", voip: "a8a8")
        h.runUntil("the corrected call is out") { h.sim.simulator.stats.requests >= 1 }
        XCTAssertEqual(h.command("GET", h.keys("acme").result("fixed"))?.string, "in_flight:" + h.consumer,
                       "the claim replaced the invalid event's result")
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.recorded.last?.record.outcome, .deliveredVoip)
    }

    func testACopyHeldByAnotherLiveGatewayWaitsForItsOutcome() throws {
        let h = try RouterHarness()
        self.h = h
        // Another live gateway routes the call: it holds the lease and the claim.
        let untilMs = Clock.unixMs() + 60_000
        h.command("ZADD", "pushgw:consumers", String(untilMs), "gw-other")
        h.command("SET", "pushgw:{acme}:result:held", "in_flight:gw-other", "PX", "60000")
        h.call("held", voip: "a2a2")
        h.runFor(600)
        XCTAssertEqual(h.requests("a2a2").count, 0, "no push while another live gateway holds the call")
        XCTAssertEqual(h.entries(h.keys("acme").calls).count, 1, "the copy waits, pending")
        XCTAssertTrue(h.results().isEmpty, "and has no result yet")
        // The other gateway records the result, which replaces its claim.
        h.command("SET", "pushgw:{acme}:result:held", #"{"outcome":"delivered_alert","id":"held","type":"incoming_call"}"#, "EX", "60")
        h.runUntil("the copy acknowledged as a duplicate") { h.entries(h.keys("acme").calls).isEmpty }
        XCTAssertEqual(h.requests("a2a2").count, 0)
        XCTAssertEqual(h.results().map { $0["outcome"] as? String }, ["duplicate"])
        XCTAssertEqual(h.results().first?["first_outcome"] as? String, "delivered_alert", "the other gateway's outcome, named")
    }

    func testACopyLookedUpWithACallHeldElsewhereIsAnsweredInTurnWithTheRecordOfItsOriginal() throws {
        // The copy's lookup runs in Redis while the original routes here, before the original's
        // record; the same lookup finds another call held by another live gateway, whose lease
        // is read before that call's answer is acted on. The original's record is answered
        // before that read: the copy, answered in its lookup's turn, waits for the original and
        // is its duplicate; answered with the held call, after the record, it would see a claim
        // of its own and no copy routing, and push again.
        let h = try RouterHarness(simulator: { $0.scenarios = ["b1b1": .slow(300)] }, settings: { $0.perAppInFlight = 1 })
        self.h = h
        h.command("ZADD", "pushgw:consumers", String(Clock.unixMs() + 60_000), "gw-other")
        h.command("SET", h.keys("acme").result("held"), "in_flight:gw-other", "PX", "60000")
        h.call("twin", voip: "b1b1")
        h.runUntil("the original is out") { h.requests("b1b1").count == 1 }
        // One acme call at a time: the router reads acme's stream again only once the original
        // has left, so the test reads the copy and the held call for it, as its consumer.
        h.call("twin", voip: "b1b1")
        h.call("held", voip: "b2b2")
        var read: [StreamEntry]?
        h.store.readNew(apps: [h.keys("acme")], consumer: h.consumer, count: 10, blockMs: nil) {
            read = (try? $0.get())?.values.first ?? []
        }
        h.runUntil("the copy and the held call read") { read != nil }
        XCTAssertEqual(read?.count, 2)
        // Redis holds every client for 600 ms: the copy's lookup waits there, and the original's
        // record (its answer comes after 300 ms) is sent behind it.
        h.command("CLIENT", "PAUSE", "600", "ALL")
        h.runner.route(read ?? [], app: try XCTUnwrap(h.apps.first { $0.id == "acme" }))
        h.runUntil("the original and its copy acknowledged") { h.entries(h.keys("acme").calls).count == 1 }
        XCTAssertEqual(h.requests("b1b1").count, 1, "the call pushed once")
        let twins = h.results().filter { $0["id"] as? String == "twin" }.map { $0["outcome"] as? String ?? "" }
        XCTAssertEqual(twins.sorted(), ["delivered_voip", "duplicate"], "an outcome, and the copy's duplicate result")
        // The other gateway finishes the held call.
        h.command("SET", h.keys("acme").result("held"), #"{"outcome":"delivered_voip","id":"held","type":"incoming_call"}"#, "EX", "60")
        h.runUntil("the held call's copy acknowledged") { h.entries(h.keys("acme").calls).isEmpty }
        XCTAssertEqual(h.requests("b2b2").count, 0, "and no push for the call held elsewhere")
    }

    func testAClaimOfADeadGatewayIsTakenOver() throws {
        let h = try RouterHarness()
        self.h = h
        h.command("ZADD", "pushgw:consumers", String(Clock.unixMs() - 10_000), "gw-dead")
        h.command("SET", "pushgw:{acme}:result:orphan", "in_flight:gw-dead", "PX", "60000")
        h.call("orphan", voip: "a3a3")
        XCTAssertTrue(h.waitForRecords(1), "routed at once: the claim's holder is not live")
        XCTAssertEqual(h.record("orphan")?.outcome, .deliveredVoip)
        let stored = h.command("GET", "pushgw:{acme}:result:orphan")?.string ?? ""
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"delivered_voip","#), "the result replaced the claim: \(stored)")
        XCTAssertGreaterThan(h.command("TTL", "pushgw:{acme}:result:orphan")?.integer ?? 0, 86_000,
                             "for the idempotency window, 24 h (the defaults: no compact record)")
    }

    func testAnEntryDeliveredAgainAfterItsResultWasWrittenGetsNoSecondResult() throws {
        // What a hung Redis can do: the entry is claimed back while its record, sent on the
        // dropped connection, has still to run; it runs, and the entry is routed again.
        let h = try RouterHarness(startRouter: false)
        self.h = h
        let entry = h.call("redelivered", voip: "a9a9")
        let own = #"{"outcome":"delivered_voip","id":"redelivered","type":"incoming_call","app":"acme","entry":"\#(entry)"}"#
        h.command("SET", h.keys("acme").result("redelivered"), own, "EX", "600")
        h.runner.start()
        h.runUntil("the entry is acknowledged") { h.entries(h.keys("acme").calls).isEmpty }
        h.runFor(100)
        XCTAssertEqual(h.results().count, 0, "its result was written already: no second one, no duplicate")
        XCTAssertEqual(h.requests("a9a9").count, 0, "and no push")
        XCTAssertEqual(h.runner.stats.duplicates, 0)
        XCTAssertEqual(h.command("GET", h.keys("acme").result("redelivered"))?.string, own)
    }

    // MARK: Own entries whose delivery this process never saw

    func testEntriesDeliveredToThisConsumerBeforeItStartedAreClaimedBackAtOnce() throws {
        let h = try RouterHarness(startRouter: false)
        self.h = h
        h.call("orphaned-read", voip: "a4a4")
        // A read of an earlier run under the same name whose reply was never seen.
        h.producer.send(["XGROUP", "CREATE", h.keys("acme").calls, "pushgw", "0", "MKSTREAM"]) { _ in }  // BUSYGROUP is fine
        h.command("XREADGROUP", "GROUP", "pushgw", h.consumer, "COUNT", "10", "STREAMS", h.keys("acme").calls, ">")
        h.runner.start()
        XCTAssertTrue(h.waitForRecords(1, timeoutMs: 5_000), "claimed back within seconds, not after the 2-minute own-entries rule")
        XCTAssertEqual(h.record("orphaned-read")?.outcome, .deliveredVoip)
    }

    func testAReadServedOnADroppedConnectionIsClaimedBackAfterTheReconnect() throws {
        let h = try RouterHarness()
        self.h = h
        h.call("before", voip: "a5a5")
        XCTAssertTrue(h.waitForRecords(1))
        // What a hung Redis does when it resumes: it serves the blocked read of the connection
        // the watchdog dropped. Here: deliver an entry to this consumer elsewhere, then drop the
        // router's reading connection.
        // Written and delivered in one transaction, so the router's own blocked read cannot take it.
        h.command("MULTI")
        h.command("XADD", h.keys("acme").calls, "*", "event", #"{"v":1,"id":"lost-reply","type":"incoming_call","voip_token":"a6a6"}"#)
        h.command("XREADGROUP", "GROUP", "pushgw", h.consumer, "COUNT", "10", "STREAMS", h.keys("acme").calls, ">")
        h.command("EXEC")
        h.command("CLIENT", "KILL", "USER", "default", "SKIPME", "yes")
        XCTAssertTrue(h.waitForRecords(2, timeoutMs: 8_000), "claimed back within seconds of the reconnect")
        XCTAssertEqual(h.record("lost-reply")?.outcome, .deliveredVoip)
    }
}
