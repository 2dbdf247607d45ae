import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayTestSupport
import CallStorage
import RedisClient
import Retry
import Routing
import TestSupport
import XCTest
@testable import GatewayRoles

/// Failure modes of the router against real parts: where sandbox pushes go, Redis pausing
/// while a call is in flight, and the capped results and feedback streams. APNs connections
/// lost with pushes in flight or refusing streams, as counted in the metrics, are in
/// `RouterFailureMetricsTests`.
final class FailureModeTests: XCTestCase {
    private var h: RouterHarness?

    override func tearDown() {
        h?.close()
        h = nil
    }

    // MARK: Sandbox

    func testEachPushGoesToTheEnvironmentItsAppOrEventNames() throws {
        let h = try RouterHarness(separateSandbox: true)
        self.h = h
        let sandbox = try XCTUnwrap(h.sandboxSim)
        // acme is a production app, sandy a sandbox app; an event's `sandbox` overrides either.
        let cases: [(id: String, app: String, sandbox: Bool?, token: String, toSandbox: Bool)] = [
            ("prod-app", "acme", nil, "a0a00001", false),
            ("prod-app-sandbox-event", "acme", true, "a0a00002", true),
            ("sandbox-app", "sandy", nil, "a0a00003", true),
            ("sandbox-app-production-event", "sandy", false, "a0a00004", false),
        ]
        for c in cases {
            h.call(c.id, voip: c.token, app: c.app, extra: c.sandbox.map { ["sandbox": $0] } ?? [:])
        }
        XCTAssertTrue(h.waitForRecords(cases.count))
        for c in cases {
            XCTAssertEqual(h.record(c.id)?.outcome, .deliveredVoip, c.id)
            let production = h.requests(c.token).count
            let sandboxed = sandbox.recorded.filter { $0.token == c.token }.count
            XCTAssertEqual([production, sandboxed], c.toSandbox ? [0, 1] : [1, 0],
                           "\(c.id): pushed to \(c.toSandbox ? "the sandbox" : "production") only")
        }
    }

    // MARK: Redis

    /// Redis stops taking writes while a call's push is out (`CLIENT PAUSE … WRITE`, as during
    /// a failover): the outcome cannot be recorded and the connection's watchdog gives up on the
    /// script, so it may or may not have run. The call holds its outcome, its record is written
    /// again until Redis takes it, and it is never routed again: one push, one result.
    func testAnOutcomeRedisCouldNotTakeIsHeldAndRecordedOnceRedisTakesWritesNotPushedAgain() throws {
        try checkHeldOutcome(refuse: { h in _ = try h.redis.cli(["CLIENT", "PAUSE", "60000", "WRITE"]) },
                             restore: { h in _ = try h.redis.cli(["CLIENT", "UNPAUSE"]) },
                             waitForTheFailure: { h in h.runner.stats.redisErrors >= 1 })
    }

    /// Redis at `maxmemory` under `noeviction` refuses every write with `-OOM` while a call's
    /// push is out, as often as the record is tried: the outcome is held (the entry is not
    /// claimed back and routed again, its delivery count untouched), and recorded once memory
    /// is back.
    func testAnOutcomeRefusedForOutOfMemoryIsHeldAndRecordedWhenMemoryComesBack() throws {
        try checkHeldOutcome(refuse: { h in _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "1"]) },
                             restore: { h in _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "0"]) },
                             waitForTheFailure: { h in h.runner.stats.redisErrors >= 3 })
    }

    /// `min-replicas-to-write` without a replica: every write is refused with `-NOREPLICAS`
    /// (the reads and the claims of the sweeps too).
    func testAnOutcomeRefusedForWantOfReplicasIsHeldAndRecordedWhenWritesComeBack() throws {
        try checkHeldOutcome(refuse: { h in _ = try h.redis.cli(["CONFIG", "SET", "min-replicas-to-write", "1"]) },
                             restore: { h in _ = try h.redis.cli(["CONFIG", "SET", "min-replicas-to-write", "0"]) },
                             waitForTheFailure: { h in h.runner.stats.redisErrors >= 3 })
    }

    /// Redis at `maxmemory` while calls arrive (written by a script allowed to, as an `XADD`
    /// that got in just before): the router reads them (`XREADGROUP` is served), every lookup
    /// is refused, and every 100 ms this live process claims its own entries back and tries
    /// again. That is Redis trouble, not poison: the delivery count stays 1, and once memory is
    /// back each call is routed and delivered, none dead-lettered for `redelivery_limit`.
    func testLookupsRefusedForOutOfMemoryDoNotMakeCallsPoison() throws {
        let h = try RouterHarness(settings: { $0.claimEveryMs = 100; $0.redeliveryLimit = 3 },
                                  storeConnection: { $0.backoff = ReconnectBackoff(baseMs: 20, capMs: 100) })
        self.h = h
        defer { _ = try? h.redis.cli(["CONFIG", "SET", "maxmemory", "0"]) }
        XCTAssertTrue(h.runUntil("the router to register") { h.runner.registered })
        _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "1"])
        let stream = h.keys("acme").calls
        for i in 0..<3 {
            let event = #"{"v":1,"id":"oom-\#(i)","type":"incoming_call","voip_token":"0ee0000\#(i)"}"#
            XCTAssertNotNil(h.command("EVAL", "#!lua flags=allow-oom\nreturn redis.call('XADD', KEYS[1], '*', 'event', ARGV[1])",
                                      "1", stream, event))
        }
        XCTAssertTrue(h.runUntil("lookups to be refused again and again") { h.runner.stats.redisErrors >= 10 })
        XCTAssertTrue(h.recorded.isEmpty)
        _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "0"])
        XCTAssertTrue(h.waitForRecords(3, timeoutMs: 5_000))
        for i in 0..<3 {
            XCTAssertEqual(h.record("oom-\(i)")?.outcome, .deliveredVoip, "oom-\(i): \(h.record("oom-\(i)")?.reason ?? "")")
            XCTAssertEqual(h.requests("0ee0000\(i)").count, 1)
        }
        XCTAssertEqual(h.runner.stats.poison, 0, "no entry counted as poison")
        XCTAssertTrue(h.entries(h.keys("acme").dead).isEmpty, "no dead letter")
    }

    /// While Redis refuses writes no heartbeat lands, so every lease lapses, the live ones too:
    /// a process that took a lapsed consumer's entries then (`XCLAIM` is served at `maxmemory`)
    /// would route again what a live process holds. So nothing is taken over while writes are
    /// refused, nor until a lease and a beat after they came back; a consumer that really died
    /// meanwhile is taken over then.
    func testNoEntryIsTakenOverWhileRedisRefusesWritesAndEveryLeaseLapses() throws {
        let h = try RouterHarness(settings: { $0.claimEveryMs = 100; $0.claimMinIdleMs = 0; $0.heartbeatEveryMs = 200; $0.heartbeatTTLMs = 600 })
        self.h = h
        defer { _ = try? h.redis.cli(["CONFIG", "SET", "maxmemory", "0"]) }
        XCTAssertTrue(h.runUntil("the router to register") { h.runner.registered })
        let stream = h.keys("acme").calls
        // The router makes its group on its reading connection, which may come up after the
        // lease is taken: make it here (BUSYGROUP when it is there already, which is fine).
        h.producer.send(["XGROUP", "CREATE", stream, "pushgw", "0", "MKSTREAM"]) { _ in }
        // Another gateway, `peer`, beats and reads a call (in one script, before this router's
        // read can); then Redis refuses writes.
        let event = #"{"v":1,"id":"peers","type":"incoming_call","voip_token":"9ee90001"}"#
        XCTAssertNotNil(h.command("EVAL", """
            redis.call('ZADD', KEYS[2], ARGV[2], 'peer')
            redis.call('XADD', KEYS[1], '*', 'event', ARGV[1])
            return redis.call('XREADGROUP', 'GROUP', 'pushgw', 'peer', 'COUNT', '1', 'STREAMS', KEYS[1], '>')
            """, "2", stream, "pushgw:consumers", event, String(Clock.unixMs() + 600)))
        _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "1"])
        h.runFor(2_000)  // the peer's lease and this router's lapse; claims run every 100 ms
        let owner = { () -> String in
            (try? h.redis.cli(["XPENDING", stream, "pushgw", "-", "+", "1"]))?.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
        }
        XCTAssertEqual(owner(), "peer", "nothing taken over while writes are refused")
        _ = try h.redis.cli(["CONFIG", "SET", "maxmemory", "0"])
        let back = Clock.monotonicMs()
        XCTAssertTrue(h.waitForRecords(1, timeoutMs: 5_000), "the dead peer's call is taken over once leases are trusted again")
        XCTAssertGreaterThanOrEqual(Clock.monotonicMs() - back, 700, "not before a lease and a beat after the refusals ended")
        XCTAssertEqual(h.record("peers")?.outcome, .deliveredVoip)
        XCTAssertEqual(h.requests("9ee90001").count, 1)
    }

    /// One call whose push is out when `refuse` makes Redis refuse its record: it must stay in
    /// the process holding its outcome (sweeps at 100 ms would claim an entry left pending and
    /// push it again), then be recorded once, within seconds of `restore`, having been pushed once.
    private func checkHeldOutcome(refuse: (RouterHarness) throws -> Void, restore: (RouterHarness) throws -> Void,
                                  waitForTheFailure: (RouterHarness) -> Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let h = try RouterHarness(simulator: { $0.scenarios = ["5a0e0001": .slow(300)] },
                                  settings: { $0.claimEveryMs = 100; $0.fullClaimSweepEveryMs = 100; $0.ownEntriesIdleMs = 500;
                                              $0.claimMinIdleMs = 0 },
                                  storeConnection: { $0.watchdogMs = 300; $0.backoff = ReconnectBackoff(baseMs: 20, capMs: 100) })
        self.h = h
        defer { _ = try? restore(h) }
        let stream = h.keys("acme").calls
        h.call("held", voip: "5a0e0001")
        XCTAssertTrue(h.runUntil("the push to reach APNs") { h.sim.simulator.requestCount(for: "5a0e0001") == 1 },
                      file: file, line: line)
        try refuse(h)
        XCTAssertTrue(h.runUntil("the record to fail") { waitForTheFailure(h) }, file: file, line: line)
        h.runFor(1_500)  // fifteen sweeps of its own pending entries, two of its idle ones
        XCTAssertEqual(h.runner.inFlight, 1, "the call stays, holding its outcome", file: file, line: line)
        XCTAssertTrue(h.recorded.isEmpty, "no outcome recorded while Redis takes no writes", file: file, line: line)
        XCTAssertEqual(h.requests("5a0e0001").count, 1, "not pushed again while its record waits", file: file, line: line)
        XCTAssertEqual(try h.redis.cli(["XLEN", stream]).trimmingCharacters(in: .whitespacesAndNewlines), "1",
                       "the entry is still in the stream", file: file, line: line)
        try restore(h)
        XCTAssertTrue(h.waitForRecords(1, timeoutMs: 5_000), file: file, line: line)
        XCTAssertEqual(h.record("held")?.outcome, .deliveredVoip, file: file, line: line)
        XCTAssertEqual(h.requests("5a0e0001").count, 1, "pushed once", file: file, line: line)
        XCTAssertEqual(h.runner.stats.claimed, 0, "never claimed back: it never left", file: file, line: line)
        XCTAssertEqual(h.entries(h.keys("acme").results).count, 1, "one result", file: file, line: line)
        XCTAssertTrue(h.runUntil("the entry to be acknowledged and deleted") { h.entries(stream).isEmpty }, file: file, line: line)
    }

    // MARK: Stream caps

    /// The results and feedback streams are capped per app (`MAXLEN ~`, 100,000 by default):
    /// a small cap here, and streams of 10-entry nodes, so that the cap is reached with few calls.
    func testResultsAndFeedbackStreamsAreCapped() throws {
        XCTAssertEqual(CallStore.Config().resultsMaxLen, 100_000)
        XCTAssertEqual(CallStore.Config().feedbackMaxLen, 100_000)
        let h = try RouterHarness(simulator: { $0.defaultScenario = .unregistered },
                                  store: { $0.resultsMaxLen = 10; $0.feedbackMaxLen = 10 })
        self.h = h
        _ = try h.redis.cli(["CONFIG", "SET", "stream-node-max-entries", "10"])
        // Each call: VoIP 410 (a feedback entry), alert 410 (another), undeliverable (a result).
        let calls = 40
        for i in 0..<calls { h.call("capped-\(i)", voip: String(format: "aa%06x", i), alert: String(format: "bb%06x", i)) }
        XCTAssertTrue(h.waitForRecords(calls))
        XCTAssertEqual(Set(h.recorded.map(\.record.outcome)), [.undeliverable])
        let results = h.entries(h.keys("acme").results), feedback = h.entries(h.keys("acme").feedback)
        XCTAssertTrue((10..<20).contains(results.count), "\(calls) results capped near 10: \(results.count)")
        XCTAssertTrue((10..<20).contains(feedback.count), "\(2 * calls) feedback entries capped near 10: \(feedback.count)")
        let newest = try XCTUnwrap(h.recorded.last?.record.id)
        XCTAssertTrue(results.last?.fields["result"]?.contains(#""id":"\#(newest)""#) == true, "the newest result is kept")
    }
}
