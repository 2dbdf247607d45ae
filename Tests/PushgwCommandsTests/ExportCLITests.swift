import CallStorage
import Foundation
import GatewayTestSupport
import Glibc
import RedisClient
import TestSupport
import XCTest
@testable import PushgwCommands

/// `pushgw export results|feedback|dead APP` (docs/operations.md, "Export") on what a real
/// router wrote into a real redis-server (`DeadLetterHarness`), and on a long stream: one JSON
/// object per entry, oldest first, with the entry's id, time and fields (a result's `result`
/// as an object), read in pages of 100 (`INFO commandstats` counts the XRANGEs), `--since`,
/// `--limit` and `--output`. On TCP here, and as the least-privileged ACL user below.
class ExportCLITests: DeadLetterHarnessTestCase {
    private func objects(_ run: DeadLetterHarness.Run, file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        XCTAssertEqual(run.status, 0, run.err.joined(separator: "\n"), file: file, line: line)
        return try run.out.map { text in
            try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], text, file: file, line: line)
        }
    }

    func testEachStreamIsWrittenAsOneObjectPerEntryAsTheStreamHoldsIt() throws {
        h.sim.simulator.setScenario(.unregistered, for: "dead0001")
        try h.startRouter(fixed: false)
        h.call("acme", "delivered-1", voip: "a0a00001")
        h.call("acme", "gone-1", voip: "dead0001", alert: "a1e70001")
        h.call("broken", "b-1", voip: "00000000aaaa1111")
        h.waitForRecords(3)

        let results = try objects(h.cli(["export", "results", "acme"]))
        let stored = h.entries(h.keys("acme").results)
        XCTAssertEqual(results.map { $0["id"] as? String }, stored.map(\.id), "every entry, oldest first")
        XCTAssertEqual(results.map { $0["time_ms"] as? Int64 }, stored.map(\.timeMs), "each entry's time, from its id")
        let outcomes = results.map { (($0["fields"] as? [String: Any])?["result"] as? [String: Any])?["outcome"] as? String }
        XCTAssertEqual(Set(outcomes.compactMap { $0 }), ["delivered_voip", "delivered_alert"], "the result as an object: \(results)")
        let gone = try XCTUnwrap(results.compactMap { ($0["fields"] as? [String: Any])?["result"] as? [String: Any] }
            .first { $0["id"] as? String == "gone-1" })
        XCTAssertEqual(gone["cause"] as? String, "voip_token_invalid")
        XCTAssertEqual((gone["attempts"] as? [[String: Any]])?.map { $0["status"] as? Int }, [410, 200])

        let feedback = try objects(h.cli(["export", "feedback", "acme"]))
        XCTAssertEqual(feedback.count, 1, "\(feedback)")
        let fields = try XCTUnwrap(feedback.first?["fields"] as? [String: String], "text fields: \(feedback)")
        XCTAssertEqual(fields["token"], "dead0001", "the whole token, as the stream holds it")
        XCTAssertEqual(fields["channel"], "voip")
        XCTAssertEqual(fields["reason"], "Unregistered")
        XCTAssertEqual(feedback.first?["id"] as? String, h.entries(h.keys("acme").feedback).first?.id)

        let dead = try objects(h.cli(["export", "dead", "broken"]))
        XCTAssertEqual(dead.map { $0["id"] as? String }, h.deadIDs("broken"))
        let letter = try XCTUnwrap(dead.first?["fields"] as? [String: Any])
        XCTAssertEqual(letter["reason"] as? String, "apns_credentials: InvalidProviderToken")
        let event = try XCTUnwrap(letter["event"] as? String, "the event as the text it is: \(letter)")
        XCTAssertTrue(event.contains(#""id":"b-1""#), event)
        XCTAssertTrue(letter["attempts"] is String, "fields other than a result's stay text: \(letter)")
        XCTAssertEqual(try objects(h.cli(["export", "dead", "acme"])).count, 0, "an empty stream: no line, exit 0")

        // --output: the same lines in a file only its owner reads, a count on stderr.
        let path = h.directory + "/results.jsonl"
        let written = h.cli(["export", "results", "acme", "--output", path])
        XCTAssertEqual(written.status, 0, written.err.joined(separator: "\n"))
        XCTAssertEqual(written.out, [], "nothing on stdout")
        XCTAssertEqual(written.err, ["pushgw export: 2 entries of results of app acme written to \(path)"])
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), h.cli(["export", "results", "acme"]).text + "\n")
        var facts = stat()
        XCTAssertEqual(stat(path, &facts), 0)
        XCTAssertEqual(facts.st_mode & 0o777, 0o600, "feedback and dead letters hold tokens")
    }

    func testALongStreamIsReadAHundredAtATimeFromSinceUpToLimit() throws {
        // 250 results a second apart from 2001-09-09T01:46:40Z (1e12 ms), with explicit ids.
        let base: Int64 = 1_000_000_000_000
        let results = h.keys("acme").results
        for i in 0..<250 {
            h.send(["XADD", results, "\(base + Int64(i) * 1000)-0", "result", #"{"outcome":"delivered_voip","id":"c-\#(i)"}"#])
        }
        h.send(["CONFIG", "RESETSTAT"])
        let all = try objects(h.cli(["export", "results", "acme"]))
        XCTAssertEqual(all.count, 250)
        XCTAssertEqual(all.map { $0["id"] as? String }, (0..<250).map { "\(base + Int64($0) * 1000)-0" }, "oldest first, each once")
        XCTAssertEqual(all.last.flatMap { (($0["fields"] as? [String: Any])?["result"] as? [String: Any])?["id"] as? String }, "c-249")
        let stats = try XCTUnwrap(h.send(["INFO", "commandstats"])?.string)
        let xranges = stats.firstMatch(of: /cmdstat_xrange:calls=(\d+)/).map { Int($0.1) ?? -1 }
        XCTAssertEqual(xranges, 3, "read in pages of at most 100 (100, 100, 50): \(stats)")

        let since = try objects(h.cli(["export", "results", "acme", "--since", "2001-09-09T01:46:50Z"]))
        XCTAssertEqual(since.first?["id"] as? String, "\(base + 10_000)-0", "from the entry of --since on")
        XCTAssertEqual(since.count, 240)
        let limited = try objects(h.cli(["export", "results", "acme", "--since", "2001-09-09T01:46:50Z", "--limit", "120"]))
        XCTAssertEqual(limited.map { $0["id"] as? String }, Array(since.prefix(120)).map { $0["id"] as? String })
        XCTAssertEqual(try objects(h.cli(["export", "results", "acme", "--since", "1h"])).count, 0, "none in the last hour")
    }

    func testBadUsageExitsTwo() {
        for args in [["export"], ["export", "calls", "acme"], ["export", "results"], ["export", "results", "nope"],
                     ["export", "results", "acme", "--limit", "0"], ["export", "results", "acme", "--since", "soon"],
                     ["export", "results", "acme", "extra"], ["export", "results", "acme", "--output", ""]] {
            let run = h.cli(args)
            XCTAssertEqual(run.status, 2, "\(args): \(run.err)")
            XCTAssertEqual(run.out, [], "\(args)")
        }
        XCTAssertEqual(h.cli(["export", "results", "acme", "--output", "/nonexistent/dir/x.jsonl"]).status, 1, "an unwritable file")
        let help = h.cli(["export", "--help"])
        XCTAssertEqual(help.status, 0)
        for text in ["results|feedback|dead APP", "--since T", "--limit N", "--output FILE", "Exit status: 0 done"] {
            XCTAssertTrue(help.text.contains(text), "the help says \(text): \(help.text)")
        }
    }
}

/// `ExportCLITests` as the least-privileged ACL user: `ACL LOG` stays empty (the harness checks).
final class ExportCLIAsLeastPrivilegedUserTests: ExportCLITests {
    override class var redisDeployment: RedisDeployment { .leastPrivilege }

    override func testEachStreamIsWrittenAsOneObjectPerEntryAsTheStreamHoldsIt() throws {
        try super.testEachStreamIsWrittenAsOneObjectPerEntryAsTheStreamHoldsIt()
    }
    override func testALongStreamIsReadAHundredAtATimeFromSinceUpToLimit() throws {
        try super.testALongStreamIsReadAHundredAtATimeFromSinceUpToLimit()
    }
    override func testBadUsageExitsTwo() { super.testBadUsageExitsTwo() }
}
