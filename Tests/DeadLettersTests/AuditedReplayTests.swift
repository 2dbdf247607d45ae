import JSONOutput
import XCTest
import EventLoop
import CallStorage
import RedisClient
import TestSupport
@testable import DeadLetters

/// `AuditedReplay`, the one replay of the command line and the console, against a real
/// redis-server: pages of targets replay in order with one line per step, what was gone is
/// told as gone, the summary covers every page, and the audit record names what was replayed
/// of how many, with the rate before the actor's own options.
final class AuditedReplayTests: DeadLetterOperationsTestCase {
    override func setUpWithError() throws {
        try startOperations(policies: ["acme": .default], ringTimeoutsMs: ["acme": 30_000])
    }

    private func redis(_ args: [String]) -> RedisReply? {
        var result: Result<RedisReply, RedisError>?
        connection.send(args) { result = $0 }
        loop.run(waitingFor: "redis to answer \(args[0])") { result != nil }
        return try? result?.get()
    }

    private func dead(_ call: String) -> String {
        let now = Clock.unixMs()
        let event = #"{"v":1,"id":"\#(call)","type":"incoming_call","voip_token":"00aa11bb","deadline":\#(now + 60_000)}"#
        return redis(["XADD", "pushgw:{acme}:dead", "*", "event", event, "reason", "apns_credentials: BadTopic",
                      "attempts", #"{"outcome":"dead_lettered","entry":"\#(now)-0","attempts":[]}"#, "first_failure_ms", String(now),
                      "last_failure_ms", String(now), "replays", "0", "app", "acme"])?.string ?? ""
    }

    func testPagesReplayInOrderAndOneRecordCoversTheRun() throws {
        let ids = (1...3).map { dead("c-\($0)") }
        let filter = DeadLetterFilter(apps: ["acme"])
        let replay = operations.replayAudited(rate: try XCTUnwrap(ReplayRate(parsing: "10000/s")),
                                              by: AuditActor(user: "ann", sudoUser: "root", options: [("via", .string("test"))]),
                                              filter: filter)
        var lines: [String] = []
        let pages = [[DeadLetterReference(app: "acme", id: ids[0]), DeadLetterReference(app: "acme", id: "1-0")],
                     [DeadLetterReference(app: "acme", id: ids[1]), DeadLetterReference(app: "acme", id: ids[2])]]
        for page in pages {
            var goOn: Bool?
            replay.replay(page, onStep: { _, line in lines.append(line) }, completion: { goOn = $0 })
            loop.run(waitingFor: "a page of replays") { goOn != nil }
            XCTAssertEqual(goOn, true, "no Redis failure: the run may go on")
        }
        XCTAssertEqual(lines.count, 4, "\(lines)")
        XCTAssertTrue(lines[0].hasPrefix("replayed acme/\(ids[0]) -> calls entry ") && lines[0].contains("  call c-1  (replay #1): rings"),
                      lines[0])
        XCTAssertEqual(lines[1], "skipped acme/1-0: gone meanwhile (replayed or purged by someone else)")
        XCTAssertTrue(lines[3].hasPrefix("replayed acme/\(ids[2]) ") && lines[3].contains("call c-3"), lines[3])
        XCTAssertEqual(replay.summary.replayed, ids.map { "acme/" + $0 }, "every page's replays, in order")
        XCTAssertEqual(replay.summary.gone, 1)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:calls"])?.integer, 3, "three events back on the calls stream")

        let record = replay.record(requested: 4)
        XCTAssertEqual(record.verb, "replay")
        XCTAssertEqual(record.user, "ann")
        XCTAssertEqual(record.sudoUser, "root")
        XCTAssertEqual(record.ids, ids.map { "acme/" + $0 })
        XCTAssertEqual(record.requested, 4)
        XCTAssertEqual(record.done, 3, "the one gone meanwhile is not counted as done")
        XCTAssertEqual(record.filter, filter)
        XCTAssertEqual(record.options.map(\.0), ["rate", "via"], "the rate first, then how the actor came")
        XCTAssertEqual(OrderedJSON.object(record.options).text, #"{"rate":"10000/s","via":"test"}"#)
    }

    /// A cancel asked while an entry is in progress (here: as its step is told) lets that one
    /// finish and replays nothing after it, at any rate; later pages do not start, and the
    /// record names who cancelled.
    func testACancelStopsAfterTheEntryInProgress() throws {
        let ids = (1...4).map { dead("c-\($0)") }
        let replay = operations.replayAudited(rate: .fastest, by: AuditActor(user: "ann"), filter: nil)
        var lines: [String] = []
        var goOn: Bool?
        replay.replay(ids.prefix(3).map { DeadLetterReference(app: "acme", id: $0) }, onStep: { _, line in
            lines.append(line)
            replay.cancel(by: "bob")
        }, completion: { goOn = $0 })
        loop.run(waitingFor: "the cancelled page") { goOn != nil }
        XCTAssertEqual(goOn, false, "a cancelled run does not go on")
        XCTAssertEqual(lines.count, 1, "\(lines)")
        XCTAssertEqual(replay.summary.replayed, ["acme/" + ids[0]], "the entry in progress, no other")
        XCTAssertTrue(replay.summary.cancelled)
        var nextPage: Bool?
        replay.replay([DeadLetterReference(app: "acme", id: ids[3])], onStep: { _, _ in XCTFail("a cancelled run replays nothing more") },
                      completion: { nextPage = $0 })
        loop.run(waitingFor: "the next page's refusal") { nextPage != nil }
        XCTAssertEqual(nextPage, false)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:calls"])?.integer, 1)
        XCTAssertEqual(redis(["XLEN", "pushgw:{acme}:dead"])?.integer, 3, "the rest stay dead letters")
        let record = replay.record(requested: 4)
        XCTAssertEqual(record.done, 1)
        XCTAssertEqual(OrderedJSON.object(record.options).text, #"{"rate":"\#(ReplayRate.fastest)","cancelled_by":"bob"}"#)
    }
}
