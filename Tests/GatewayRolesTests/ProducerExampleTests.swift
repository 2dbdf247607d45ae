import EventLoop
import Foundation
import GatewayConfiguration
import GatewayTestSupport
import IngestEndpoint
import TestSupport
import XCTest
@testable import GatewayRoles

/// The producers of `examples/producers/` — real clients in six languages, each with the Redis
/// client Debian packages — against a live router. Each sends a call whose VoIP token APNs
/// declares gone, that call's cancel, an invalid event, and a call ringing two devices answered
/// on one (docs/protocol.md, *Devices*); reads each result by id and
/// through its own consumer group, and the feedback; and prints what it read. Each runs as
/// the producers' ACL user docs/operations.md gives (`DocumentedACL.producer`), and nothing it
/// sends may be refused (`ACL LOG`).
final class ProducerExampleTests: XCTestCase {
    private static let root = packageRoot + "/examples/producers/"

    func testPythonProducer() throws {
        try run("python", ["python3", Self.root + "python/producer.py"], n: 1, api: true)
    }

    func testNodeProducer() throws {
        try run("node", ["node", Self.root + "node/producer.js"], n: 2, environment: ["NODE_PATH": "/usr/share/nodejs"], api: true)
    }

    func testGoProducer() throws {
        try run("go", ["go", "run", Self.root + "go/producer.go"], n: 3,
                environment: ["GO111MODULE": "off", "GOPATH": "/usr/share/gocode"], api: true)
    }

    func testRubyProducer() throws {
        try run("ruby", ["ruby", Self.root + "ruby/producer.rb"], n: 4, api: true)
    }

    func testPHPProducer() throws {
        try run("php", ["php", Self.root + "php/producer.php"], n: 5, api: true)
    }

    func testShellProducer() throws {
        try run("shell", ["bash", Self.root + "shell/producer.sh"], n: 6, api: true)
    }

    /// Runs one producer to its end (at most 120 s: `go run` compiles first) against a router
    /// whose APNs declares its VoIP token unregistered, and checks what it printed.
    /// With `api`, the gateway also has its HTTP API (`IngestEndpoint`) with a key of `acme`, and the
    /// producer sends a call and its cancel through it and reads the call's result there, then a
    /// call with two devices answered on one.
    private func run(_ language: String, _ command: [String], n: Int, environment: [String: String] = [:], api: Bool = false,
                     file: StaticString = #filePath, line: UInt = #line) throws {
        let voipToken = String(format: "dead%012x", n), alertToken = String(format: "a1e7%012x", n)
        let devices = ["PHONE_VOIP_TOKEN": String(format: "c0c0%012x", n), "PHONE_ALERT_TOKEN": String(format: "c1c1%012x", n),
                       "IPAD_VOIP_TOKEN": String(format: "c2c2%012x", n), "IPAD_ALERT_TOKEN": String(format: "c3c3%012x", n)]
        let pixel = String(format: "pixel%012x:APA91bH-example", n)
        let h = try RouterHarness(simulator: { $0.scenarios = [voipToken: .unregistered] }, acmeFcmCredential: "firebase")
        defer { h.close() }
        _ = try h.redis.cli(["ACL", "SETUSER", "acme-backend", "reset", "on", ">producer-PW"] + DocumentedACL.producer())
        let url = "redis://acme-backend:producer-PW@127.0.0.1:\(h.redis.port)/0"
        var env = environment.merging(["REDIS_URL": url, "PUSHGW_APP": "acme", "VOIP_TOKEN": voipToken,
                                       "ALERT_TOKEN": alertToken, "TIMEOUT_S": "20", "PIXEL_FCM_TOKEN": pixel].merging(devices) { $1 }) { $1 }
        let apiToken = String(format: "a1a1%012x", n)
        let apiPhone = String(format: "b0b0%012x", n), apiPad = String(format: "b2b2%012x", n)
        var ingest: IngestEndpoint?
        if api {
            let key = APIKeys.newKey()
            let endpoint = IngestEndpoint(loop: h.loop, config: IngestConfig(listen: "127.0.0.1:\(freeLoopbackPort())",
                                                                             apps: ["acme": IngestApp(keyHashes: [APIKeys.hash(key)])]),
                                          apps: h.apps, topology: h.store.topology, log: Log(minimum: .error))
            endpoint.start()
            ingest = endpoint
            env["INGEST_URL"] = "http://127.0.0.1:\(try XCTUnwrap(endpoint.port))"
            env["INGEST_KEY"] = key
            env["API_VOIP_TOKEN"] = apiToken
            env["API_PHONE_TOKEN"] = apiPhone
            env["API_IPAD_TOKEN"] = apiPad
        }
        defer { ingest?.close() }
        let producer = try ChildProcess(command[0], Array(command.dropFirst()), environment: env)
        let finished = h.runUntil("the \(language) producer to end", timeoutMs: 120_000, file: file, line: line) {
            !producer.isRunning
        }
        if !finished { producer.stop(signal: SIGKILL, file: file, line: line) }
        let out = producer.output, err = producer.errorOutput
        XCTAssertTrue(finished, "the \(language) producer ended within 120 s: \(out)\(err)", file: file, line: line)
        XCTAssertEqual(producer.exitStatus, 0, "the \(language) producer got every result:\n\(out)\(err)",
                       file: file, line: line)
        print("\(language) producer:\n\(out)")
        let lines = out.split(separator: "\n").map(String.init)
        func has(_ pattern: String, _ rule: String) {
            XCTAssertTrue(lines.contains { $0.range(of: pattern, options: .regularExpression) != nil },
                          "\(language): \(rule) (a line matching \(pattern)):\n\(out)", file: file, line: line)
        }
        has(#"^result call-\S+ incoming_call delivered_alert voip_token_invalid$"#, "the call's outcome, found by id")
        has(#"^result call-\S+ call_cancelled cancelled -$"#, "the cancel's own result, found by id")
        has(#"^result call-\S+-bad incoming_call dead_lettered invalid_event: voip_token: not a hex string$"#,
            "the invalid event's result, with its id")
        has(#"^result call-\S+-multi incoming_call delivered_voip answered$"#, "the call with devices, ended by the answer")
        has(#"^result call-\S+-multi call_answered answered -$"#, "the answer's own result, found by id")
        has("^group producer-\(language) 5 results$", "the five results read through its own consumer group")
        has("^feedback voip \(voipToken) Unregistered [0-9]+$", "the feedback for its VoIP token")
        if api {
            has(#"^api call call-\S+ delivered_voip$"#, "the API's call, answered with its result (?wait)")
            has(#"^api cancel call-\S+ cancelled delivered_voip$"#, "the API's cancel: too late, the call was delivered")
            has(#"^api result call-\S+ delivered_voip$"#, "the API's call's result, read by id")
            has(#"^api answer call-\S+-multi answered$"#, "the API's answer of a call with devices, its own result (?wait)")
            has(#"^api result call-\S+-multi delivered_voip answered$"#, "the API's call with devices, ended by the answer")
            XCTAssertEqual(h.requests(apiToken).count, 1, "one VoIP push for the API's call", file: file, line: line)
            XCTAssertEqual(h.requests(apiPhone).count, 1, "one VoIP push to the phone that answered", file: file, line: line)
            XCTAssertEqual(h.requests(apiPad).count, 1, "one VoIP push to the iPad, nothing after the answer", file: file, line: line)
        }
        XCTAssertEqual(h.requests(voipToken).count, 1, "one VoIP push", file: file, line: line)
        XCTAssertEqual(h.requests(alertToken).count, 1, "one alert push", file: file, line: line)
        XCTAssertEqual(h.entries(h.keys("acme").dead).count, 1, "the invalid event is a dead letter", file: file, line: line)
        XCTAssertEqual(h.requests(devices["PHONE_ALERT_TOKEN"]!).count, 0, "the phone answered: nothing more to it",
                       file: file, line: line)
        XCTAssertEqual(h.requests(devices["IPAD_ALERT_TOKEN"]!).map { $0.header("apns-push-type") }, ["background"],
                       "the iPad is told the call was answered elsewhere", file: file, line: line)
        // The Android phone of the call with devices: its ring, then call_ended after the answer.
        let pixelData = h.requests(pixel).compactMap { request -> String? in
            let root = (try? JSONSerialization.jsonObject(with: Data(request.body))) as? [String: Any]
            return ((root?["message"] as? [String: Any])?["data"] as? [String: String])?["type"]
        }
        XCTAssertEqual(pixelData, ["incoming_call", "call_ended"], "the Pixel rung through FCM, then told", file: file, line: line)
        XCTAssertEqual(try h.redis.cli(["ACL", "LOG"]).trimmingCharacters(in: .whitespacesAndNewlines), "", "nothing the \(language) producer sent was refused to it",
                       file: file, line: line)
    }
}
