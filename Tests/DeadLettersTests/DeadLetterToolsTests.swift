import XCTest
import RedisClient
@testable import DeadLetters

/// The small pure parts: filters, pacing, the digest, pretty printing, audit records.
final class DeadLetterToolsTests: XCTestCase {
    private func record(_ id: String, reason: String, call: String = "c-1") -> DeadLetterRecord {
        DeadLetterRecord(entry: StreamEntry(id: id, fields: ["event": #"{"id":"\#(call)"}"#, "reason": reason]),
                         app: "acme", ledger: nil)
    }

    func testTimesAreUTCWithMillisecondsDigitByDigit() {
        // Expected values from Python's datetime; around the epoch, a leap day, and the last
        // millisecond of year 9999.
        let cases: [(Int64, String)] = [
            (0, "1970-01-01T00:00:00.000Z"), (1, "1970-01-01T00:00:00.001Z"), (999, "1970-01-01T00:00:00.999Z"),
            (1000, "1970-01-01T00:00:01.000Z"), (-1, "1969-12-31T23:59:59.999Z"), (-1001, "1969-12-31T23:59:58.999Z"),
            (951_782_400_123, "2000-02-29T00:00:00.123Z"), (1_796_623_695_629, "2026-12-07T06:08:15.629Z"),
            (253_402_300_799_999, "9999-12-31T23:59:59.999Z"),
        ]
        for (ms, text) in cases { XCTAssertEqual(DeadFormat.time(ms), text, "\(ms)") }
        XCTAssertEqual(DeadFormat.time(253_402_300_800_000), "10000-01-01T00:00:00.000Z", "a fifth digit of the year is written")
    }

    func testReasonFilterMatchesTheWholeReasonOrItsStart() {
        let r = record("100-0", reason: "apns_credentials: InvalidProviderToken")
        XCTAssertTrue(DeadLetterFilter(reason: "apns_credentials").matches(r))
        XCTAssertTrue(DeadLetterFilter(reason: "apns_credentials: InvalidProviderToken").matches(r))
        XCTAssertFalse(DeadLetterFilter(reason: "invalid_event").matches(r))
        XCTAssertFalse(DeadLetterFilter(apps: ["beta"]).matches(r))
        XCTAssertTrue(DeadLetterFilter(callID: "c-1").matches(r))
        XCTAssertFalse(DeadLetterFilter(callID: "c-2").matches(r))
    }

    func testTimeFiltersAreHalfOpenAndGiveTheRangeBounds() {
        let r = record("100-3", reason: "x")
        XCTAssertTrue(DeadLetterFilter(sinceMs: 100).matches(r), "since is inclusive")
        XCTAssertFalse(DeadLetterFilter(sinceMs: 101).matches(r))
        XCTAssertFalse(DeadLetterFilter(beforeMs: 100).matches(r), "before is exclusive")
        XCTAssertTrue(DeadLetterFilter(beforeMs: 101).matches(r))
        let f = DeadLetterFilter(sinceMs: 100, beforeMs: 200)
        XCTAssertEqual(f.rangeStart, "100-0")
        XCTAssertEqual(f.rangeEnd, "(200-0")
        XCTAssertEqual(DeadLetterFilter().rangeStart, "-")
        XCTAssertEqual(DeadLetterFilter().rangeEnd, "+")
        XCTAssertTrue(DeadLetterFilter(sinceMs: 200, beforeMs: 200).isEmptyRange)
        XCTAssertEqual(DeadLetterFilter(apps: ["a"], reason: "r").json.text, #"{"app":["a"],"reason":"r"}"#)
    }

    func testRatesParseAndPaceReplays() throws {
        XCTAssertEqual(ReplayRate(parsing: "20/s")?.perSecond, 20)
        XCTAssertEqual(ReplayRate(parsing: "20")?.perSecond, 20)
        XCTAssertEqual(ReplayRate(parsing: "120/m")?.perSecond, 2)
        XCTAssertEqual(ReplayRate(parsing: "3600/h")?.perSecond, 1)
        for bad in ["0/s", "-1/s", "x/s", "5/d", "", "/s", "inf"] {
            XCTAssertNil(ReplayRate(parsing: bad), bad)
        }
        let pacer = ReplayPacer(rate: try XCTUnwrap(ReplayRate(parsing: "4/s")), startMs: 1000)
        XCTAssertEqual((0..<5).map(pacer.dueMs(index:)), [1000, 1250, 1500, 1750, 2000], "4 a second, evenly spaced")
        let slow = ReplayPacer(rate: try XCTUnwrap(ReplayRate(3, per: .second)), startMs: 0)
        XCTAssertEqual(slow.dueMs(index: 1), 334, "rounded up: never faster than the rate")
    }

    /// Every rate is parsed into 1/h ... 10000/s before any arithmetic: what crashed the
    /// gateway and the CLI (a Double above Int.max shown, a rate that underflowed to 0, a due
    /// time past Int64) and what never ended (1e-13/s) are refused, and the bounds pace and
    /// print as small numbers.
    func testRatesOutsideTheBoundsOrWrittenAsAnythingButDigitsAreRefused() throws {
        let hostile = ["1e300", "1e19", "9.3e18/s", "5e-324/h", "1e-300", "1e-13", "inf", "nan", "-1", "0", "+5", "1e3",
                       "0x10", "5.", ".5", "1/d", "10001/s", "600001/m", "0.9/h", "0.000001/s", " 5", "5 /s", "١٠/s",
                       String(repeating: "9", count: 400), "0." + String(repeating: "0", count: 398) + "1"]
        for text in hostile { XCTAssertNil(ReplayRate(parsing: text), text) }
        XCTAssertNil(ReplayRate(.infinity, per: .second))
        XCTAssertNil(ReplayRate(.nan, per: .second))
        XCTAssertNil(ReplayRate(.leastNonzeroMagnitude, per: .hour))
        for (text, shown) in [("1/h", "1/h"), ("10000/s", "10000/s"), ("600000/m", "600000/m"), ("2.5/h", "2.5/h"), ("20", "20/s"),
                              ("000020.500000/m", "20.5/m"), ("999999999/h", nil)] {
            let rate = ReplayRate(parsing: text)
            XCTAssertEqual(rate?.description, shown, text)
            if let rate { XCTAssertEqual(ReplayRate(parsing: rate.description), rate, "\(text) reads back") }
        }
        XCTAssertEqual(ReplayRate.slowest.description, "1/h")
        XCTAssertEqual(ReplayRate.fastest.description, "10000/s")
        let slowest = ReplayPacer(rate: .slowest, startMs: Int64.max - 10)
        XCTAssertEqual(slowest.dueMs(index: 0), Int64.max - 10)
        XCTAssertEqual(slowest.dueMs(index: Int.max), Int64.max, "past the end of time it stays there")
        XCTAssertEqual(ReplayPacer(rate: .slowest, startMs: 0).dueMs(index: 1_000), 3_600_000_000, "1,000 at 1/h: 1,000 hours")
    }

    /// Durations are bounded before they are summed: 16 pairs of 999,999,999 weeks overflowed.
    func testDurationsPastAHundredYearsAreRefused() {
        XCTAssertEqual(TimeArgument.durationMs("5217w"), 5217 * 7 * 86_400_000)
        XCTAssertEqual(TimeArgument.durationMs("36525d"), TimeArgument.longestMs)
        XCTAssertNil(TimeArgument.durationMs("36525d1s"))
        XCTAssertNil(TimeArgument.durationMs("999999999w"))
        XCTAssertNil(TimeArgument.durationMs(String(repeating: "999999999w", count: 16)))
        XCTAssertNil(TimeArgument.durationMs(String(repeating: "9", count: 400) + "s"))
        XCTAssertNil(TimeArgument.instant(String(repeating: "999999999w", count: 16), nowMs: Int64.min + 1))
        XCTAssertEqual(TimeArgument.instant("1s", nowMs: 10_000), 9_000)
    }

    func testDigestIsSHA256() {
        XCTAssertEqual(EventDigest.of("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(EventDigest.of("").count, 64)
    }

    func testPrettyPrintingKeepsOrderAndSpelling() throws {
        let text = #"{"z":1,"a":{"s":"br{ace, \"quoted\": [x]","e":[],"o":{}},"n":[1,2.50,true,null]}"#
        let pretty = try XCTUnwrap(PrettyJSON.pretty(text))
        XCTAssertEqual(pretty, """
            {
              "z": 1,
              "a": {
                "s": "br{ace, \\"quoted\\": [x]",
                "e": [],
                "o": {}
              },
              "n": [
                1,
                2.50,
                true,
                null
              ]
            }
            """)
        XCTAssertEqual(PrettyJSON.pretty(#"{"a":1}"#, margin: "> "), "{\n>   \"a\": 1\n> }")
        XCTAssertNil(PrettyJSON.pretty("{not json"))
    }

    func testAuditRecordsNameWhoWhatAndHowMany() throws {
        let ids = (0..<150).map { "acme/\($0)-0" }
        let record = AuditRecord(timeMs: 5, verb: "purge", user: "ops", sudoUser: "root", ids: ids, requested: 150, done: 149,
                                 filter: DeadLetterFilter(apps: ["acme"], reason: "invalid_event"))
        let fields = Dictionary(uniqueKeysWithValues: record.streamFields)
        XCTAssertEqual(fields["verb"], "purge")
        XCTAssertEqual(fields["user"], "ops")
        XCTAssertEqual(fields["sudo_user"], "root")
        XCTAssertEqual(fields["requested"], "150")
        XCTAssertEqual(fields["done"], "149")
        XCTAssertEqual(fields["filters"], #"{"app":["acme"],"reason":"invalid_event"}"#)
        let shown = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try XCTUnwrap(fields["ids"]).utf8)) as? [String])
        XCTAssertEqual(shown.count, AuditRecord.maxIDs + 1, "at most 100 ids, then how many more")
        XCTAssertEqual(shown.last, "… 50 more")
        XCTAssertEqual(record.streamFields.first?.0, "time_ms")
    }
}
