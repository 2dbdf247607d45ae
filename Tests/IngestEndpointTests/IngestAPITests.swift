import EventLoop
import Foundation
import GatewayTestSupport
import IngestEndpoint
import TestSupport
import XCTest

/// The producers' HTTP API over real HTTP on loopback, against a real redis-server and a live
/// router with the APNs simulator (docs/protocol.md, "The HTTP API").
final class IngestAPITests: XCTestCase {
    private var h: IngestHarness!

    override func tearDown() {
        h?.close()
        h = nil
    }

    func testACallIsAcceptedAndWaitReturnsItsResult() throws {
        h = try IngestHarness()
        let reply = try h.request("POST", "/v1/apps/acme/calls?wait=5s", key: h.keys["acme"], body: IngestHarness.call("c-wait"))
        XCTAssertEqual(reply.status, 200, reply.body)
        let body = IngestHarness.json(reply)
        XCTAssertEqual(body["status"] as? String, "done")
        let result = try XCTUnwrap(body["result"] as? [String: Any])
        XCTAssertEqual(result["outcome"] as? String, "delivered_voip")
        XCTAssertEqual(result["id"] as? String, "c-wait")
        XCTAssertEqual(result["entry"] as? String, body["entry"] as? String, "the result answers the entry the API added")
        XCTAssertEqual(h.router.requests("a0a0a0a0").count, 1, "one push")

        let read = try h.request("GET", "/v1/apps/acme/calls/c-wait", key: h.keys["acme"])
        XCTAssertEqual(read.status, 200, read.body)
        XCTAssertEqual((IngestHarness.json(read)["result"] as? [String: Any])?["outcome"] as? String, "delivered_voip")
    }

    /// As the gateway's least-privileged Redis user of docs/operations.md: the API's script and
    /// reads are ones it may run (the harness fails the test on any refusal, `ACL LOG`).
    func testTheGatewaysLeastPrivilegedUserMayDoWhatTheAPIDoes() throws {
        h = try IngestHarness(redis: .leastPrivilege)
        let call = try h.request("POST", "/v1/apps/acme/calls?wait=5s", key: h.keys["acme"], body: IngestHarness.call("c-acl"))
        XCTAssertEqual(call.status, 200, call.body)
        let again = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-acl"))
        XCTAssertEqual(again.status, 409, again.body)
        let cancel = try h.request("POST", "/v1/apps/acme/calls/c-acl/cancel?wait=5s", key: h.keys["acme"])
        XCTAssertEqual(cancel.status, 200, cancel.body)
        XCTAssertEqual(try h.request("GET", "/v1/apps/acme/calls/c-acl", key: h.keys["acme"]).status, 200)
    }

    func testWithoutWaitTheAnswerIs202WithTheEntryID() throws {
        h = try IngestHarness(startRouter: false)
        let reply = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-202"))
        XCTAssertEqual(reply.status, 202, reply.body)
        let body = IngestHarness.json(reply)
        XCTAssertEqual(body["status"] as? String, "accepted")
        let entry = try XCTUnwrap(body["entry"] as? String)
        let stored = h.router.entries(h.router.keys("acme").calls)
        XCTAssertEqual(stored.map(\.id), [entry], "the entry is in the calls stream")
        XCTAssertEqual(stored.first?.fields["event"], IngestHarness.call("c-202"), "the event as the producer sent it")
        let unknown = try h.request("GET", "/v1/apps/acme/calls/c-202", key: h.keys["acme"])
        XCTAssertEqual(unknown.status, 404, "no result yet: no gateway read it")
        XCTAssertEqual(IngestHarness.json(unknown)["error"] as? String, "unknown_call")
    }

    func testNoKeyAWrongKeyAndAnotherAppsKeyAreRefusedAndNothingIsWritten() throws {
        h = try IngestHarness(startRouter: false)
        let event = IngestHarness.call("c-auth")
        let none = try h.request("POST", "/v1/apps/acme/calls", body: event)
        XCTAssertEqual(none.status, 401, none.body)
        XCTAssertEqual(IngestHarness.json(none)["error"] as? String, "unauthenticated")
        XCTAssertNotNil(none.headers["www-authenticate"])
        let wrong = try h.request("POST", "/v1/apps/acme/calls", key: APIKeys.newKey(), body: event)
        XCTAssertEqual(wrong.status, 401, wrong.body)
        let other = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["beta"], body: event)
        XCTAssertEqual(other.status, 403, other.body)
        XCTAssertEqual(IngestHarness.json(other)["error"] as? String, "forbidden")
        let basic = try h.request("POST", "/v1/apps/acme/calls", body: event, headers: ["Authorization": "Basic " + h.keys["acme"]!])
        XCTAssertEqual(basic.status, 401, "only Bearer carries a key")
        let read = try h.request("GET", "/v1/apps/acme/calls/c-auth", key: h.keys["beta"])
        XCTAssertEqual(read.status, 403, "another app's key reads nothing either")
        XCTAssertEqual(h.callsLength("acme"), 0, "nothing was written")
        XCTAssertEqual(h.callsLength("beta"), 0)
        let right = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: event)
        XCTAssertEqual(right.status, 202, "the app's own key is taken")
        XCTAssertEqual(h.callsLength("acme"), 1)
    }

    func testWrongKeysFromOneAddressAreLimited() throws {
        h = try IngestHarness(startRouter: false)
        var statuses: [Int] = []
        for _ in 0..<6 {
            statuses.append(try h.request("POST", "/v1/apps/acme/calls", key: APIKeys.newKey(), body: IngestHarness.call("c-guess")).status)
        }
        XCTAssertEqual(Array(statuses.prefix(4)), [401, 401, 401, 401], "three free wrong keys, the fourth starts the wait")
        XCTAssertEqual(statuses.last, 429, "then the address's keys are not checked while it waits")
        let limited = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-guess"))
        XCTAssertEqual(limited.status, 429, "not even the right key is checked meanwhile (no oracle)")
        XCTAssertEqual(IngestHarness.json(limited)["error"] as? String, "too_many_wrong_keys")
        XCTAssertNotNil(limited.headers["retry-after"])
        let elsewhere = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-guess"),
                                      from: "127.0.0.2")
        XCTAssertEqual(elsewhere.status, 202, "another address is not held back")
        XCTAssertEqual(h.callsLength(), 1)
    }

    func testADuplicateIDIs409NamingTheFirstOutcome() throws {
        h = try IngestHarness()
        let first = try h.request("POST", "/v1/apps/acme/calls?wait=5s", key: h.keys["acme"], body: IngestHarness.call("c-dup"))
        XCTAssertEqual(first.status, 200, first.body)
        let again = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-dup"))
        XCTAssertEqual(again.status, 409, again.body)
        let body = IngestHarness.json(again)
        XCTAssertEqual(body["error"] as? String, "duplicate")
        XCTAssertEqual(body["first_outcome"] as? String, "delivered_voip")
        XCTAssertEqual((body["result"] as? [String: Any])?["outcome"] as? String, "delivered_voip")
        h.router.runFor(200)
        XCTAssertEqual(h.router.requests("a0a0a0a0").count, 1, "the duplicate was not sent")
        XCTAssertEqual(h.callsLength(), 0, "nor written")
    }

    func testAnEventOverTheLimitIs413AndNothingIsWritten() throws {
        h = try IngestHarness(startRouter: false)
        let big = IngestHarness.call("c-big", extra: ["padding": String(repeating: "x", count: 70_000)])
        let reply = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: big)
        XCTAssertEqual(reply.status, 413, reply.body)
        let body = IngestHarness.json(reply)
        XCTAssertEqual(body["error"] as? String, "too_large")
        XCTAssertEqual(body["message"] as? String, "invalid_event: event: \(big.utf8.count) bytes, over the 65536-byte limit",
                       "the dead letter's reason text")
        let huge = IngestHarness.call("c-huge", extra: ["padding": String(repeating: "x", count: 300_000)])
        let refused = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: huge)
        XCTAssertEqual(refused.status, 413, "evhttp refuses a body far over the limit itself")
        XCTAssertEqual(h.callsLength(), 0)
    }

    func testAnInvalidEventIs400WithTheRoutersOwnReason() throws {
        h = try IngestHarness()
        let cases = [
            "{\"v\":1,\"id\":\"c-bad-1\",\"type\":\"incoming_call\",\"voip_token\":\"zz\"}",
            "{\"v\":1,\"id\":\"c-bad-2\",\"type\":\"ring99\",\"voip_token\":\"a0a0\"}",
            "{\"v\":1,\"id\":\"c-bad-3\",\"type\":\"incoming_call\"}",
            "{\"v\":1,\"id\":\"c-bad-4\",\"type\":\"incoming_call\",\"voip_token\":\"a0a0\",\"deadline\":1764412345}",
            "not json",
        ]
        for (i, text) in cases.enumerated() {
            let reply = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: text)
            XCTAssertEqual(reply.status, 400, reply.body)
            let body = IngestHarness.json(reply)
            XCTAssertEqual(body["error"] as? String, "invalid_event")
            XCTAssertNotNil(body["field"], "the field is named: \(reply.body)")
            // The same event written to Redis: the router's dead letter gives the same reason.
            h.router.xaddRaw("acme", text)
            XCTAssertTrue(h.router.waitForRecords(i + 1))
            XCTAssertEqual(body["message"] as? String, h.router.recorded.last?.record.reason,
                           "the API's reason is the dead letter's for \(text)")
        }
        XCTAssertEqual(h.router.results().count, cases.count, "only the events written by hand reached the router")
    }

    /// Keys rotate with a reload: a new key works from the next request on, a removed one is
    /// refused; a reload that would listen otherwise is refused and changes nothing.
    func testAReloadRotatesKeysAndOnlyKeys() throws {
        h = try IngestHarness(startRouter: false)
        let old = h.keys["acme"]!, new = APIKeys.newKey()
        var both = h.config
        both.apps["acme"]?.keyHashes.append(APIKeys.hash(new))
        XCTAssertTrue(h.endpoint.apply(both, apps: h.router.apps))
        XCTAssertEqual(try h.request("POST", "/v1/apps/acme/calls", key: old, body: IngestHarness.call("c-rot-1")).status, 202)
        XCTAssertEqual(try h.request("POST", "/v1/apps/acme/calls", key: new, body: IngestHarness.call("c-rot-2")).status, 202)
        var rotated = h.config
        rotated.apps["acme"]?.keyHashes = [APIKeys.hash(new)]
        XCTAssertTrue(h.endpoint.apply(rotated, apps: h.router.apps))
        XCTAssertEqual(try h.request("POST", "/v1/apps/acme/calls", key: old, body: IngestHarness.call("c-rot-3")).status, 401,
                       "the removed key is refused")
        XCTAssertEqual(try h.request("POST", "/v1/apps/acme/calls", key: new, body: IngestHarness.call("c-rot-3")).status, 202)
        var moved = rotated
        moved.listen = "127.0.0.1:1"
        moved.apps["acme"]?.keyHashes = [APIKeys.hash(old)]
        XCTAssertFalse(h.endpoint.apply(moved, apps: h.router.apps), "another listener takes a restart")
        XCTAssertEqual(try h.request("POST", "/v1/apps/acme/calls", key: old, body: IngestHarness.call("c-rot-4")).status, 401,
                       "and nothing of it was applied")
        XCTAssertEqual(h.callsLength(), 3)
    }

    func testAnIdempotencyKeyMustBeTheCallID() throws {
        h = try IngestHarness(startRouter: false)
        let other = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-idem"),
                                  headers: ["Idempotency-Key": "something-else"])
        XCTAssertEqual(other.status, 400, other.body)
        XCTAssertEqual(IngestHarness.json(other)["error"] as? String, "idempotency_key_mismatch")
        XCTAssertEqual(h.callsLength(), 0)
        let same = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-idem"),
                                 headers: ["Idempotency-Key": "c-idem"])
        XCTAssertEqual(same.status, 202, same.body)
    }

    func testAFloodFromOneAppIs429WhileAnotherAppsCallsAreAnswered() throws {
        h = try IngestHarness(rate: (perSecond: 1, burst: 3))
        var statuses: [Int] = []
        var retryAfter: [String] = []
        for i in 0..<20 {
            let reply = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-flood-\(i)"))
            statuses.append(reply.status)
            if reply.status == 429 {
                XCTAssertEqual(IngestHarness.json(reply)["error"] as? String, "rate_limited")
                retryAfter.append(reply.headers["retry-after"] ?? "")
            }
        }
        XCTAssertEqual(Array(statuses.prefix(3)), [202, 202, 202], "the burst is taken")
        XCTAssertGreaterThan(statuses.filter { $0 == 429 }.count, 0, "the flood is refused beyond the app's rate: \(statuses)")
        XCTAssertTrue(retryAfter.allSatisfy { (Int($0) ?? 0) >= 1 }, "with Retry-After in seconds: \(retryAfter)")
        let beta = try h.request("POST", "/v1/apps/beta/calls?wait=5s", key: h.keys["beta"], body: IngestHarness.call("c-beta", voip: "b0b0b0b0"))
        XCTAssertEqual(beta.status, 200, "another app's call is answered meanwhile: \(beta.body)")
        XCTAssertEqual((IngestHarness.json(beta)["result"] as? [String: Any])?["outcome"] as? String, "delivered_voip")
        print("request flood: 20 calls of one app at 1/s (burst 3) from one address: \(statuses.filter { $0 == 202 }.count) accepted, "
              + "\(statuses.filter { $0 == 429 }.count) refused 429 (Retry-After \(Set(retryAfter).sorted()) s); the other app's call answered 200")
        let accepted = statuses.filter { $0 == 202 }.count
        XCTAssertTrue(h.router.runUntil("the accepted acme calls to be recorded") {
            h.router.recorded.filter { $0.app == "acme" }.count == accepted
        }, "every accepted call is routed, no refused one")
    }

    /// A flood of 1,000 calls of one app from one address, sent from a thread of its own as fast
    /// as loopback takes them, while another app's producer sends calls that wait for their
    /// results: the flood is held to its app's rate, the other app's calls are all delivered.
    func testAThousandCallFloodOfOneAppLeavesAnotherAppsCallsDelivered() throws {
        h = try IngestHarness(rate: (perSecond: 100, burst: 100))
        final class Flood: @unchecked Sendable {
            let lock = NSLock()
            var statuses: [Int] = []
            var finished = false
        }
        let flood = Flood()
        let port = h.port, key = h.keys["acme"]!
        let started = Clock.monotonicMs()
        Thread.detachNewThread {
            for i in 0..<1_000 {
                let status = (try? LoopbackHTTP.blockingRequest("/v1/apps/acme/calls", method: "POST", port: port,
                                                                headers: ["Authorization": "Bearer " + key, "Content-Type": "application/json"],
                                                                body: IngestHarness.call("c-thousand-\(i)", voip: "d0d0d0d0")))?.status ?? 0
                flood.lock.lock(); flood.statuses.append(status); flood.lock.unlock()
            }
            flood.lock.lock(); flood.finished = true; flood.lock.unlock()
        }
        var beta: [(status: Int, ms: Int64)] = []
        for i in 0..<10 {
            let sent = Clock.monotonicMs()
            let reply = try h.request("POST", "/v1/apps/beta/calls?wait=5s", key: h.keys["beta"],
                                      body: IngestHarness.call("c-beta-\(i)", voip: "e0e0e0e\(i)"), from: "127.0.0.2")
            beta.append((reply.status, Clock.monotonicMs() - sent))
        }
        XCTAssertTrue(h.router.runUntil("the flood to end", timeoutMs: 120_000) { flood.lock.lock(); defer { flood.lock.unlock() }; return flood.finished })
        let seconds = Double(Clock.monotonicMs() - started) / 1000
        let statuses = flood.statuses
        let accepted = statuses.filter { $0 == 202 }.count, limited = statuses.filter { $0 == 429 }.count
        XCTAssertEqual(accepted + limited, 1_000, "every flood request answered 202 or 429: \(Set(statuses))")
        XCTAssertGreaterThan(limited, 0, "the flood is held to its app's rate")
        XCTAssertEqual(beta.map(\.status), Array(repeating: 200, count: 10), "the other app's calls are delivered meanwhile")
        XCTAssertTrue(h.router.runUntil("the accepted calls to be recorded", timeoutMs: 60_000) {
            h.router.recorded.filter { $0.app == "acme" }.count == accepted
        })
        print("flood: 1,000 calls of app acme (100/s, burst 100) from one address in \(String(format: "%.1f", seconds)) s: "
              + "\(accepted) accepted, \(limited) refused 429; app beta's 10 calls from another address all delivered, "
              + "answered in \(beta.map { String($0.ms) }.joined(separator: ", ")) ms (with their results)")
    }

    /// Idle connections from one address, reopened as they close, do not keep another
    /// address's producer out (the admin endpoint's admission, with the API's own caps).
    func testIdleConnectionsFromOneAddressLeaveAnotherProducersCallsAnswered() throws {
        h = try IngestHarness()
        let flood = ConnectionFlood(port: h.port, count: 300)
        defer { flood.stop() }
        h.router.runFor(500)
        var statuses: [Int] = []
        for i in 0..<5 {
            statuses.append(try h.request("POST", "/v1/apps/acme/calls?wait=5s", key: h.keys["acme"],
                                          body: IngestHarness.call("c-conn-\(i)", voip: "c0c0c0c\(i)"), from: "127.0.0.2").status)
        }
        XCTAssertEqual(statuses, [200, 200, 200, 200, 200], "each call answered with its result under the flood")
        print("connection flood: 300 idle connections from one address (\(flood.reopenedCount) reopened); "
              + "another address's 5 calls answered \(statuses)")
    }

    func testHeadersOverTheLimitAreRefusedAndNothingIsWritten() throws {
        h = try IngestHarness(startRouter: false)
        let reply = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-headers"),
                                  headers: ["X-Padding": String(repeating: "p", count: 10_000)])
        XCTAssertFalse((200..<300).contains(reply.status), "a header block over 8 KiB is refused: \(reply.status)")
        XCTAssertEqual(h.callsLength(), 0)
    }

    func testRedisRefusingWritesIs503AndNothingIsWritten() throws {
        h = try IngestHarness(startRouter: false)
        _ = try h.router.redis.cli(["CONFIG", "SET", "min-replicas-to-write", "1"])
        let refused = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-503"))
        let cancel = try h.request("POST", "/v1/apps/acme/calls/c-503/cancel", key: h.keys["acme"])
        _ = try h.router.redis.cli(["CONFIG", "SET", "min-replicas-to-write", "0"])
        XCTAssertEqual(refused.status, 503, refused.body)
        XCTAssertEqual(IngestHarness.json(refused)["error"] as? String, "redis_refuses_writes")
        XCTAssertNotNil(refused.headers["retry-after"])
        XCTAssertEqual(cancel.status, 503, cancel.body)
        XCTAssertEqual(h.callsLength(), 0)
        let later = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-503"))
        XCTAssertEqual(later.status, 202, "sent again with the same id once Redis takes writes")
    }

    func testACancelWritesACallCancelledEventAndItsResultIsRead() throws {
        h = try IngestHarness(startRouter: false)
        let call = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-cancel"))
        XCTAssertEqual(call.status, 202, call.body)
        let cancel = try h.request("POST", "/v1/apps/acme/calls/c-cancel/cancel", key: h.keys["acme"], headers: ["Idempotency-Key": "c-cancel"])
        XCTAssertEqual(cancel.status, 202, cancel.body)
        let events = h.router.entries(h.router.keys("acme").calls).compactMap { $0.fields["event"] }
        XCTAssertEqual(events.last, "{\"id\":\"c-cancel\",\"type\":\"call_cancelled\",\"v\":1}")
        h.router.runner.start()
        let waited = try h.request("POST", "/v1/apps/acme/calls/c-cancel/cancel?wait=5s", key: h.keys["acme"])
        // The first cancel's own result is there by now or soon: this one waits for it, or is its duplicate.
        XCTAssertTrue([200, 409].contains(waited.status), waited.body)
        XCTAssertTrue(h.router.runUntil("both results") { h.router.recorded.count >= 2 })
        let read = try h.request("GET", "/v1/apps/acme/calls/c-cancel?wait=5s", key: h.keys["acme"])
        XCTAssertEqual(read.status, 200, read.body)
        XCTAssertEqual((IngestHarness.json(read)["result"] as? [String: Any])?["outcome"] as? String, "cancelled")
        XCTAssertTrue(h.router.requests("a0a0a0a0").isEmpty, "the cancel came before the push: nothing rang")
    }

    /// `/ringing`, `/answer` and `/decline` write their events (docs/protocol.md, *Devices* and
    /// *Ring receipts*): a two-device call rings both, a receipt of one is its own result, the
    /// answer on the other ends the call (the first device told), a second answer is a 409.
    func testAnswerDeclineAndRingingWriteTheirEventsAndAnswerTheirOwnResults() throws {
        h = try IngestHarness()
        let devices = [["id": "bob-iphone", "voip_token": "a1a1a1a1", "alert_token": "c1c1c1c1"],
                       ["id": "bob-ipad", "voip_token": "b2b2b2b2", "alert_token": "d2d2d2d2"]]
        let call = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"],
                                 body: IngestHarness.call("c-dev", voip: nil, extra: ["devices": devices]))
        XCTAssertEqual(call.status, 202, call.body)
        XCTAssertTrue(h.router.runUntil("both devices' VoIP pushes accepted") {
            ["a1a1a1a1", "b2b2b2b2"].allSatisfy { self.h.router.requests($0).contains { $0.status == 200 } }
        })
        let ringing = try h.request("POST", "/v1/apps/acme/calls/c-dev/ringing?wait=5s", key: h.keys["acme"],
                                    body: #"{"device":"bob-iphone"}"#)
        XCTAssertEqual(ringing.status, 200, ringing.body)
        XCTAssertEqual(IngestHarness.json(ringing)["id"] as? String, "c-dev", "the answer names the call, not its receipt's key")
        XCTAssertEqual((IngestHarness.json(ringing)["result"] as? [String: Any])?["outcome"] as? String, "ringing")
        let stored = try XCTUnwrap(h.router.command("GET", h.router.keys("acme").ringResult("c-dev", device: "bob-iphone"))?.string)
        XCTAssertTrue(stored.contains(#""type":"call_ringing""#), "the receipt's own result, keyed by call and device: \(stored)")

        let answer = try h.request("POST", "/v1/apps/acme/calls/c-dev/answer?wait=5s", key: h.keys["acme"],
                                   body: #"{"device":"bob-ipad"}"#, headers: ["Idempotency-Key": "c-dev"])
        XCTAssertEqual(answer.status, 200, answer.body)
        let answered = try XCTUnwrap(IngestHarness.json(answer)["result"] as? [String: Any])
        XCTAssertEqual(answered["outcome"] as? String, "answered")
        XCTAssertEqual(answered["told"] as? [String], ["bob-iphone"], "the other device is told the call was answered")
        let result = try h.request("GET", "/v1/apps/acme/calls/c-dev?wait=5s", key: h.keys["acme"])
        XCTAssertEqual((IngestHarness.json(result)["result"] as? [String: Any])?["outcome"] as? String, "delivered_voip")
        let again = try h.request("POST", "/v1/apps/acme/calls/c-dev/answer", key: h.keys["acme"], body: #"{"device":"bob-iphone"}"#)
        XCTAssertEqual(again.status, 409, again.body)
        XCTAssertEqual(IngestHarness.json(again)["first_outcome"] as? String, "answered")
        XCTAssertEqual(h.router.requests("a1a1a1a1").filter { $0.header("apns-push-type") == "voip" }.count, 1, "one VoIP push per device")
        XCTAssertEqual(h.router.requests("b2b2b2b2").count, 1)

        let other = try h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"],
                                  body: IngestHarness.call("c-decl", voip: nil, extra: ["devices": devices]))
        XCTAssertEqual(other.status, 202, other.body)
        XCTAssertTrue(h.router.runUntil("the second call rings") { self.h.router.requests("a1a1a1a1").count >= 2 })
        let decline = try h.request("POST", "/v1/apps/acme/calls/c-decl/decline?wait=5s", key: h.keys["acme"],
                                    body: #"{"device":"bob-iphone"}"#)
        XCTAssertEqual(decline.status, 200, decline.body)
        XCTAssertEqual((IngestHarness.json(decline)["result"] as? [String: Any])?["outcome"] as? String, "declined")
    }

    /// A call-in-progress request's body is empty or `{"device":…}`: anything else is a 400
    /// naming the field, and nothing is written.
    func testCallInProgressBodiesAreCheckedAndNothingIsWritten() throws {
        h = try IngestHarness(startRouter: false)
        let refused: [(String, String, String)] = [
            ("answer", "", "device"),
            ("decline", "{}", "device"),
            ("answer", #"{"device":"bob","voip_token":"a0"}"#, "voip_token"),
            ("cancel", #"{"device":"bob"}"#, "device"),
            ("ringing", "[1]", "body"),
            ("answer", #"{"device":""}"#, "device"),
            ("answer", #"{"device":7}"#, "device"),
            ("ringing", "{", "body"),
        ]
        for (kind, body, field) in refused {
            let reply = try h.request("POST", "/v1/apps/acme/calls/c-r/\(kind)", key: h.keys["acme"], body: body)
            XCTAssertEqual(reply.status, 400, "\(kind) \(body): \(reply.body)")
            XCTAssertEqual(IngestHarness.json(reply)["error"] as? String, "invalid_event", body)
            XCTAssertEqual(IngestHarness.json(reply)["field"] as? String, field, "\(kind) \(body): \(reply.body)")
        }
        let unknown = try h.request("POST", "/v1/apps/acme/calls/c-r/hold", key: h.keys["acme"])
        XCTAssertEqual(unknown.status, 404)
        XCTAssertEqual(IngestHarness.json(unknown)["error"] as? String, "not_found")
        let other = try h.request("GET", "/v1/other", key: h.keys["acme"])
        XCTAssertEqual(other.status, 404)
        let method = try h.request("DELETE", "/v1/apps/acme/calls", key: h.keys["acme"])
        XCTAssertEqual(method.status, 405)
        XCTAssertEqual(method.headers["allow"], "POST")
        XCTAssertEqual(h.callsLength(), 0)
        let receipt = try h.request("POST", "/v1/apps/acme/calls/c-r/ringing", key: h.keys["acme"])
        XCTAssertEqual(receipt.status, 202, "a single-device call's receipt has no device: \(receipt.body)")
        XCTAssertEqual(h.router.entries(h.router.keys("acme").calls).last?.fields["event"],
                       #"{"id":"c-r","type":"call_ringing","v":1}"#)
    }

    /// With `tls_client_ca_file`: a client without a certificate of that CA is refused in the
    /// handshake, whatever its key; with one, its key is checked as always.
    func testMutualTLSRequiresAClientCertificate() throws {
        h = try IngestHarness(startRouter: false, tls: true, clientCertificates: true)
        func curl(_ extra: [String]) throws -> ChildProcess {
            let child = try ChildProcess("/usr/bin/curl", ["-sS", "--cacert", h.router.sim.pki.caCert, "-o", "-", "-w", "\n%{http_code}",
                                                           "-H", "Authorization: Bearer \(h.keys["acme"]!)", "-H", "Content-Type: application/json",
                                                           "--data-binary", IngestHarness.call("c-mtls")] + extra
                                                          + ["https://localhost:\(h.port)/v1/apps/acme/calls"])
            XCTAssertTrue(h.router.runUntil("curl to end", timeoutMs: 20_000) { !child.isRunning })
            return child
        }
        let without = try curl([])
        XCTAssertNotEqual(without.exitStatus, 0, "no client certificate: no TLS session: \(without.output)")
        XCTAssertEqual(h.callsLength(), 0)
        let with = try curl(["--cert", h.router.sim.pki.clientCert, "--key", h.router.sim.pki.clientKey])
        XCTAssertEqual(with.exitStatus, 0, with.errorOutput)
        XCTAssertTrue(with.output.hasSuffix("\n202"), with.output)
        XCTAssertEqual(h.callsLength(), 1)
    }

    func testTheAPIOverTLS() throws {
        h = try IngestHarness(tls: true)
        let curl = try ChildProcess("/usr/bin/curl", ["-sS", "--cacert", h.router.sim.pki.caCert, "-o", "-", "-w", "\n%{http_code}",
                                                      "-H", "Authorization: Bearer \(h.keys["acme"]!)", "-H", "Content-Type: application/json",
                                                      "--data-binary", IngestHarness.call("c-tls"),
                                                      "https://localhost:\(h.port)/v1/apps/acme/calls?wait=5s"])
        XCTAssertTrue(h.router.runUntil("curl to end", timeoutMs: 20_000) { !curl.isRunning })
        XCTAssertEqual(curl.exitStatus, 0, curl.errorOutput)
        XCTAssertTrue(curl.output.hasSuffix("\n200"), curl.output)
        XCTAssertTrue(curl.output.contains("\"outcome\":\"delivered_voip\""), curl.output)
        let plain = try? h.request("POST", "/v1/apps/acme/calls", key: h.keys["acme"], body: IngestHarness.call("c-plain"))
        XCTAssertNotEqual(plain?.status, 202, "plain HTTP is not served on a TLS listener")
    }
}
