import AdminEndpoint
import EventLoop
import Routing
import XCTest
@testable import IngestEndpoint

/// The HTTP API's pure rules: its paths, `?wait`, the API keys and the rate's bucket.
final class IngestRulesTests: XCTestCase {
    func testPaths() {
        XCTAssertEqual(IngestRoutes.route("/v1/apps/acme/calls"), .submit(app: "acme"))
        XCTAssertEqual(IngestRoutes.route("/v1/apps/acme/calls/c-1"), .read(app: "acme", id: "c-1"))
        XCTAssertEqual(IngestRoutes.route("/v1/apps/acme/calls/c%3A1%20x"), .read(app: "acme", id: "c:1 x"), "the id percent-decoded")
        XCTAssertEqual(IngestRoutes.route("/v1/apps/acme/calls/c-1/cancel"), .progress(app: "acme", id: "c-1", kind: .callCancelled))
        XCTAssertEqual(IngestRoutes.route("/v1/apps/acme/calls/c-1/answer"), .progress(app: "acme", id: "c-1", kind: .callAnswered))
        for path in ["/", "/v1", "/v1/apps//calls", "/v1/apps/acme/calls/", "/v1/apps/acme/calls/c-1/hangup", "/v2/apps/acme/calls",
                     "/v1/apps/acme/calls/c-1/cancel/more", "v1/apps/acme/calls", "/v1/apps/acme/calls/%zz"] {
            XCTAssertNil(IngestRoutes.route(path), path)
        }
    }

    func testWaitTimes() {
        /// The wait in ms; -1 when refused.
        func ms(_ text: String) -> Int64? {
            switch IngestRoutes.waitMs([("wait", text)]) {
            case let .success(ms): return ms
            case .failure: return -1
            }
        }
        XCTAssertEqual(ms("5s"), 5_000)
        XCTAssertEqual(ms("500ms"), 500)
        XCTAssertEqual(ms("7"), 7_000, "plain seconds")
        XCTAssertEqual(ms("30s"), 30_000)
        if case let .success(none) = IngestRoutes.waitMs([]) { XCTAssertNil(none, "no wait") } else { XCTFail("no wait is no problem") }
        for bad in ["31s", "1m", "-1", "", "s", "1.5s", "９s", "99999999"] {
            XCTAssertEqual(ms(bad), -1, bad)
        }
    }

    func testKeysProveTheirAppOnly() {
        let acme = "pgw_acme-key", acme2 = "pgw_acme-rotated", beta = "pgw_beta-key"
        let keys = APIKeys(keyHashes: ["acme": [APIKeys.hash(acme), APIKeys.hash(acme2).uppercased()], "beta": [APIKeys.hash(beta)]])
        XCTAssertEqual(keys.check(authorization: "Bearer " + acme), .app("acme"))
        XCTAssertEqual(keys.check(authorization: "bearer  " + acme2), .app("acme"), "either key of the app; scheme in any case")
        XCTAssertEqual(keys.check(authorization: "Bearer " + beta), .app("beta"))
        XCTAssertEqual(keys.check(authorization: "Bearer " + acme + "x"), .wrong)
        XCTAssertEqual(keys.check(authorization: "Bearer " + APIKeys.hash(acme)), .wrong, "the hash is not the key")
        XCTAssertEqual(keys.check(authorization: "Basic " + acme), .none)
        XCTAssertEqual(keys.check(authorization: "Bearer "), .none)
        XCTAssertEqual(keys.check(authorization: nil), .none)
        XCTAssertNotEqual(APIKeys.newKey(), APIKeys.newKey())
    }

    func testTheBucketRefusesBeyondItsRateAndRefills() {
        var bucket = TokenBucket(perSecond: 10, burst: 2)
        XCTAssertNil(bucket.take(nowMs: 0))
        XCTAssertNil(bucket.take(nowMs: 0))
        XCTAssertEqual(bucket.take(nowMs: 0), 100, "empty: one token in 100 ms")
        XCTAssertEqual(bucket.take(nowMs: 50), 50, "a refused request takes nothing")
        XCTAssertNil(bucket.take(nowMs: 100))
        XCTAssertNil(bucket.take(nowMs: 10_000))
        XCTAssertNil(bucket.take(nowMs: 10_000), "refilled to its burst, no more")
        XCTAssertNotNil(bucket.take(nowMs: 10_000))
        var rates = AppRequestRate(buckets: ["acme": TokenBucket(perSecond: 1, burst: 1)])
        XCTAssertNil(rates.take("acme", nowMs: 0))
        XCTAssertNotNil(rates.take("acme", nowMs: 0))
        XCTAssertNil(rates.take("beta", nowMs: 0), "another app draws on its own bucket")
    }
}
