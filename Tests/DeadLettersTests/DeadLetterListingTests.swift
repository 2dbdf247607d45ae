import XCTest
import EventLoop
import CallStorage
import RedisClient
import TestSupport
@testable import DeadLetters

/// `DeadLetterOperations.listing`, the console's bounded pages, against a real redis-server:
/// paging across apps visits every matching dead letter exactly once, newest first, whatever
/// the page and scan sizes, and a filter that matches few entries still moves on.
final class DeadLetterListingTests: DeadLetterOperationsTestCase {
    override func setUpWithError() throws {
        try startOperations(policies: ["acme": .default, "beta": .default, "zeta": .default], ringTimeoutsMs: [:])
    }

    private func send(_ args: [String]) {
        var done = false
        connection.send(args) { _ in done = true }
        loop.run(waitingFor: "redis to answer \(args[0])") { done }
    }

    /// Dead letters with explicit ids: several apps share milliseconds (and sequence numbers),
    /// the hard case for a cursor across apps.
    private func fill() -> [String] {
        var refs: [String] = []
        for ms in 1_000...1_039 {
            for (i, app) in ["acme", "beta", "zeta"].enumerated() where (ms + i) % 3 != 0 || ms % 5 == 0 {
                for seq in 0..<(ms % 4 == 0 ? 2 : 1) {
                    let id = "\(ms)-\(seq)"
                    let reason = ms % 7 == 0 ? "invalid_event: id" : "apns_credentials: BadTopic"
                    send(["XADD", "pushgw:{\(app)}:dead", id, "event", #"{"id":"c-\#(app)-\#(id)"}"#, "reason", reason, "app", app])
                    refs.append("\(app)/\(id)")
                }
            }
        }
        return refs
    }

    private func pages(filter: DeadLetterFilter, limit: Int, scanLimit: Int) -> (refs: [String], pages: Int) {
        var seen: [String] = []
        var cursor: DeadLetterReference?
        var count = 0
        repeat {
            var result: Result<DeadLetterOperations.Listing, RedisError>?
            operations.listing(apps: ["acme", "beta", "zeta"], filter: filter, before: cursor, limit: limit, scanLimit: scanLimit) { result = $0 }
            loop.run(waitingFor: "a page of the listing") { result != nil }
            guard case let .success(page)? = result else {
                XCTFail("listing failed: \(String(describing: result))")
                return (seen, count)
            }
            XCTAssertLessThanOrEqual(page.records.count, limit)
            XCTAssertLessThanOrEqual(page.scanned, 3 * scanLimit, "a page reads at most scanLimit entries per app")
            seen += page.records.map { "\($0.app)/\($0.id)" }
            cursor = page.next
            count += 1
        } while cursor != nil && count < 1_000
        return (seen, count)
    }

    func testPagesVisitEveryDeadLetterOnceNewestFirst() {
        let all = fill()
        let expected = all.map { DeadLetterReference($0)! }
            .sorted { DeadLetterOperations.isNewer($0, than: $1) }.map(\.text)
        for (limit, scan) in [(7, 5), (50, 200), (3, 11), (1, 1), (10, 3)] {
            let (seen, count) = pages(filter: DeadLetterFilter(), limit: limit, scanLimit: scan)
            XCTAssertEqual(seen, expected, "pages of \(limit) reading \(scan) per app: every dead letter once, newest first")
            XCTAssertGreaterThan(count, expected.count / limit - 1)
        }
    }

    func testAFilterThatMatchesFewStillReachesTheEnd() {
        let all = fill()
        let wanted = all.filter { ref in
            let ms = Int(ref.split(separator: "/")[1].split(separator: "-")[0])!
            return ms % 7 == 0
        }.map { DeadLetterReference($0)! }.sorted { DeadLetterOperations.isNewer($0, than: $1) }.map(\.text)
        let (seen, _) = pages(filter: DeadLetterFilter(reason: "invalid_event"), limit: 4, scanLimit: 6)
        XCTAssertEqual(seen, wanted, "the reason filter, page by page")
        let old = pages(filter: DeadLetterFilter(beforeMs: 1_010), limit: 5, scanLimit: 4).refs
        XCTAssertEqual(old, all.filter { Int($0.split(separator: "/")[1].split(separator: "-")[0])! < 1_010 }
            .map { DeadLetterReference($0)! }.sorted { DeadLetterOperations.isNewer($0, than: $1) }.map(\.text),
                       "an older-than filter keeps its bound below every cursor")
    }
}
