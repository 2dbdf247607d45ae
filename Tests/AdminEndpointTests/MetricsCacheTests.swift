import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import GatewayTestSupport
import TestSupport
import XCTest
@testable import AdminEndpoint

/// `/metrics` renders at most once per interval and serves that text in between, so a scrape
/// flood costs the loop one rendering per interval (docs/operations.md, "The endpoint").
final class MetricsCacheTests: XCTestCase {
    func testTheRenderingIsReusedWithinItsAgeAndRenewedAfter() {
        var cache = RenderCache(maxAgeMs: 1_000)
        var renders = 0
        func render() -> String { renders += 1; return "rendering \(renders)" }
        XCTAssertEqual(cache.text(nowMs: 5_000, render: render), "rendering 1")
        XCTAssertEqual(cache.text(nowMs: 5_999, render: render), "rendering 1", "within the age: the same text, not rendered again")
        XCTAssertEqual(renders, 1)
        XCTAssertEqual(cache.text(nowMs: 6_000, render: render), "rendering 2", "at the age: rendered anew")
        var uncached = RenderCache(maxAgeMs: 0)
        _ = uncached.text(nowMs: 1, render: render)
        XCTAssertEqual(uncached.text(nowMs: 1, render: render), "rendering 4", "age 0 renders every time")
    }

    func testTwoScrapesWithinTheIntervalGetTheSameTextThoughACallFinishedBetween() throws {
        let router = try RouterHarness()
        var settings = GatewayAdmin.Settings()
        settings.metricsMaxAgeMs = 60_000
        let admin = GatewayAdmin(loop: router.loop, config: AdminConfig(listen: "127.0.0.1:\(freeLoopbackPort())"),
                                 apps: router.apps, store: router.store, pools: router.pools, runner: router.runner,
                                 log: Log(minimum: .error) { _ in }, settings: settings)
        router.outcomes.next = admin
        admin.start()
        defer { admin.close(); router.close() }
        let port = try XCTUnwrap(admin.port)
        let first = try LoopbackHTTP.request("GET", "/metrics", port: port, loop: router.loop)
        router.call("between", voip: "a0a0")
        XCTAssertTrue(router.waitForRecords(1))
        let second = try LoopbackHTTP.request("GET", "/metrics", port: port, loop: router.loop)
        XCTAssertEqual(second.body, first.body, "the second scrape within the interval got the first rendering")
        XCTAssertFalse(first.body.contains(#"outcome="delivered_voip"} 1"#), "which predates the call")
    }
}
