import XCTest
@testable import CallStorage
@testable import RedisClient

/// The pure parsers, fed hand-built replies shaped like Redis 7.0's.
final class StreamRepliesTests: XCTestCase {
    private func b(_ s: String) -> RedisReply { .bulk(Array(s.utf8)) }
    private func entry(_ id: String, _ fields: [(String, String)]) -> RedisReply {
        .array([b(id), .array(fields.flatMap { [b($0.0), b($0.1)] })])
    }

    func testXREADGROUPRepliesGroupEntriesByStream() throws {
        let reply = RedisReply.array([
            .array([b("pushgw:{acme}:calls"), .array([entry("1-0", [("event", "{\"id\":\"a\"}")]), entry("1-1", [("event", "{}")])])]),
            .array([b("pushgw:{beta}:calls"), .array([entry("2-0", [("event", "x"), ("extra", "y")])])]),
            .array([b("pushgw:{gamma}:calls"), .array([])]),
        ])
        let read = try StreamReplies.read(reply)
        XCTAssertEqual(read["pushgw:{acme}:calls"], [StreamEntry(id: "1-0", fields: ["event": "{\"id\":\"a\"}"]),
                                                     StreamEntry(id: "1-1", fields: ["event": "{}"])])
        XCTAssertEqual(read["pushgw:{beta}:calls"], [StreamEntry(id: "2-0", fields: ["event": "x", "extra": "y"])])
        XCTAssertNil(read["pushgw:{gamma}:calls"], "a stream without entries is absent")
        XCTAssertEqual(try StreamReplies.read(RedisReply.null), [:], "BLOCK timing out answers nil: no entries")
    }

    func testAnEntrysTimeIsTheMillisecondsOfItsID() {
        XCTAssertEqual(StreamEntry(id: "1764412345678-3", fields: [:]).timeMs, 1_764_412_345_678)
        XCTAssertEqual(StreamEntry(id: "0-1", fields: [:]).timeMs, 0)
        XCTAssertNil(StreamEntry(id: "-1", fields: [:]).timeMs, "no digits")
        XCTAssertNil(StreamEntry(id: "x", fields: [:]).timeMs)
        XCTAssertNil(StreamEntry(id: String(repeating: "9", count: 19) + "-0", fields: [:]).timeMs, "too many digits for Int64")
    }

    func testEntriesWithNilFieldsAreReportedAsDeleted() throws {
        let reply = RedisReply.array([entry("1-0", [("f", "v")]), .array([b("1-1"), .null])])
        let list = try StreamReplies.entryList(reply)
        XCTAssertEqual(list.entries.map(\.id), ["1-0"])
        XCTAssertEqual(list.deletedIDs, ["1-1"])
        XCTAssertEqual(try StreamReplies.range(reply).count, 1)
    }

    func testMalformedRepliesThrowInsteadOfTrapping() {
        let bad: [RedisReply] = [.integer(1), .array([.integer(1)]), .array([.array([b("s")])]),
                                 .array([.array([b("s"), .array([.array([b("1-0"), .array([b("odd")])])])])])]
        for reply in bad {
            XCTAssertThrowsError(try StreamReplies.read(reply), "\(reply)") { error in
                guard case RedisError.unexpectedReply = error else { return XCTFail("wrong error \(error)") }
            }
        }
    }

    func testClaimScriptReplySeparatesClaimedFromLost() throws {
        // {claimed entries, requested ids, their delivery counts after the claim}
        let reply = RedisReply.array([
            .array([entry("1-0", [("event", "a")]), entry("1-2", [("event", "c")])]),
            .array([b("1-0"), b("1-1"), b("1-2")]),
            .array([.integer(2), .integer(2), .integer(3)]),
        ])
        let result = try CallStore.parseClaim(reply)
        XCTAssertEqual(result.entries.map(\.entry.id), ["1-0", "1-2"])
        XCTAssertEqual(result.entries.map(\.deliveries), [2, 3], "the counts the script answers (it decides what a claim counts)")
        XCTAssertEqual(result.lostIDs, ["1-1"], "a requested id XCLAIM did not return was deleted while pending")
    }

    func testReplyAccessorsAndRendering() {
        XCTAssertEqual(b("42").integer, 42, "Redis sends some counts as bulk strings")
        XCTAssertEqual(RedisReply.status("OK").string, "OK")
        XCTAssertNil(RedisReply.integer(1).string)
        XCTAssertTrue(RedisReply.null.isNull)
        XCTAssertEqual(RedisReply.array([b("a"), .integer(1), .null]).description, "[\"a\", :1, nil]")
        XCTAssertEqual(RedisError.server("NOGROUP No such key").serverCode, "NOGROUP")
        XCTAssertNil(RedisError.disconnected.serverCode)
    }
}
