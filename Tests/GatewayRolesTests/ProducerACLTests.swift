import Foundation
import TestSupport
import XCTest

/// The producers' ACL of docs/operations.md, read from the doc (`DocumentedACL.producer`), on a
/// real redis-server: a backend can add events, read its results (with a group of its own),
/// feedback and result keys, and cannot take or acknowledge entries of the calls stream as the
/// gateway's group, forge results, or touch pushgw's internal keys or another app's.
/// (`ProducerExampleTests` runs the six example producers as this user.)
final class ProducerACLTests: XCTestCase {
    private var server: RedisServer!

    override func setUpWithError() throws {
        server = try RedisServer.start()
        _ = try server.cli(["ACL", "SETUSER", "acme-backend", "reset", "on", ">producer-PW"] + DocumentedACL.producer())
        _ = try server.cli(["XGROUP", "CREATE", "pushgw:{acme}:calls", "pushgw", "$", "MKSTREAM"])
        _ = try server.cli(["XGROUP", "CREATE", "pushgw:{other}:calls", "pushgw", "$", "MKSTREAM"])
    }

    override func tearDown() {
        server.stop()
    }

    /// One command as the producer; its output (`--raw`: an error is its message).
    private func asProducer(_ args: [String]) throws -> String {
        let (_, out, err) = try runCommand("redis-cli", ["-p", String(server.port), "--user", "acme-backend", "--pass", "producer-PW",
                                                         "--no-auth-warning", "--raw"] + args)
        return out + err
    }

    func testAProducerCannotTakeOrAcknowledgeTheCallsStreamAsTheGroup() throws {
        let entry = try asProducer(["XADD", "pushgw:{acme}:calls", "*", "event", "{\"v\":1}"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(entry.contains("-"), "the producer adds events: \(entry)")
        // The gateway's group has delivered it to a gateway: a pending entry a producer could ack.
        _ = try server.cli(["XREADGROUP", "GROUP", "pushgw", "gw-1", "COUNT", "1", "STREAMS", "pushgw:{acme}:calls", ">"])
        let refused: [[String]] = [
            ["XREADGROUP", "GROUP", "pushgw", "acme-backend", "COUNT", "10", "STREAMS", "pushgw:{acme}:calls", ">"],
            ["XACK", "pushgw:{acme}:calls", "pushgw", entry],
            ["XCLAIM", "pushgw:{acme}:calls", "pushgw", "acme-backend", "0", entry],
            ["XAUTOCLAIM", "pushgw:{acme}:calls", "pushgw", "acme-backend", "0", "0"],
            ["XGROUP", "CREATE", "pushgw:{acme}:calls", "mine", "0"],
            ["XGROUP", "SETID", "pushgw:{acme}:calls", "pushgw", "$"],
            ["XGROUP", "DESTROY", "pushgw:{acme}:calls", "pushgw"],
            ["XPENDING", "pushgw:{acme}:calls", "pushgw"],
            ["XRANGE", "pushgw:{acme}:calls", "-", "+"],
            ["XDEL", "pushgw:{acme}:calls", entry],
            ["XTRIM", "pushgw:{acme}:calls", "MAXLEN", "0"],
            ["DEL", "pushgw:{acme}:calls"],
            // No forged outcomes or feedback.
            ["XADD", "pushgw:{acme}:results", "*", "result", "{}"],
            ["XADD", "pushgw:{acme}:feedback", "*", "token", "ab"],
            ["SET", "pushgw:{acme}:result:call-1", "{}"],
            ["DEL", "pushgw:{acme}:result:call-1"],
            ["HSET", "pushgw:{acme}:outcomes:1", "call-1", "v"],
            ["HDEL", "pushgw:{acme}:outcomes:1", "call-1"],
            // pushgw's internal keys, other apps, other prefixes.
            ["HGETALL", "pushgw:{acme}:retry:data"],
            ["ZRANGE", "pushgw:{acme}:retry", "0", "-1"],
            ["XRANGE", "pushgw:{acme}:dead", "-", "+"],
            ["GET", "pushgw:{acme}:invalid:voip:ab"],
            ["XADD", "pushgw:{other}:calls", "*", "event", "{}"],
            ["GET", "pushgw:{other}:result:call-1"],
            ["ZRANGE", "pushgw:consumers", "0", "-1"],
            ["EVAL", "return 1", "0"],
        ]
        for args in refused {
            let out = try asProducer(args)
            XCTAssertTrue(out.hasPrefix("NOPERM"), "\(args.joined(separator: " ")) is refused to a producer: \(out)")
        }
        XCTAssertEqual(try server.cli(["XPENDING", "pushgw:{acme}:calls", "pushgw"]).split(separator: "\n").first, "1",
                       "the entry is still pending for the gateway")
        XCTAssertEqual(try server.cli(["XLEN", "pushgw:{other}:calls"]), "0\n")
    }

    func testAProducerReadsItsResultsFeedbackAndResultKeys() throws {
        _ = try server.cli(["SET", "pushgw:{acme}:result:call-1", "{\"outcome\":\"delivered_voip\"}"])
        _ = try server.cli(["XADD", "pushgw:{acme}:feedback", "*", "token", "ab", "channel", "voip"])
        let allowed: [[String]] = [
            ["XGROUP", "CREATE", "pushgw:{acme}:results", "backend", "$", "MKSTREAM"],
            ["XREADGROUP", "GROUP", "backend", "worker-1", "COUNT", "10", "STREAMS", "pushgw:{acme}:results", ">"],
            ["XACK", "pushgw:{acme}:results", "backend", "1-1"],
            ["XREAD", "COUNT", "1", "STREAMS", "pushgw:{acme}:results", "0"],
            ["XREVRANGE", "pushgw:{acme}:results", "+", "-", "COUNT", "1"],
            ["XREVRANGE", "pushgw:{acme}:feedback", "+", "-", "COUNT", "1"],
            ["GET", "pushgw:{acme}:result:call-1"],
            ["GET", "pushgw:{acme}:result:cancel:call-1"],
            ["PING"],
        ]
        for args in allowed {
            let out = try asProducer(args)
            XCTAssertFalse(out.contains("NOPERM") || out.contains("ERR"), "\(args.joined(separator: " ")) works for a producer: \(out)")
        }
        XCTAssertTrue(try asProducer(["GET", "pushgw:{acme}:result:call-1"]).contains("delivered_voip"))
    }
}
