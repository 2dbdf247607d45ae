import Foundation
import Glibc
import TestSupport
import XCTest

/// Webhooks end to end (docs/webhooks.md): `pushgw run` from the built binary POSTs the results
/// of an app with `webhooks` to a real receiver on loopback, examples/webhooks/receiver.py,
/// which checks each signature with the Python snippet of docs/webhooks.md and writes one line
/// per delivery.
final class WebhookProcessTests: XCTestCase {
    /// A world with one app whose results go to a receiver on `port`.
    private struct Setup {
        let world: ProcessWorld
        let config: String
        let secret: String
        let port: Int
        let received: String
        /// The gateway's admin endpoint (`/metrics`).
        let adminPort: Int
    }

    /// `leastPrivilege`: the gateway and the command line connect as the ACL user of
    /// docs/operations.md ("The least ACL permissions pushgw needs").
    private func makeWorld(events: String = "", leastPrivilege: Bool = false) throws -> Setup {
        let world = try ProcessWorld()
        var redisURL: String?
        if leastPrivilege {
            _ = try world.redis.cli(["ACL", "SETUSER", "pushgw", "reset", "on", ">least-privilege-SECRET"] + DocumentedACL.gateway())
            redisURL = "redis://pushgw:least-privilege-SECRET@127.0.0.1:\(world.redis.port)/0"
        }
        let secret = world.directory + "/webhook-secret"
        try "9f2c4e1a7b3d5f60812a4c6e8b0d2f4a".write(toFile: secret, atomically: true, encoding: .utf8)
        chmod(secret, 0o600)
        let port = freeLoopbackPort()
        let hooks = #""webhooks": { "url": "http://127.0.0.1:\#(port)/pushgw", "secret_file": "\#(secret)", "allow_private_targets": true\#(events) }"#
        let adminPort = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(hooks)], admin: #""listen": "127.0.0.1:\#(adminPort)""#,
                                           redisURL: redisURL)
        let check = try runCommand(world.pushgw, ["config", "check", config])
        XCTAssertEqual(check.0, 0, "config check passes: \(check.1) \(check.2)")
        return Setup(world: world, config: config, secret: secret, port: port, received: world.directory + "/received.jsonl",
                     adminPort: adminPort)
    }

    private func receiver(_ s: Setup, status: Int = 204) throws -> ChildProcess {
        let child = try ChildProcess("python3", [packageRoot + "/examples/webhooks/receiver.py", String(s.port), s.secret, s.received,
                                                 String(status)])
        try waitForPort(s.port)
        return child
    }

    /// The receiver's lines so far.
    private func received(_ s: Setup) -> [[String: Any]] {
        textSoFar(s.received).split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Adds `events` (JSON objects) to the app's calls stream.
    private func send(_ s: Setup, _ events: [String]) throws {
        for e in events { _ = try s.world.redis.cli(["XADD", "pushgw:{acme}:calls", "*", "event", e]) }
    }

    /// The results stream: (entry id, result JSON text, result object), in order.
    private func results(_ s: Setup) throws -> [(id: String, text: String, object: [String: Any])] {
        let dump = try runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(s.world.redis.port), decode_responses=True)
            print(json.dumps([[i, f["result"]] for i, f in r.xrange("pushgw:{acme}:results")]))
            """])
        let rows = (try JSONSerialization.jsonObject(with: Data(dump.1.utf8)) as? [[String]]) ?? []
        return rows.map { ($0[0], $0[1], (try? JSONSerialization.jsonObject(with: Data($0[1].utf8)) as? [String: Any]) ?? [:]) }
    }

    /// Runs each verification snippet of docs/webhooks.md (Python always; Node and Go when
    /// installed) on `delivery`'s raw body and signature: it must verify, and refuse the body
    /// with one byte changed. Returns the languages run.
    private func verifyWithTheDocumentedSnippets(_ s: Setup, _ delivery: [String: Any]) throws -> [String] {
        let doc = try String(contentsOfFile: packageRoot + "/docs/webhooks.md", encoding: .utf8)
        func block(_ language: String) throws -> String {
            guard let start = doc.range(of: "```\(language)\n"), let end = doc.range(of: "```", range: start.upperBound..<doc.endIndex)
            else { throw TestSupportError("no \(language) block in docs/webhooks.md") }
            return String(doc[start.upperBound..<end.lowerBound])
        }
        let body = try XCTUnwrap(delivery["body"] as? String)
        let signature = try XCTUnwrap(delivery["signature"] as? String)
        let bodyFile = s.world.directory + "/body", alteredFile = s.world.directory + "/altered"
        try body.write(toFile: bodyFile, atomically: true, encoding: .utf8)
        try body.replacingOccurrences(of: "\"outcome\":\"", with: "\"outcome\":\"x").write(toFile: alteredFile, atomically: true,
                                                                                         encoding: .utf8)
        var programs: [(language: String, file: String, run: [String])] = []
        let python = s.world.directory + "/verify.py"
        try (block("python") + """

            import sys
            secret = open(sys.argv[1], "rb").read().strip()
            print(verify(secret, sys.argv[2], open(sys.argv[3], "rb").read()))
            """).write(toFile: python, atomically: true, encoding: .utf8)
        programs.append(("Python", python, ["python3", python]))
        if (try? which("node")) != nil {
            let node = s.world.directory + "/verify.js"
            try (block("javascript") + """

                const fs = require("fs");
                const secret = fs.readFileSync(process.argv[2], "utf8").trim();
                console.log(verify(secret, process.argv[3], fs.readFileSync(process.argv[4])) ? "True" : "False");
                """).write(toFile: node, atomically: true, encoding: .utf8)
            programs.append(("Node", node, ["node", node]))
        }
        if (try? which("go")) != nil {
            let go = s.world.directory + "/verify.go"
            try (block("go").replacingOccurrences(of: "package webhook", with: "package main")
                .replacingOccurrences(of: "import (", with: "import (\n\t\"fmt\"\n\t\"os\"") + """

                func main() {
                	secret, _ := os.ReadFile(os.Args[1])
                	body, _ := os.ReadFile(os.Args[3])
                	if Verify([]byte(strings.TrimSpace(string(secret))), os.Args[2], body, 5*time.Minute) {
                		fmt.Println("True")
                	} else {
                		fmt.Println("False")
                	}
                }
                """).write(toFile: go, atomically: true, encoding: .utf8)
            programs.append(("Go", go, ["go", "run", go]))
        }
        let env = ["HOME": s.world.directory, "GOCACHE": s.world.directory + "/go-cache", "GO111MODULE": "off"]
        for p in programs {
            let good = try runCommand(p.run[0], Array(p.run.dropFirst()) + [s.secret, signature, bodyFile], environment: env)
            XCTAssertEqual(good.1.trimmingCharacters(in: .whitespacesAndNewlines), "True", "\(p.language) verifies: \(good.2)")
            let bad = try runCommand(p.run[0], Array(p.run.dropFirst()) + [s.secret, signature, alteredFile], environment: env)
            XCTAssertEqual(bad.1.trimmingCharacters(in: .whitespacesAndNewlines), "False", "\(p.language) refuses an altered body: \(bad.2)")
        }
        return programs.map(\.language)
    }

    private static func call(_ id: String, token: String) -> String {
        #"{"v": 1, "id": "\#(id)", "type": "incoming_call", "voip_token": "\#(token)"}"#
    }

    func testEveryResultIsDeliveredOnceWithASignatureTheReceiverVerifies() throws {
        let s = try makeWorld()
        defer { s.world.stop() }
        let hook = try receiver(s)
        defer { hook.stop() }
        let gateway = try s.world.gateway(config: s.config, consumer: "gw-hooks", log: s.world.directory + "/gw.log")
        try send(s, (0..<20).map { WebhookProcessTests.call("hook-\($0)", token: String(format: "%08x", 0xa000 + $0)) })
        waitUntil("20 deliveries at the receiver", timeoutMs: 60_000) { self.received(s).count >= 20 }
        waitUntil("the webhooks stream emptied", timeoutMs: 30_000) { s.world.integer("XLEN", "pushgw:{acme}:webhooks") == 0 }
        let got = received(s)
        let results = try results(s)
        XCTAssertEqual(results.count, 20)
        XCTAssertEqual(got.count, 20, "each result delivered once")
        XCTAssertTrue(got.allSatisfy { $0["verified"] as? Bool == true }, "every signature verifies: \(got.filter { $0["verified"] as? Bool != true })")
        XCTAssertEqual(Set(got.compactMap { $0["idempotency_key"] as? String }), Set(results.map(\.id)),
                       "the Idempotency-Key of each delivery is its results entry id")
        for r in results {
            let delivery = got.first { $0["idempotency_key"] as? String == r.id }
            XCTAssertEqual(delivery?["result"] as? NSDictionary, r.object as NSDictionary, "the body is the result producers read")
        }
        XCTAssertEqual(s.world.integer("XLEN", "pushgw:{acme}:webhooks:dead"), 0)
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: s.adminPort).body
        XCTAssertTrue(metrics.contains(#"pushgw_webhooks_sent_total{app="acme",status="204"} 20"#), metrics)
        XCTAssertTrue(metrics.contains(#"pushgw_webhook_latency_seconds_count{app="acme"} 20"#), "latency per attempt")
        XCTAssertTrue(metrics.contains(#"pushgw_webhook_failures_total{app="acme",result="dead_lettered"} 0"#))
        XCTAssertTrue(WebhookProcessTests.mapsLibcurl(gateway.pid), "a gateway that posts webhooks has opened libcurl")
        XCTAssertEqual(gateway.stop(), 0)
        let checked = try verifyWithTheDocumentedSnippets(s, got[0])
        print("webhooks: 20 of 20 results delivered, 20 signatures verified by the receiver; docs/webhooks.md's \(checked.joined(separator: ", ")) snippets verify a delivery and refuse it altered")
    }

    /// Whether process `pid` has libcurl mapped.
    private static func mapsLibcurl(_ pid: Int32) -> Bool {
        ((try? mappedFiles(pid: pid)) ?? "").contains("libcurl")
    }

    /// libcurl is opened on first use, not linked (CCurlOptions): a gateway none of whose apps
    /// sends webhooks routes a call without mapping it or any of the ~25 libraries it brings.
    func testAGatewayWithoutWebhooksNeverOpensLibcurl() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()])
        let gateway = try world.gateway(config: config, consumer: "gw-plain", log: world.directory + "/gw.log")
        try send(Setup(world: world, config: config, secret: "", port: 0, received: "", adminPort: 0),
                 [WebhookProcessTests.call("plain-1", token: "0000c001")])
        waitUntil("the call's result", timeoutMs: 60_000) { world.results() >= 1 }
        let maps = try mappedFiles(pid: gateway.pid)
        XCTAssertTrue(maps.contains("libhiredis"), "the maps of the running gateway were read whole: \(maps.suffix(300))")
        XCTAssertFalse(maps.contains("libcurl"), "no libcurl in a gateway without webhooks")
        XCTAssertEqual(gateway.stop(), 0)
    }

    /// The receiver is down for 30 s; meanwhile the gateway is SIGKILLed and started again
    /// under the same consumer name. Every result arrives once the receiver is back, each
    /// call's results (its own and its cancel's) in the order of the results stream. The
    /// gateway runs as the documented least-privileged ACL user, long enough for its touches
    /// and take-over rounds, and Redis refuses it nothing.
    func testReceiverDownAndGatewayKilledLosesNoDeliveryAndKeepsEachCallsOrder() throws {
        let s = try makeWorld(leastPrivilege: true)
        defer { s.world.stop() }
        let log = s.world.directory + "/gw.log"
        let first = try s.world.gateway(config: s.config, consumer: "gw-hooks", log: log)
        let downSince = Date()
        let calls = 10
        try send(s, (0..<calls).map { WebhookProcessTests.call("order-\($0)", token: String(format: "%08x", 0xb000 + $0)) })
        waitUntil("every call's result", timeoutMs: 60_000) { s.world.results() >= calls }
        try send(s, (0..<calls).map { #"{"v": 1, "id": "order-\#($0)", "type": "call_cancelled"}"# })
        waitUntil("every cancel's result", timeoutMs: 60_000) { s.world.results() >= 2 * calls }
        waitUntil("the first attempts failed", timeoutMs: 60_000) {
            !ProcessWorld.logLines(log, message: "webhook not delivered; retried").isEmpty
        }
        first.stop(signal: SIGKILL)
        XCTAssertEqual(s.world.integer("XLEN", "pushgw:{acme}:webhooks"), 2 * calls, "every delivery still queued after the kill")
        let second = try s.world.gateway(config: s.config, consumer: "gw-hooks", log: s.world.directory + "/gw-2.log")
        let downFor = 30 - Date().timeIntervalSince(downSince)
        if downFor > 0 { usleep(UInt32(downFor * 1_000_000)) }
        XCTAssertTrue(received(s).isEmpty, "nothing arrived while the receiver was down")
        let hook = try receiver(s)
        defer { hook.stop() }
        waitUntil("\(2 * calls) deliveries after the receiver came back", timeoutMs: 180_000) { self.received(s).count >= 2 * calls }
        waitUntil("the webhooks stream emptied", timeoutMs: 30_000) { s.world.integer("XLEN", "pushgw:{acme}:webhooks") == 0 }
        let got = received(s)
        let results = try results(s)
        XCTAssertEqual(got.count, 2 * calls, "none lost, none twice")
        XCTAssertTrue(got.allSatisfy { $0["verified"] as? Bool == true })
        XCTAssertEqual(Set(got.compactMap { $0["idempotency_key"] as? String }), Set(results.map(\.id)))
        for c in 0..<calls {
            let id = "order-\(c)"
            let expected = results.filter { $0.object["id"] as? String == id }.map(\.id)
            XCTAssertEqual(expected.count, 2, "call \(id) has two results: its own and its cancel's")
            let arrived = got.filter { ($0["result"] as? [String: Any])?["id"] as? String == id }.compactMap { $0["idempotency_key"] as? String }
            XCTAssertEqual(arrived, expected, "call \(id)'s results arrive in the results stream's order")
        }
        XCTAssertEqual(second.stop(), 0)
        XCTAssertEqual(try s.world.redis.cli(["ACL", "LOG"]).trimmingCharacters(in: .whitespacesAndNewlines), "",
                       "nothing refused to the least-privileged user")
        let retried = ProcessWorld.logLines(log, message: "webhook not delivered; retried").count
        print("webhooks: receiver down 30 s, gateway SIGKILLed and restarted meanwhile: \(got.count) of \(2 * calls) results delivered after, none lost, each call's in order (\(retried) retry warnings before the kill)")
    }

    /// A receiver answering 400: one attempt, then the webhook dead letters; `pushgw webhooks
    /// replay` puts it back and it is delivered, with the same Idempotency-Key.
    func testAFourHundredIsDeadLetteredAfterOneAttemptAndTheCLIReplaysIt() throws {
        let s = try makeWorld()
        defer { s.world.stop() }
        var hook = try receiver(s, status: 400)
        let gateway = try s.world.gateway(config: s.config, consumer: "gw-hooks", log: s.world.directory + "/gw.log")
        try send(s, [WebhookProcessTests.call("refused-1", token: "0000c001")])
        waitUntil("the webhook dead letter", timeoutMs: 60_000) { s.world.integer("XLEN", "pushgw:{acme}:webhooks:dead") == 1 }
        XCTAssertEqual(received(s).count, 1, "one attempt, no retry of a 400")
        XCTAssertEqual(received(s).first?["status"] as? Int, 400)
        let listed = try runCommand(s.world.pushgw, ["webhooks", "dead", "acme", "--json", "--config", s.config])
        XCTAssertEqual(listed.0, 0, listed.2)
        let dead = try JSONSerialization.jsonObject(with: Data(listed.1.utf8)) as? [String: Any]
        XCTAssertEqual(dead?["reason"] as? String, "status 400")
        XCTAssertEqual(dead?["attempts"] as? Int, 1)
        XCTAssertEqual((dead?["result"] as? [String: Any])?["id"] as? String, "refused-1")
        let key = received(s).first?["idempotency_key"] as? String
        XCTAssertEqual(dead?["results_entry"] as? String, key)

        hook.stop()
        hook = try receiver(s, status: 200)
        defer { hook.stop() }
        let replay = try runCommand(s.world.pushgw, ["webhooks", "replay", "acme", "--config", s.config])
        XCTAssertEqual(replay.0, 0, replay.2)
        XCTAssertTrue(replay.1.contains("replayed 1 webhook delivery"), replay.1)
        let audit = try runCommand(s.world.pushgw, ["audit", "--json", "--config", s.config])
        XCTAssertTrue(audit.1.contains(#""verb":"webhooks replay""#) && audit.1.contains(#""done":1"#), "the replay is audited: \(audit.1) \(audit.2)")
        waitUntil("the replayed delivery", timeoutMs: 60_000) { self.received(s).count >= 2 }
        waitUntil("the webhooks stream emptied", timeoutMs: 30_000) { s.world.integer("XLEN", "pushgw:{acme}:webhooks") == 0 }
        let again = received(s)[1]
        XCTAssertEqual(again["status"] as? Int, 200)
        XCTAssertEqual(again["verified"] as? Bool, true)
        XCTAssertEqual(again["idempotency_key"] as? String, key, "a replay keeps the Idempotency-Key")
        XCTAssertEqual(s.world.integer("XLEN", "pushgw:{acme}:webhooks:dead"), 0)
        let metrics = try LoopbackHTTP.blockingRequest("/metrics", port: s.adminPort).body
        XCTAssertTrue(metrics.contains(#"pushgw_webhooks_sent_total{app="acme",status="400"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"pushgw_webhook_failures_total{app="acme",result="dead_lettered"} 1"#), metrics)
        XCTAssertEqual(gateway.stop(), 0)
    }
}
