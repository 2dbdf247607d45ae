import APNs
import EventLoop
import Foundation
import TestSupport
import XCTest
@testable import AdminEndpoint

/// APNs connections lost with pushes in flight or refusing streams, against real parts: the
/// router retries or resends, and `/metrics` counts each (docs/operations.md).
final class RouterFailureMetricsTests: XCTestCase {
    private var admin: AdminHarness?

    override func tearDown() {
        admin?.close()
        admin = nil
    }

    func testPushesLostWithTheirConnectionAreCountedAndRetried() throws {
        let admin = try AdminHarness(simulator: { $0.scenarios = ["b1ac0001": .blackhole, "d20b0001": .dropConnection] })
        self.admin = admin
        let h = admin.router
        // A first 200 raises the connection's stream limit from 1, so two pushes can be out.
        h.call("warm-up", voip: "a0a00001")
        XCTAssertTrue(h.waitForRecords(1))
        h.call("held", voip: "b1ac0001", alert: "a1e70001")
        XCTAssertTrue(h.runUntil("the held push to reach APNs") { h.sim.simulator.requestCount(for: "b1ac0001") == 1 })
        h.call("dropping", voip: "d20b0001", alert: "a1e70002")
        XCTAssertTrue(h.runUntil("the connection to be dropped") { h.sim.simulator.stats.droppedConnections == 1 })
        // APNs recovers: both calls are retried and delivered by VoIP.
        h.sim.simulator.setScenario(.ok, for: "b1ac0001")
        h.sim.simulator.setScenario(.ok, for: "d20b0001")
        XCTAssertTrue(h.waitForRecords(3))
        for id in ["held", "dropping"] {
            let r = try XCTUnwrap(h.record(id))
            XCTAssertEqual(r.outcome, .deliveredVoip, id)
            XCTAssertEqual(r.attempts.map(\.status), [nil, 200], "\(id): lost, then delivered on a new connection")
            XCTAssertTrue(r.attempts.first?.error?.contains("connection") == true, "\(id): \(r.attempts)")
        }
        let metrics = try admin.get("/metrics").body.split(separator: "\n")
        for line in [#"pushgw_apns_lost_total{credential="good",environment="production"} 2"#,
                     #"pushgw_apns_failures_total{app="acme",channel="voip",error="connection_lost"} 2"#,
                     #"pushgw_apns_connections_opened_total{credential="good",environment="production"} 2"#,
                     "pushgw_retries_scheduled_total 2"] {
            XCTAssertTrue(metrics.contains(Substring(line)), "missing: \(line)\n\(metrics.joined(separator: "\n"))")
        }
    }

    func testARefusedStreamIsResentWithoutBeingAnAttempt() throws {
        let admin = try AdminHarness(simulator: { $0.scenarios = ["4ef00001": .refusedStream(1)] })
        self.admin = admin
        let h = admin.router
        h.call("refused-once", voip: "4ef00001")
        XCTAssertTrue(h.waitForRecords(1))
        XCTAssertEqual(h.sim.simulator.stats.refusedStreams, 1)
        let r = try XCTUnwrap(h.record("refused-once"))
        XCTAssertEqual(r.outcome, .deliveredVoip)
        XCTAssertEqual(r.attempts.map(\.status), [200], "APNs never processed the refused stream: not an attempt")
        XCTAssertEqual(h.runner.stats.retriesScheduled, 0)
        let metrics = try admin.get("/metrics").body.split(separator: "\n")
        for line in [#"pushgw_apns_resends_total{credential="good",environment="production",why="unprocessed"} 1"#,
                     #"pushgw_apns_lost_total{credential="good",environment="production"} 0"#] {
            XCTAssertTrue(metrics.contains(Substring(line)), "missing: \(line)\n\(metrics.joined(separator: "\n"))")
        }
    }
}
