import XCTest
@testable import AdminEndpoint

/// The guess limits' rules, without sockets (docs/operations.md, "Limits"); over HTTP in
/// `ConsoleAccessTests` and `AdminEndpointTests`.
final class GuessThrottleTests: XCTestCase {
    private let a = ClientAddress(address: "10.0.0.1")
    private let b = ClientAddress(address: "10.0.0.2")

    func testAClientsChecksWaitDoublingAfterItsFreeGuesses() {
        var t = GuessThrottle()
        var now: Int64 = 0
        var waits: [Int64] = []
        var checked = 0
        var justChecked = false
        while now < 10_000 {
            switch t.admit(a, nowMs: now) {
            case .check:
                checked += 1
                justChecked = true
                let events = t.failed(a, nowMs: now)
                if checked == 4 {
                    XCTAssertEqual(events, [.started(GuessThrottle.Burst(client: a, wrong: 4, refused: 0, startedMs: 0, lastWrongMs: 30),
                                                    delayMs: 1_000)], "the burst starts once, with the first wait")
                } else {
                    XCTAssertEqual(events, [], "no event per guess")
                }
            case let .wait(ms):
                if justChecked { waits.append(ms + 10) }  // asked 10 ms after the wrong token
                justChecked = false
            }
            now += 10  // 1,000 tries in 10 s
        }
        XCTAssertEqual(checked, 7, "3 free, then one each after 1, 2 and 4 s")
        XCTAssertEqual(waits, [1_000, 2_000, 4_000, 8_000], "each wrong token doubles the wait")
        XCTAssertEqual(t.admit(b, nowMs: now), .check, "another client is not held up")
    }

    func testTheWaitIsCappedAndAQuietClientStartsAfresh() {
        var s = GuessThrottle.Settings()
        s.maxDelayMs = 4_000
        s.forgetAfterMs = 60_000
        var t = GuessThrottle(settings: s)
        var now: Int64 = 0
        for _ in 0..<20 {
            if case let .wait(ms) = t.admit(a, nowMs: now) { now += ms }
            _ = t.failed(a, nowMs: now)
        }
        XCTAssertEqual(t.admit(a, nowMs: now), .wait(ms: 4_000), "at most maxDelayMs")
        XCTAssertEqual(t.admit(a, nowMs: now + 4_000), .check)
        let ended = t.forgetQuiet(nowMs: now + 60_000)
        XCTAssertEqual(ended.count, 1)
        if case let .ended(burst) = ended.first {
            XCTAssertEqual(burst.client, a)
            XCTAssertEqual(burst.wrong, 20)
            XCTAssertEqual(burst.refused, 17, "the requests refused unchecked are counted for the log")
        }
        _ = t.forgetQuiet(nowMs: now + 400_000)
        XCTAssertTrue(t.isEmpty)
        XCTAssertEqual(t.failed(a, nowMs: now + 400_000), [], "afresh: free guesses again")
    }

    func testGuessesSpreadOverManyAddressesMakeEveryCheckWait() {
        var t = GuessThrottle()
        var events: [GuessThrottle.Event] = []
        for i in 0..<30 { events += t.failed(ClientAddress(address: "10.1.0.\(i)"), nowMs: 0) }
        XCTAssertEqual(events, [], "30 wrong tokens from 30 addresses: each within its free guesses")
        XCTAssertEqual(t.admit(a, nowMs: 0), .check)
        events = t.failed(ClientAddress(address: "10.1.1.1"), nowMs: 0)
        XCTAssertEqual(events.count, 1)
        if case let .started(burst, delay)? = events.first {
            XCTAssertNil(burst.client, "everyone's burst")
            XCTAssertEqual(delay, 1_000)
        }
        XCTAssertEqual(t.admit(a, nowMs: 10), .wait(ms: 990), "the 31st makes every client's checks wait")
    }

    func testClientsAreCountedByAddressAndIPv6ByItsSlash64() {
        XCTAssertEqual(ClientAddress(peer: "127.0.0.1:40000"), ClientAddress(peer: "127.0.0.1:40001"), "ports do not matter")
        XCTAssertEqual(ClientAddress(peer: "2001:db8:1:2::5:443").key, "2001:db8:1:2::/64")
        XCTAssertEqual(ClientAddress(address: "2001:db8:1:2:ffff::1"), ClientAddress(address: "2001:db8:1:2::9"))
        XCTAssertNotEqual(ClientAddress(address: "2001:db8:1:3::1"), ClientAddress(address: "2001:db8:1:2::1"))
        XCTAssertEqual(ClientAddress(address: "::ffff:10.0.0.5").key, "10.0.0.5")
        XCTAssertEqual(ClientAddress(peer: nil).key, "?")
    }

    func testTheClientsRememberedAreBounded() {
        var s = GuessThrottle.Settings()
        s.maxClients = 100
        s.globalFreeGuesses = 1_000_000
        var t = GuessThrottle(settings: s)
        for i in 0..<1_000 {
            for _ in 0..<4 { _ = t.failed(ClientAddress(address: "10.2.\(i / 256).\(i % 256)"), nowMs: Int64(i)) }
        }
        XCTAssertEqual(t.admit(ClientAddress(address: "10.2.3.231"), nowMs: 1_000), .wait(ms: 999), "the latest are remembered")
        XCTAssertEqual(t.admit(ClientAddress(address: "10.2.0.0"), nowMs: 1_000), .check, "the quietest were forgotten")
    }
}
