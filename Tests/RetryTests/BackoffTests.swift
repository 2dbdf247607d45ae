import Retry
import XCTest

/// The pure backoff of `RetryPolicy` and the `Jitter` stream, as tables.
final class BackoffTests: XCTestCase {
    func testCeilingDoublesFromBaseUpToTheCap() {
        let policy = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000)
        let table: [(retry: Int, ceiling: Int64)] = [(0, 100), (1, 200), (2, 400), (3, 800), (4, 1_600), (5, 2_000),
                                                     (6, 2_000), (62, 2_000), (1_000, 2_000), (-1, 100)]
        for row in table {
            XCTAssertEqual(policy.ceilingMs(forRetry: row.retry), row.ceiling, "ceiling of retry \(row.retry)")
        }
        let huge = RetryPolicy(maxAttempts: 4, baseMs: Int.max / 2, capMs: Int.max)
        XCTAssertEqual(huge.ceilingMs(forRetry: 3), Int64(Int.max), "an overflowing base · 2^n is capped, not wrapped")
    }

    func testFullJitterTableWithDeterministicDraws() {
        let policy = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000)
        let table: [(retry: Int, random: Double, delay: Int64, throttled: Int64)] = [
            (0, 0.5, 50, 1_500),
            (3, 0.5, 400, 1_500),
            (9, 0.999, 1_998, 1_999),
            (0, 0, 0, 1_000),
            (2, 1.5, 400, 2_000),   // draws are clamped to [0, 1]
            (2, -1, 0, 1_000),
        ]
        for row in table {
            XCTAssertEqual(policy.delayMs(forRetry: row.retry, random: row.random), row.delay,
                           "retry \(row.retry), draw \(row.random)")
            XCTAssertEqual(policy.delayMs(forRetry: row.retry, random: row.random, throttled: true), row.throttled,
                           "throttled retry \(row.retry), draw \(row.random)")
        }
    }

    func testThrottledDelayIsNeverShorterThanHalfTheCapNorThanAnUnthrottledOne() {
        let policy = RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60_000)
        var jitter = Jitter(seed: 42)
        for retry in 0..<10 {
            let r = jitter.next()
            let plain = policy.delayMs(forRetry: retry, random: r)
            let throttled = policy.delayMs(forRetry: retry, random: r, throttled: true)
            XCTAssertGreaterThanOrEqual(throttled, 30_000, "a 429 waits at least cap/2")
            XCTAssertGreaterThanOrEqual(throttled, plain, "a 429 waits at least as long as a 5xx for the same draw")
            XCTAssertLessThanOrEqual(plain, policy.ceilingMs(forRetry: retry))
        }
    }

    func testAttemptsAllowedByThePolicy() {
        let policy = RetryPolicy(maxAttempts: 3, baseMs: 1, capMs: 1)
        XCTAssertEqual((0...4).map { policy.allowsAnotherAttempt(after: $0) }, [true, true, true, false, false])
        XCTAssertTrue(RetryPolicy(maxAttempts: 0, baseMs: 1, capMs: 1).allowsAnotherAttempt(after: 0),
                      "the first send always happens")
        XCTAssertFalse(RetryPolicy(maxAttempts: 0, baseMs: 1, capMs: 1).allowsAnotherAttempt(after: 1))
    }

    func testJitterIsDeterministicPerSeedAndInTheUnitInterval() {
        var a = Jitter(seed: 7)
        var b = Jitter(seed: 7)
        var c = Jitter(seed: 8)
        let drawsA = (0..<100).map { _ in a.next() }
        XCTAssertEqual(drawsA, (0..<100).map { _ in b.next() }, "same seed, same draws")
        XCTAssertNotEqual(drawsA, (0..<100).map { _ in c.next() })
        XCTAssertTrue(drawsA.allSatisfy { $0 >= 0 && $0 < 1 })
        XCTAssertGreaterThan(Set(drawsA).count, 95, "draws vary")
        var constant = Jitter.constant(0.25)
        XCTAssertEqual([constant.next(), constant.next()], [0.25, 0.25])
    }

    func testSplitStreamsAreDeterministicDistinctAndAdvanceTheParent() {
        var parent = Jitter(seed: 11)
        var twin = Jitter(seed: 11)
        var first = parent.split()
        var second = parent.split()
        var firstAgain = twin.split()
        let draws = (0..<50).map { _ in first.next() }
        XCTAssertEqual(draws, (0..<50).map { _ in firstAgain.next() }, "the same parent splits off the same streams")
        XCTAssertNotEqual(draws, (0..<50).map { _ in second.next() }, "each split is a stream of its own")
        var unsplit = Jitter(seed: 11)
        XCTAssertNotEqual(parent.next(), unsplit.next(), "splitting advances the parent")
        var constant = Jitter.constant(0.5)
        var child = constant.split()
        XCTAssertEqual(child.next(), 0.5, "a constant stream splits into itself")
    }
}
