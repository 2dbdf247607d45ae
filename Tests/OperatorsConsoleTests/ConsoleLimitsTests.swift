import Foundation
import XCTest
@testable import OperatorsConsole

/// The overview shows each app's `limits` and where it stands against them (docs/operations.md,
/// *Limits*): in flight of its cap, its event rate, the seconds its events waited for the rate;
/// in process (`OperatorsConsole.handle`, as the admin endpoint calls it), over a real
/// redis-server, through the console's one renderer.
final class ConsoleLimitsTests: ConsoleTestCase {
    static let hostileApp = "rated<b>&\"app"

    override func setUpWithError() throws {
        var rated = ConsoleFigures.App(id: ConsoleLimitsTests.hostileApp, bundleID: "com.example.rated", environment: "production")
        rated.limits = .init(maxInFlight: 200, maxInFlightSet: true, eventsPerSecond: 20, burst: 40, inFlight: 7, throttledSeconds: 12.54)
        var free = ConsoleFigures.App(id: "free", bundleID: "com.example.free", environment: "production")
        free.limits = .init(maxInFlight: 1_000, maxInFlightSet: false, inFlight: 0)
        let other = ConsoleFigures.App(id: "elsewhere", bundleID: "com.example.other", environment: "production")
        try startConsole(policies: [ConsoleLimitsTests.hostileApp: .default, "free": .default, "elsewhere": .default],
                         figures: { ConsoleFigures(apps: [rated, free, other], redisReachable: true) })
    }

    /// The text of each `limit` entry of the app's card, in order.
    private func limits(_ page: String, app: String) -> [String] {
        let escaped = app.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        guard let card = page.range(of: "data-app=\"\(escaped)\"") else { return [] }
        let rest = String(page[card.upperBound...])
        let section = rest.components(separatedBy: "</section>").first ?? ""
        return match(#"<div class="limit [a-z-]+"><dt>[^<]*</dt><dd>([^<]*)</dd></div>"#, section)
    }

    func testEachAppsLimitsInFlightAndWaitForItsRateAreShownEscaped() {
        let page = body(request("GET", "/console/overview"))
        XCTAssertEqual(limits(page, app: ConsoleLimitsTests.hostileApp), ["7 of 200 (max_in_flight)", "20/s, burst 40", "12.5 s"])
        XCTAssertEqual(limits(page, app: "free"), ["0 of 1000 (default cap)", "no limit", "–"])
        XCTAssertEqual(limits(page, app: "elsewhere"), [], "a process that does not route has no limits to show")
        XCTAssertFalse(page.contains("rated<b>"), "the app's name is escaped where its limits are shown")
        XCTAssertTrue(page.contains("rated&lt;b&gt;&amp;&quot;app"))
    }
}
