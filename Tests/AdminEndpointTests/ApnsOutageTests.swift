import Foundation
import XCTest
@testable import APNs
@testable import AdminEndpoint

/// A pool that cannot reach APNs shows in `/readyz` (one problem per pool) and in its metrics
/// (docs/operations.md); the fault suite (`FaultTests`) shows the log lines and the recovery.
final class ApnsOutageTests: XCTestCase {
    func testReadinessNamesEachPoolThatCannotConnect() throws {
        let pools = [Readiness.UnreachablePool(credential: "k", environment: "sandbox", forMs: 3_400, reason: nil),
                     Readiness.UnreachablePool(credential: "k", environment: "production", forMs: 12_345,
                                               reason: "connection refused")]
        let r = Readiness.evaluate(nowMs: 10_000, lastPingOkMs: 9_500, maxPingAgeMs: 5_000, lastPingError: nil,
                                   draining: false, unreachablePools: pools)
        XCTAssertFalse(r.isReady, "not ready while a pool cannot connect")
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.json().utf8)) as? [String: Any])
        let problems = try XCTUnwrap(json["problems"] as? [[String: String]])
        XCTAssertEqual(problems, [
            ["check": "apns", "credential": "k", "environment": "production",
             "detail": "cannot connect to APNs for 12 s (last error: connection refused)"],
            ["check": "apns", "credential": "k", "environment": "sandbox", "detail": "cannot connect to APNs for 3 s"],
        ])
        let anonymous = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.json(detailed: false).utf8)) as? [String: Any])
        XCTAssertEqual(anonymous["problems"] as? [[String: String]], [
            ["check": "apns", "credential": "k", "environment": "production"],
            ["check": "apns", "credential": "k", "environment": "sandbox"],
        ], "an anonymous probe learns which pool, not the error")
    }

    func testAnUnreachablePoolIsDownInTheMetricsWithHowLong() {
        let m = GatewayMetrics()
        var s = GatewaySnapshot()
        var down = GatewaySnapshot.Pool(credential: "k", environment: "production", stats: ApnsClientStats(), inFlight: 0,
                                        queued: 3, connectionsByState: [:])
        down.unreachableForMs = 12_500
        let up = GatewaySnapshot.Pool(credential: "k", environment: "sandbox", stats: ApnsClientStats(), inFlight: 0,
                                      queued: 0, connectionsByState: [:])
        s.pools = [down, up]
        m.update(s)
        let lines = Set(m.render().split(separator: "\n").map(String.init))
        for line in [#"pushgw_apns_up{credential="k",environment="production"} 0"#,
                     #"pushgw_apns_unreachable_seconds{credential="k",environment="production"} 12.5"#,
                     #"pushgw_apns_up{credential="k",environment="sandbox"} 1"#,
                     #"pushgw_apns_unreachable_seconds{credential="k",environment="sandbox"} 0"#] {
            XCTAssertTrue(lines.contains(line), "missing \(line)")
        }
    }
}
