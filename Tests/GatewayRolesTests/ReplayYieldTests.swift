import CallStorage
import DeadLetters
import EventLoop
import Foundation
import GatewayTestSupport
import RedisClient
import Routing
import XCTest

/// A replay storm yields to live calls (docs/architecture.md, "Scheduling"), over a real
/// redis-server, the router and the simulator: 5,000 dead letters replayed at the fastest rate
/// an operator may ask (10,000/s) while live calls come at 20/s, of another app or of the same
/// one. The replay writes only while the app's calls stream holds fewer than a read's worth of
/// unread entries, and its pushes wait in the APNs queue's background lane, so the live calls'
/// p99 stays within 2× of their p99 alone (or 10 ms above it: of 40 calls the p99 is the slowest,
/// and one stall of the shared cores is a few ms; a live call queued behind the replay's pushes
/// waits for thousands of them). Every replayed call rings once, none twice (counted per token at
/// the simulator).
final class ReplayYieldTests: XCTestCase {
    private let deadLetters = 5_000

    func testAReplayOfFiveThousandDeadLettersLeavesAnotherAppsLiveCallsTheirLatency() throws {
        try replayDuringLiveCalls(liveApp: "beta")
    }

    func testAReplayOfFiveThousandDeadLettersLeavesTheSameAppsLiveCallsTheirLatency() throws {
        try replayDuringLiveCalls(liveApp: "acme")
    }

    private func replayDuringLiveCalls(liveApp: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let h = try RouterHarness(simulator: { $0.recordLimit = 50_000 })
        defer { h.close() }
        // Acme's dead letters, as the router writes them (a refused credential, since fixed).
        XCTAssertNotNil(h.command(["EVAL", """
            for i = 0, tonumber(ARGV[1]) - 1 do
              redis.call('XADD', KEYS[1], '*', 'event', '{"v":1,"id":"dead-' .. i .. '","type":"incoming_call","voip_token":"da' .. string.format('%04x', i) .. '","deadline":' .. ARGV[2] .. ',"voip":{"caller":"+15551234567"}}',
                'reason', 'apns_credentials: InvalidProviderToken', 'attempts', '[]', 'replays', '0', 'app', 'acme')
            end
            return 1
            """, "1", h.keys("acme").dead, String(deadLetters), String(Clock.unixMs() + 600_000)]))
        let targets = h.entries(h.keys("acme").dead).map { DeadLetterReference(app: "acme", id: $0.id) }
        XCTAssertEqual(targets.count, deadLetters)

        let alone = liveLatencies(h, app: liveApp, "alone", count: 40, tokens: "e1")
        let connection = RedisConnection(loop: h.loop, config: try h.access.config.connection(clientName: "pushgw-dead"))
        connection.start()
        defer { connection.close() }
        let operations = DeadLetterOperations(loop: h.loop, store: DeadLetterStore(topology: .single(connection), prefix: "pushgw"),
                                              policies: ["acme": .default], ringTimeoutsMs: ["acme": 30_000])
        var summary: DeadLetterOperations.ReplaySummary?
        var replayed = 0
        operations.replayPaced(targets, pacer: ReplayPacer(rate: .fastest, startMs: Clock.monotonicMs()), onStep: { _, step in
            if case .replayed = step { replayed += 1 }
        }, completion: { summary = $0 })
        h.runUntil("the replay under way", timeoutMs: 10_000) { replayed >= 200 }
        let during = liveLatencies(h, app: liveApp, "during", count: 40, tokens: "e2")
        let replayedMeanwhile = replayed
        print("\(liveApp)'s live calls at 20/s: p99 alone \(p99(alone)) ms, during acme's replay \(p99(during)) ms "
              + "(\(replayedMeanwhile) of \(deadLetters) replayed by then)")
        XCTAssertLessThan(replayedMeanwhile, deadLetters, "the live calls were measured while the replay ran", file: file, line: line)
        XCTAssertLessThanOrEqual(p99(during), max(2 * p99(alone), p99(alone) + 10),
                                 "p99 during the replay \(p99(during)) ms, alone \(p99(alone)) ms", file: file, line: line)

        h.runUntil("the replay done", timeoutMs: 120_000) { summary != nil }
        XCTAssertNil(summary?.failure, file: file, line: line)
        XCTAssertEqual(summary?.replayed.count, deadLetters, file: file, line: line)
        print("the replay yielded \(summary?.yields ?? 0) times")
        h.runUntil("every replayed call recorded", timeoutMs: 120_000) {
            h.recorded.filter { $0.record.id?.hasPrefix("dead-") == true }.count >= deadLetters
        }
        let pushes = Dictionary(grouping: h.sim.simulator.recorded, by: \.token).mapValues(\.count)
        var twice = 0, never = 0
        for i in 0..<deadLetters {
            switch pushes[String(format: "da%04x", i)] ?? 0 {
            case 1: break
            case 0: never += 1
            default: twice += 1
            }
        }
        XCTAssertEqual(never, 0, "every replayed call rang", file: file, line: line)
        XCTAssertEqual(twice, 0, "no replayed call rang twice", file: file, line: line)
        let outcomes = Set(h.recorded.filter { $0.record.id?.hasPrefix("dead-") == true }.map(\.record.outcome))
        XCTAssertEqual(outcomes, [.deliveredVoip], file: file, line: line)
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 0, "no dead letter left", file: file, line: line)
    }

    /// Live calls of `app` at 20/s at most: from each XADD to its recorded outcome, ms, sorted.
    private func liveLatencies(_ h: RouterHarness, app: String, _ prefix: String, count: Int, tokens: String) -> [Double] {
        var out: [Double] = []
        for i in 0..<count {
            let id = "\(prefix)-\(i)"
            var scanned = h.recorded.count, found = false
            let t0 = Clock.monotonicUs()
            h.call(id, voip: String(format: "\(tokens)%04x", i), app: app)
            h.runUntil("\(app)'s call \(id) recorded") {
                let all = h.recorded
                while scanned < all.count {
                    if all[scanned].record.id == id { found = true }
                    scanned += 1
                }
                return found
            }
            let ms = Double(Clock.monotonicUs() - t0) / 1000
            out.append(ms)
            h.runFor(max(1, 50 - Int64(ms)))
        }
        return out.sorted()
    }

    private func p99(_ sorted: [Double]) -> Double { nearestRankP99(sorted) }
}
