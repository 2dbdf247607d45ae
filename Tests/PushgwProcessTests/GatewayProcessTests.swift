import Foundation
import TestSupport
import XCTest

/// Whole `pushgw run` processes, watched from outside: every Redis key a gateway touches
/// carries the configured prefix, and its log never shows a device token or the Redis password.
final class GatewayProcessTests: XCTestCase {
    func testANonDefaultPrefixNamesEveryKeyTheGatewayTouches() throws {
        // A delivered call, one retried through the schedule (503, then 200), an invalid event.
        let world = try ProcessWorld(simulator: #""scenarios": { "f1a70001": "flaky:1" }"#)
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""retry": { "voip": { "base_ms": 50, "cap_ms": 100 } }"#)],
                                           redis: #""prefix": "voicegw""#)
        let monitorFile = world.directory + "/monitor.txt"
        let monitor = try ChildProcess("/bin/sh", ["-c", "exec stdbuf -oL redis-cli -p \(world.redis.port) monitor > '\(monitorFile)'"],
                                       captureOutput: false)
        defer { monitor.stop() }
        try waitUntil("MONITOR to show a command") {
            _ = try world.redis.cli(["ECHO", "monitor-ready"])
            return textSoFar(monitorFile).contains("monitor-ready")
        }
        let gw = try world.gateway(config: config, consumer: "prefixed", arguments: ["--log-level", "error"])
        for event in [#"{"v":1,"id":"plain","type":"incoming_call","voip_token":"a0a00001"}"#,
                      #"{"v":1,"id":"retried","type":"incoming_call","voip_token":"f1a70001"}"#,
                      #"{"v":1,"id":"bad","type":"incoming_call","voip_token":"not hex"}"#] {
            _ = try world.redis.cli(["XADD", "voicegw:{acme}:calls", "*", "event", event])
        }
        waitUntil("three results under the prefix") { world.results(prefix: "voicegw") >= 3 }
        let results = try world.redis.cli(["XRANGE", "voicegw:{acme}:results", "-", "+"])
        XCTAssertEqual(results.components(separatedBy: #""outcome":"delivered_voip""#).count - 1, 2, results)
        XCTAssertTrue(results.contains(#""id":"retried""#) && results.contains(#""status":503"#), "retried once: \(results)")
        XCTAssertEqual(world.integer("XLEN", "voicegw:{acme}:dead"), 1, "the invalid event is a dead letter under the prefix")
        XCTAssertEqual(gw.stop(), 0)
        _ = try world.redis.cli(["ECHO", "monitor-done"])
        waitUntil("MONITOR to catch up") { textSoFar(monitorFile).contains("monitor-done") }

        let keys = try world.redis.cli(["KEYS", "*"]).split(separator: "\n").map(String.init)
        XCTAssertFalse(keys.isEmpty)
        XCTAssertEqual(keys.filter { !$0.hasPrefix("voicegw:") }, [], "every key carries the prefix: \(keys)")
        // Keys the retry path used and removed again are seen in what Redis ran, scripts included.
        let commands = try String(contentsOfFile: monitorFile, encoding: .utf8)
        XCTAssertTrue(commands.contains(#""voicegw:{acme}:retry""#), "the retry went through the prefixed schedule")
        XCTAssertTrue(commands.contains(#""voicegw:retry-due""#), "and the prefixed due index")
        let unprefixed = commands.split(separator: "\n").filter { $0.contains(#""pushgw:"#) }
        XCTAssertEqual(unprefixed.count, 0, "no command touched a pushgw: key: \(unprefixed.prefix(3))")
    }

    func testTheLogShowsNoDeviceTokenAndNoRedisPassword() throws {
        // Random 64-digit tokens: no 9 of their characters in a row appear in a log by chance.
        func token() -> String { (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased() }
        let gone = token(), flaky = token(), voip = token(), alert = token()
        let world = try ProcessWorld(simulator: #""scenarios": { "\#(gone)": "unregistered", "\#(flaky)": "flaky:1" }"#)
        defer { world.stop() }
        let password = "pw-SECRET-\(UUID().uuidString)"
        _ = try world.redis.cli(["ACL", "SETUSER", "gateway", "on", ">" + password, "~*", "&*", "+@all"])
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(#""retry": { "voip": { "base_ms": 50, "cap_ms": 100 } }"#)],
                                           redisURL: "redis://gateway:\(password)@127.0.0.1:\(world.redis.port)/0")
        let log = world.directory + "/gateway.log"
        let gw = try world.gateway(config: config, consumer: "redacted", arguments: ["--log-level", "debug"], log: log)
        // Every path a token takes: delivered, gone (feedback, then the alert), retried, invalid.
        let events = [#"{"v":1,"id":"delivered","type":"incoming_call","voip_token":"\#(voip)","alert_token":"\#(alert)"}"#,
                      #"{"v":1,"id":"gone","type":"incoming_call","voip_token":"\#(gone)","alert_token":"\#(alert)"}"#,
                      #"{"v":1,"id":"retried","type":"incoming_call","voip_token":"\#(flaky)"}"#,
                      #"{"v":1,"id":"invalid","type":"incoming_call","voip_token":"\#(voip)z"}"#]
        for event in events { _ = try world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event", event]) }
        waitUntil("a result for each event") { world.results() >= events.count }
        XCTAssertEqual(gw.stop(), 0)

        let text = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertEqual(ProcessWorld.logLines(log, message: "call finished").count, events.count,
                       "the log is the real one, at debug: a line per finished call\n\(text)")
        XCTAssertEqual(ProcessWorld.logLines(log, message: "pushgw starting").first?["redis"] as? String,
                       "redis://***@127.0.0.1:\(world.redis.port)/0", "the Redis URL is logged without its user and password")
        XCTAssertFalse(text.contains(password), "the Redis password never reaches the log")
        // At most a token's last 8 characters may appear: no 9 of its characters in a row.
        for token in [voip, alert, gone, flaky] {
            let chars = Array(token)
            let leaked = (0...(chars.count - 9)).map { String(chars[$0..<($0 + 9)]) }.filter { text.contains($0) }
            XCTAssertEqual(leaked, [], "no more than the last 8 characters of \(token.suffix(8)) in the log")
        }
    }
}
