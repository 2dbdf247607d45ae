import APNs
import APNsSimulator
import CallStorage
import DeadLetters
import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// A call that rings a person's devices (docs/protocol.md, *Devices*), routed end to end by the
/// real router against the APNs simulator and a real redis-server: every device at once, the
/// first answer (or decline, or cancel) stops the others with one background push each, a
/// missed call is said once per device.
final class DevicesTests: XCTestCase {
    private var h: RouterHarness!
    private static let voip = ["d1a00000", "d1a00001", "d1a00002"]
    private static let alert = ["a1e70000", "a1e70001", "a1e70002"]
    private static let ids = ["bob-iphone", "bob-ipad", "bob-iphone-2"]

    override func tearDown() {
        h?.close()
        h = nil
    }

    @discardableResult
    private func ring(_ id: String, deadlineInMs: Int64 = 30_000) -> String {
        let devices = (0..<3).map { ["id": Self.ids[$0], "voip_token": Self.voip[$0], "alert_token": Self.alert[$0]] }
        return h.xadd("acme", ["v": 1, "id": id, "type": "incoming_call", "devices": devices,
                               "deadline": Clock.unixMs() + deadlineInMs,
                               "voip": ["caller": "+15551234567", "callerName": "Alice"]])
    }

    private func end(_ id: String, _ type: String, device: Int? = nil) {
        var event: [String: Any] = ["v": 1, "id": id, "type": type]
        if let device { event["device"] = Self.ids[device] }
        h.xadd("acme", event)
    }

    /// Runs until every device's VoIP push was answered 200 (they all ring).
    private func waitForRinging(_ devices: [Int] = [0, 1, 2], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertTrue(h.runUntil("the VoIP pushes of devices \(devices) accepted", file: file, line: line) {
            devices.allSatisfy { self.h.requests(Self.voip[$0]).contains { $0.status == 200 } }
        }, file: file, line: line)
    }

    private func endRecord(_ type: CallEvent.Kind) -> OutcomeRecord? {
        h.recorded.first { $0.record.type == type }?.record
    }

    /// The background pushes that ended the call on device `i`, each checked for its form.
    private func endedPushes(_ i: Int, _ told: EndedElsewhere, callID: String, file: StaticString = #filePath,
                             line: UInt = #line) -> Int {
        let pushes = h.requests(Self.alert[i])
        for p in pushes {
            XCTAssertEqual(p.header("apns-push-type"), "background", "never a VoIP push to end a call", file: file, line: line)
            XCTAssertEqual(p.header("apns-priority"), "5", "background pushes go at priority 5", file: file, line: line)
            XCTAssertEqual(p.header("apns-topic"), h.sim.bundleID, file: file, line: line)
            XCTAssertEqual(String(decoding: p.body, as: UTF8.self),
                           #"{"aps":{"content-available":1},"id":"\#(callID)","ended":"\#(told.rawValue)"}"#, file: file, line: line)
        }
        return pushes.count
    }

    func testAThreeDeviceCallAnsweredOnOneEndsOnTheOtherTwoWithOneBackgroundPushEachAndNoAlert() throws {
        h = try RouterHarness()
        let entry = ring("d-answered")
        waitForRinging()
        end("d-answered", "call_answered", device: 1)
        XCTAssertTrue(h.waitForRecords(2), "the call's result and the answer's")
        XCTAssertEqual(endedPushes(0, .answeredElsewhere, callID: "d-answered"), 1)
        XCTAssertEqual(endedPushes(2, .answeredElsewhere, callID: "d-answered"), 1)
        XCTAssertEqual(h.requests(Self.alert[1]).count, 0, "the device that answered gets nothing")
        for token in Self.voip { XCTAssertEqual(h.requests(token).count, 1, "one VoIP push per device") }
        let call = try XCTUnwrap(h.record("d-answered"))
        XCTAssertEqual(call.outcome, .deliveredVoip)
        XCTAssertEqual(call.entry, entry)
        XCTAssertEqual(call.ended, .answered(device: Self.ids[1]))
        XCTAssertEqual(call.devices?.map(\.outcome), [.deliveredVoip, .deliveredVoip, .deliveredVoip])
        XCTAssertEqual(call.devices?.map(\.told), [.answeredElsewhere, nil, .answeredElsewhere])
        let answer = try XCTUnwrap(endRecord(.callAnswered))
        XCTAssertEqual(answer.outcome, .answered)
        XCTAssertEqual(answer.stopped, [])
        XCTAssertEqual(answer.told, [Self.ids[0], Self.ids[2]])
        let stored = try XCTUnwrap(h.command("GET", h.keys("acme").cancelResult("d-answered"))?.string)
        XCTAssertTrue(stored.hasPrefix(#"{"outcome":"answered","cancelled_after":"delivered_voip""#), stored)
        XCTAssertTrue(stored.contains(#""told":["bob-iphone","bob-iphone-2"]"#), stored)
        XCTAssertEqual(h.command("GET", h.keys("acme").cancelled("d-answered"))?.string, "answered:bob-ipad",
                       "the marker names the end, for a gateway that rings the call elsewhere")
    }

    /// 150 calls of 3 devices on a pool of 10 streams each answered in 50 ms: the read after them
    /// leaves acme out, its
    /// pushes waiting for streams, and the other apps are paused, so no app can be read. Every
    /// device rings, and no call leaves until its answer is read, which waits in acme's stream
    /// behind the calls: the router plans its read again as the queue moves, reads the answers
    /// and ends every call by its answer, long before the deadline. (Waiting for a call to leave
    /// before reading again, the calls rang to their deadline: make bench's 3-device drain
    /// stopped at 400 calls per app.)
    func testCallsRingingWhileTheirPushesWaitedForStreamsHaveTheirAnswersRead() throws {
        h = try RouterHarness(simulator: {
            $0.raisedMaxStreams = 10
            $0.defaultScenario = .slow(50)
            $0.recordLimit = 10_000
        })
        for app in ["beta", "broken", "other"] { h.pause(app) }
        let calls = 150
        func token(_ kind: Int, _ call: Int, _ device: Int) -> String { String(format: "e%x%05x%x", kind, call, device) }
        for i in 0..<calls {
            let devices = (0..<3).map { ["id": Self.ids[$0], "voip_token": token(0, i, $0), "alert_token": token(1, i, $0)] }
            h.xadd("acme", ["v": 1, "id": "crowd-\(i)", "type": "incoming_call", "devices": devices,
                            "deadline": Clock.unixMs() + 60_000, "voip": ["caller": "+15551234567"]])
        }
        XCTAssertTrue(h.runUntil("every device's VoIP push accepted", timeoutMs: 20_000) {
            (0..<calls).allSatisfy { i in (0..<3).allSatisfy { self.h.requests(token(0, i, $0)).contains { $0.status == 200 } } }
        })
        XCTAssertTrue(h.recorded.isEmpty, "the calls ring: none ended before its answer")
        let start = Clock.unixMs()
        for i in 0..<calls { h.xadd("acme", ["v": 1, "id": "crowd-\(i)", "type": "call_answered", "device": Self.ids[1]]) }
        XCTAssertTrue(h.waitForRecords(2 * calls, timeoutMs: 20_000), "each call's result and its answer's")
        XCTAssertLessThan(Clock.unixMs() - start, 20_000, "ended by their answers, not by the deadline")
        for i in 0..<calls {
            XCTAssertEqual(h.record("crowd-\(i)")?.ended, .answered(device: Self.ids[1]), "crowd-\(i)")
            XCTAssertEqual((0..<3).map { h.requests(token(0, i, $0)).count }, [1, 1, 1], "crowd-\(i): one VoIP push per device")
        }
    }

    func testAnAnswerAnotherGatewayReadEndsTheRingHereAtTheNextRecheck() throws {
        h = try RouterHarness(missedCallAlert: .unanswered)
        let start = Clock.unixMs()
        ring("d-elsewhere", deadlineInMs: 20_000)
        waitForRinging()
        // What another gateway's answer step leaves: the marker (it knows no devices to tell).
        h.command("SET", h.keys("acme").cancelled("d-elsewhere"), "answered:" + Self.ids[1], "EX", "60")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertLessThan(Clock.unixMs() - start, 10_000, "ended by the marker, not by the deadline")
        XCTAssertEqual(endedPushes(0, .answeredElsewhere, callID: "d-elsewhere"), 1)
        XCTAssertEqual(endedPushes(2, .answeredElsewhere, callID: "d-elsewhere"), 1)
        XCTAssertEqual(h.requests(Self.alert[1]).count, 0, "the device that answered gets nothing, no missed-call alert")
        XCTAssertEqual(h.record("d-elsewhere")?.ended, .answered(device: Self.ids[1]))
    }

    func testADeclineEndsTheCallOnTheOthers() throws {
        h = try RouterHarness()
        ring("d-declined")
        waitForRinging()
        end("d-declined", "call_declined", device: 0)
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests(Self.alert[0]).count, 0, "the device that declined gets nothing")
        XCTAssertEqual(endedPushes(1, .declinedElsewhere, callID: "d-declined"), 1)
        XCTAssertEqual(endedPushes(2, .declinedElsewhere, callID: "d-declined"), 1)
        XCTAssertEqual(h.record("d-declined")?.ended, .declined(device: Self.ids[0]))
        XCTAssertEqual(endRecord(.callDeclined)?.outcome, .declined)
    }

    func testACancelEndsTheCallOnEveryDevice() throws {
        h = try RouterHarness()
        ring("d-cancelled")
        waitForRinging()
        end("d-cancelled", "call_cancelled")
        XCTAssertTrue(h.waitForRecords(2))
        for i in 0..<3 { XCTAssertEqual(endedPushes(i, .cancelled, callID: "d-cancelled"), 1, "device \(i)") }
        XCTAssertEqual(h.record("d-cancelled")?.ended, .cancelled)
        XCTAssertEqual(endRecord(.callCancelled)?.told, Self.ids)
    }

    func testOneVoipTokenGoneThatDeviceAloneGetsTheAlertFallback() throws {
        h = try RouterHarness()
        h.sim.simulator.setScenario(.unregistered, for: Self.voip[1])
        ring("d-gone", deadlineInMs: 1_500)
        XCTAssertTrue(h.waitForRecords(1), "recorded once the deadline passed")
        let alerts = h.requests(Self.alert[1])
        XCTAssertEqual(alerts.count, 1, "the gone device alone gets the missed-call alert")
        XCTAssertEqual(alerts.first?.header("apns-push-type"), "alert")
        XCTAssertEqual(alerts.first?.header("apns-collapse-id"), "d-gone", "a repeat would replace it")
        XCTAssertEqual(h.requests(Self.alert[0]).count + h.requests(Self.alert[2]).count, 0, "the ringing devices get nothing")
        let call = try XCTUnwrap(h.record("d-gone"))
        XCTAssertEqual(call.devices?.map(\.outcome), [.deliveredVoip, .deliveredAlert, .deliveredVoip])
        XCTAssertEqual(call.devices?[1].cause, .voipTokenInvalid)
        XCTAssertNil(call.ended, "it rang out")
        XCTAssertEqual(h.entries(h.keys("acme").feedback).compactMap { $0.fields["token"] }, [Self.voip[1]])
    }

    /// A device APNs refuses for the app's key (403 InvalidProviderToken: a human must fix it)
    /// while the others ring: one result for the call (`delivered_voip`, that device
    /// `dead_lettered`), and that device's dead letter in the app's dead stream, naming it,
    /// with its reason and its own attempts.
    func testOneDeviceDeadLetteredLeavesADeadLetterNamingItWhileTheCallHasOneResult() throws {
        h = try RouterHarness()
        h.sim.simulator.setScenario(.invalidProviderToken, for: Self.voip[1])
        ring("d-dead", deadlineInMs: 1_500)
        XCTAssertTrue(h.waitForRecords(1), "recorded once the deadline passed")
        h.runFor(300)
        XCTAssertEqual(h.results().map { $0["id"] as? String }, ["d-dead"], "one result per event")
        let call = try XCTUnwrap(h.record("d-dead"))
        XCTAssertEqual(call.outcome, .deliveredVoip)
        XCTAssertEqual(call.devices?.map(\.outcome), [.deliveredVoip, .deadLettered, .deliveredVoip])
        XCTAssertEqual(call.devices?[1].reason, "apns_credentials: InvalidProviderToken")
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.count, 1, "the device's dead letter: \(dead.map(\.fields))")
        let letter = try XCTUnwrap(dead.first?.fields)
        XCTAssertEqual(letter["device"], Self.ids[1])
        XCTAssertEqual(letter["reason"], "apns_credentials: InvalidProviderToken")
        let history = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data((letter["attempts"] ?? "").utf8)) as? [String: Any])
        let attempts = try XCTUnwrap(history["attempts"] as? [[String: Any]])
        XCTAssertEqual(attempts.map { $0["device"] as? String }, [Self.ids[1]], "the device's own attempts only")
        XCTAssertEqual(attempts.map { $0["status"] as? Int }, [403])
        for token in Self.voip { XCTAssertEqual(h.requests(token).count, 1, "one VoIP push per device") }
        for token in Self.alert { XCTAssertEqual(h.requests(token).count, 0, "no alert: two rang, one needs a human") }
    }

    /// The replay of one device's dead letter (as the CLI and the console replay it) rings that
    /// device alone: past the call's deadline its missed-call alert, and nothing to the two
    /// devices that rang.
    func testTheReplayOfADevicesDeadLetterReachesThatDeviceAlone() throws {
        h = try RouterHarness()
        h.sim.simulator.setScenario(.invalidProviderToken, for: Self.voip[1])
        ring("d-replayed", deadlineInMs: 1_000)
        XCTAssertTrue(h.waitForRecords(1), "recorded once the deadline passed")
        let dead = h.entries(h.keys("acme").dead)
        XCTAssertEqual(dead.map { $0.fields["device"] }, [Self.ids[1]])
        let connection = RedisConnection(loop: h.loop, config: try h.access.config.connection(clientName: "pushgw-dead"))
        connection.start()
        defer { connection.close() }
        let operations = DeadLetterOperations(loop: h.loop, store: DeadLetterStore(topology: .single(connection), prefix: "pushgw"),
                                              policies: ["acme": .default], ringTimeoutsMs: ["acme": 30_000])
        var summary: DeadLetterOperations.ReplaySummary?
        operations.replayPaced(dead.map { DeadLetterReference(app: "acme", id: $0.id) },
                               pacer: ReplayPacer(rate: .fastest, startMs: Clock.monotonicMs()), onStep: { _, _ in },
                               completion: { summary = $0 })
        h.runUntil("the replay done", timeoutMs: 10_000) { summary != nil }
        XCTAssertEqual(summary?.replayed.count, 1)
        XCTAssertTrue(h.waitForRecords(2), "the replay recorded")
        h.runFor(300)
        let replayed = try XCTUnwrap(h.recorded.last?.record)
        XCTAssertEqual(replayed.devices?.map(\.id), [Self.ids[1]], "the replay's result lists the device it rang")
        XCTAssertEqual(replayed.outcome, .deliveredAlert)
        XCTAssertEqual(h.requests(Self.alert[1]).count, 1, "the replayed device's missed-call alert, past the deadline")
        for i in [0, 2] {
            XCTAssertEqual(h.requests(Self.voip[i]).count, 1, "device \(i) rang once, in the call, not again")
            XCTAssertEqual(h.requests(Self.alert[i]).count, 0, "device \(i) rang: no missed call to tell it of")
        }
        XCTAssertEqual(h.requests(Self.voip[1]).count, 1, "no VoIP push past the deadline")
    }

    func testADevicesKnownInvalidVoipTokenIsSkippedStraightToItsAlert() throws {
        h = try RouterHarness()
        h.sim.simulator.setScenario(.unregistered, for: Self.voip[2])
        h.call("before", voip: Self.voip[2])
        XCTAssertTrue(h.waitForRecords(1), "APNs declares the token gone")
        ring("d-known", deadlineInMs: 1_500)
        XCTAssertTrue(h.waitForRecords(2))
        XCTAssertEqual(h.requests(Self.voip[2]).count, 1, "a known-invalid token gets no second VoIP push")
        XCTAssertEqual(h.requests(Self.alert[2]).count, 1)
        XCTAssertEqual(h.record("d-known")?.devices?[2].cause, .voipTokenInvalid)
    }

    func testUnansweredEveryDeviceGetsOneCollapsedAlertAfterTheDeadline() throws {
        h = try RouterHarness(missedCallAlert: .unanswered)
        let start = Clock.unixMs()
        ring("d-missed", deadlineInMs: 1_200)
        XCTAssertTrue(h.waitForRecords(1))
        for i in 0..<3 {
            let alerts = h.requests(Self.alert[i])
            XCTAssertEqual(alerts.count, 1, "one missed-call alert for device \(i)")
            XCTAssertEqual(alerts.first?.header("apns-push-type"), "alert")
            XCTAssertEqual(alerts.first?.header("apns-collapse-id"), "d-missed")
            XCTAssertGreaterThanOrEqual(alerts.first?.timeMs ?? 0, start + 1_200, "after the deadline, not before")
        }
        XCTAssertEqual(h.record("d-missed")?.devices?.map(\.outcome), [.deliveredVoip, .deliveredVoip, .deliveredVoip])
    }

    func testAnAnswerWhileADevicesVoipPushIsRetriedAfterA429StopsItWithNoFurtherPush() throws {
        h = try RouterHarness(voipRetry: RetryPolicy(maxAttempts: 50, baseMs: 300, capMs: 600))
        h.sim.simulator.setScenario(.tooMany, for: Self.voip[0])
        ring("d-throttled")
        waitForRinging([1, 2])
        XCTAssertTrue(h.runUntil("device 0's first 429") { self.h.requests(Self.voip[0]).contains { $0.status == 429 } })
        end("d-throttled", "call_answered", device: 2)
        XCTAssertTrue(h.waitForRecords(2))
        let pushed = h.requests(Self.voip[0]).count
        h.runFor(800)
        XCTAssertEqual(h.requests(Self.voip[0]).count, pushed, "no further push to the retried device")
        XCTAssertEqual(h.requests(Self.alert[0]).count, 0, "it never rang: nothing to end, no alert")
        XCTAssertEqual(endedPushes(1, .answeredElsewhere, callID: "d-throttled"), 1)
        XCTAssertEqual(h.record("d-throttled")?.devices?[0].outcome, .cancelled)
        XCTAssertEqual(endRecord(.callAnswered)?.stopped, [Self.ids[0]])
    }

    func testADrainRecordsARingingCallInsteadOfLeavingItToBeRungAgain() throws {
        h = try RouterHarness()
        ring("d-drain")
        waitForRinging()
        var drained = false
        h.runner.drain(timeoutMs: 10_000) { drained = true }
        XCTAssertTrue(h.runUntil("the drain") { drained })
        XCTAssertEqual(h.record("d-drain")?.outcome, .deliveredVoip, "recorded, so no other gateway rings it again")
        XCTAssertEqual(h.command("XPENDING", h.keys("acme").calls, "pushgw")?.array?.first?.integer, 0, "nothing left pending")
    }

    func testARingLongerThanAClaimLastsKeepsItsClaim() throws {
        h = try RouterHarness(settings: { $0.inFlightClaimMs = 1_200 })
        ring("d-long", deadlineInMs: 4_000)
        waitForRinging()
        h.runFor(2_500)
        XCTAssertEqual(h.command("GET", h.keys("acme").result("d-long"))?.string, "in_flight:" + h.consumer,
                       "renewed while it rings: a resend finds it routed here")
        XCTAssertTrue(h.waitForRecords(1), "recorded at its deadline")
        XCTAssertEqual(h.record("d-long")?.outcome, .deliveredVoip)
    }

    func testASingleDeviceCallsResultIsTheSameBytesAsBeforeDevices() throws {
        h = try RouterHarness()
        h.call("single", voip: "a0a0", alert: "b0b0")
        XCTAssertTrue(h.waitForRecords(1))
        let stored = try XCTUnwrap(h.command("GET", h.keys("acme").result("single"))?.string)
        for key in ["devices", "ended", "\"device\"", "\"kind\""] { XCTAssertFalse(stored.contains(key), stored) }
    }
}
