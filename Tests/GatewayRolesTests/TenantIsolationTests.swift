import APNs
import APNsSimulator
import GatewayConfiguration
import EventLoop
import Foundation
import GatewayTestSupport
@testable import GatewayRoles
import RedisClient
import Routing
import XCTest

/// One tenant cannot slow another (docs/architecture.md, "Scheduling"), over a real
/// redis-server and the simulator: apps `acme` and `beta` share one credential and its one
/// APNs connection.
final class TenantIsolationTests: XCTestCase {
    /// Beta's calls one at a time: from each XADD to its recorded outcome, ms, sorted.
    private func quietLatencies(_ h: RouterHarness, _ prefix: String, count: Int, tokens: String = "bb") -> [Double] {
        var out: [Double] = []
        for i in 0..<count {
            let before = h.recorded.filter { $0.app == "beta" }.count
            let t0 = Clock.monotonicUs()
            h.call("\(prefix)-\(i)", voip: String(format: "\(tokens)%04x", i), app: "beta")
            h.runUntil("beta's call \(i) recorded") { h.recorded.filter { $0.app == "beta" }.count > before }
            out.append(Double(Clock.monotonicUs() - t0) / 1000)
            h.runFor(10)
        }
        return out.sorted()
    }

    private func p99(_ sorted: [Double]) -> Double { nearestRankP99(sorted) }

    /// 40 streams; acme floods 300 calls whose pushes are answered after 400 ms. Beta's p99
    /// (100 calls) during the flood stays within 2× of beta alone (or 10 ms above it, the noise
    /// of a few-ms p99 on shared cores; CI once saw it beyond 5): acme holds at most ¾ of the
    /// streams, and beta's pushes take turns. A push of beta's that waited for acme's streams
    /// would wait 400 ms.
    func testAFloodOfSlowlyAnsweredPushesOfOneAppLeavesAnotherAppsP99WithinTwiceItsOwn() throws {
        var slow: [String: Scenario] = [:]
        for i in 0..<300 { slow[String(format: "aa%04x", i)] = .slow(400) }
        let h = try RouterHarness(simulator: {
            $0.raisedMaxStreams = 40
            $0.scenarios = slow
        })
        defer { h.close() }
        let alone = quietLatencies(h, "alone", count: 100)
        for i in 0..<300 { h.call("flood-\(i)", voip: String(format: "aa%04x", i), deadlineInMs: 60_000) }
        h.runUntil("acme's flood holding the streams", timeoutMs: 10_000) {
            (try? h.pools.client(credential: "good", environment: .production).inFlightCount) ?? 0 >= 25
        }
        let during = quietLatencies(h, "during", count: 100)
        let acmeLeft = 300 - h.recorded.filter { $0.app == "acme" }.count
        print("beta p99 alone \(p99(alone)) ms, during acme's flood \(p99(during)) ms (acme calls not yet recorded: \(acmeLeft))")
        XCTAssertGreaterThan(acmeLeft, 0, "beta was measured while acme's flood was still being pushed")
        XCTAssertLessThanOrEqual(p99(during), max(2 * p99(alone), p99(alone) + 10),
                                 "beta's p99 during acme's flood \(p99(during)) ms, alone \(p99(alone)) ms")
        h.waitForRecords(500, timeoutMs: 30_000)
        XCTAssertEqual(Set(h.recorded.map(\.record.outcome)), [.deliveredVoip], "every call of both apps delivered")
    }

    /// Acme (credential `good`) floods 3,000 calls whose every push APNs answers 429
    /// TooManyRequests; beta is on credential `second`, its own pool. Beta's p99 (80 calls)
    /// during the flood stays within 3× of beta alone (or 15 ms above it): a credential's 429s
    /// slow only its own apps. Rings per token: each of acme's tokens got exactly the attempts its dead
    /// letter lists (its VoIP retries, none beyond), each of beta's one push.
    func testOneCredentialsTooManyRequestsLeaveAnotherCredentialsAppItsLatency() throws {
        let flood = 3_000
        var throttled: [String: Scenario] = [:]
        for i in 0..<flood { throttled[String(format: "ca%04x", i)] = .tooMany }
        let h = try RouterHarness(simulator: {
            $0.scenarios = throttled
            $0.recordLimit = 30_000
        }, betaOnItsOwnCredential: true)
        defer { h.close() }
        let alone = quietLatencies(h, "alone", count: 80, tokens: "b1")
        XCTAssertNotNil(h.command(["EVAL", """
            for i = 0, \(flood - 1) do
              redis.call('XADD', KEYS[1], '*', 'event', '{"v":1,"id":"throttled-' .. i .. '","type":"incoming_call","voip_token":"ca' .. string.format('%04x', i) .. '","deadline":' .. ARGV[1] .. ',"voip":{"caller":"+15551234567"}}')
            end
            return 1
            """, "1", h.keys("acme").calls, String(Clock.unixMs() + 60_000)]))
        h.runUntil("acme's pushes answered 429", timeoutMs: 10_000) { h.sim.simulator.stats.requests >= 80 + 200 }
        let during = quietLatencies(h, "during", count: 80, tokens: "b2")
        let acmeLeft = flood - h.recorded.filter { $0.app == "acme" }.count
        print("beta (own credential) p50/p99 alone \(alone[alone.count / 2])/\(p99(alone)) ms, during acme's 429s "
              + "\(during[during.count / 2])/\(p99(during)) ms (acme calls not yet recorded: \(acmeLeft))")
        XCTAssertGreaterThan(acmeLeft, 0, "beta was measured while acme's calls were still being throttled")
        // Generous: here the simulator and the router share one loop, so acme's 12,000 answered
        // pushes take CPU from beta's calls (18 ms against 7.5 ms alone, once, under load; 35.6
        // against 8.5 with other builds on the 2 cores). What the bound catches is a credential's
        // 429s reaching another credential's pushes: with beta on acme's credential its p99 was
        // 567 ms, ten times the bound's slack.
        XCTAssertLessThanOrEqual(p99(during), max(3 * p99(alone), p99(alone) + 50),
                                 "beta's p99 during acme's 429s \(p99(during)) ms, alone \(p99(alone)) ms")
        h.runUntil("every call recorded", timeoutMs: 120_000) { h.recorded.count >= flood + 160 }
        for i in 0..<80 {
            for tokens in ["b1", "b2"] {
                XCTAssertEqual(h.requests(String(format: "\(tokens)%04x", i)).count, 1, "beta's \(tokens) call \(i) pushed once")
            }
        }
        XCTAssertEqual(Set(h.recorded.filter { $0.app == "beta" }.map(\.record.outcome)), [.deliveredVoip])
        var pushes = 0
        for i in 0..<flood {
            guard let r = h.record("throttled-\(i)") else { XCTFail("throttled-\(i) has no result"); continue }
            let token = String(format: "ca%04x", i)
            XCTAssertEqual(r.outcome, .deadLettered, token)
            XCTAssertEqual(h.requests(token).count, r.attempts.count, "\(token): pushed as often as its attempts say, no more")
            XCTAssertTrue(r.attempts.allSatisfy { $0.status == 429 }, token)
            pushes += r.attempts.count
        }
        XCTAssertEqual(pushes, flood * 4, "each of acme's calls tried its 4 VoIP attempts")
    }

    /// A cancel written while its app has 10,000 entries ahead of it in its stream takes effect:
    /// its call, read with it, never rings.
    func testACancelTakesEffectWhileItsAppHasATenThousandEntryBacklog() throws {
        let h = try RouterHarness(startRouter: false)
        defer { h.close() }
        var args = ["EVAL", """
            for i = 1, 10000 do
              redis.call('XADD', KEYS[1], '*', 'event', '{"v":1,"id":"backlog-' .. i .. '","type":"incoming_call","voip_token":"cc' .. string.format('%04x', i) .. '","voip":{"caller":"+15551234567"}}')
            end
            return 1
            """, "1", h.keys("acme").calls]
        XCTAssertNotNil(h.command(args))
        args = []
        h.call("cancelled-call", voip: "dd01", deadlineInMs: 60_000)
        h.xadd("acme", ["v": 1, "id": "cancelled-call", "type": "call_cancelled"])
        h.runner.start()
        h.runUntil("the backlog and the cancelled call recorded", timeoutMs: 120_000) {
            h.recorded.contains { $0.record.id == "cancelled-call" && $0.record.outcome == .cancelled }
        }
        XCTAssertTrue(h.requests("dd01").isEmpty, "the cancelled call never rang")
    }

    /// Acme has 2,000 calls in its stream (answers 50 ms late, 40 streams) when beta's one
    /// call comes: beta's push reaches APNs before most of acme's backlog. How many of acme's
    /// pushes went ahead is printed; at most two reads' worth (2 × 100) may.
    func testAQuietAppsCallIsPushedBeforeAFloodedAppsBacklogAheadOfIt() throws {
        let h = try RouterHarness(simulator: {
            $0.raisedMaxStreams = 40
            $0.defaultScenario = .slow(50)
        })
        defer { h.close() }
        XCTAssertNotNil(h.command(["EVAL", """
            for i = 1, 2000 do
              redis.call('XADD', KEYS[1], '*', 'event', '{"v":1,"id":"backlog-' .. i .. '","type":"incoming_call","voip_token":"ce' .. string.format('%04x', i) .. '","voip":{"caller":"+15551234567"}}')
            end
            return 1
            """, "1", h.keys("acme").calls]))
        h.runUntil("acme's backlog being pushed", timeoutMs: 10_000) { h.sim.simulator.stats.requests >= 1 }
        h.call("quiet", voip: "bd01", app: "beta")
        h.runUntil("beta's call pushed", timeoutMs: 30_000) { !h.requests("bd01").isEmpty }
        let ahead = h.sim.simulator.stats.requests - 1
        print("acme pushes at APNs before beta's call: \(ahead) of its 2000")
        XCTAssertLessThanOrEqual(ahead, 200, "beta's call waited for \(ahead) of acme's 2000")
        h.runUntil("every call recorded", timeoutMs: 60_000) { h.recorded.count >= 2001 }
    }
}
