import Foundation
import Glibc
import TestSupport
import XCTest

/// The retry schedule across real `pushgw run` processes (issue 4, "Must show" 1 and 2): gateways
/// killed with SIGKILL while retries are scheduled and moved, after which every retry fired
/// exactly once; and the Redis commands an idle gateway sends.
///
/// Both tests watch Redis from outside with `MONITOR` (redis-cli): it shows every command a
/// client sent (`[0 127.0.0.1:PORT]`) and every command a Lua script ran (`[0 lua]`), which is
/// how a schedule or a move step is seen without trusting the gateway's own counters.
final class RetryProcessTests: XCTestCase {
    /// A redis-server, the APNs simulator as a child process and a gateway config for app `acme`.
    private struct World {
        let redis: RedisServer
        let simulator: ChildProcess
        let simLog: String
        let dir: String
        let gatewayConfig: String
        let pushgw = packageRoot + "/.build/debug/pushgw"

        /// `extraApps` more apps (`app-0`…) with the same settings beside `acme`.
        init(scenario: String, voipRetry: String, extraApps: Int = 0) throws {
            redis = try RedisServer.start()
            let pki = try TestPKI.make()
            dir = pki.directory
            let simPort = freeLoopbackPort()
            simLog = dir + "/retry-apns.jsonl"
            try """
                { "cert_file": "server.pem", "key_file": "server.key", "token_keys": { "KEY1234567": "AuthKey.pub.pem" },
                  "team_id": "TEAM123456", "default_scenario": "\(scenario)", "log_file": "\(simLog)" }
                """.write(toFile: dir + "/retry-sim.json", atomically: true, encoding: .utf8)
            gatewayConfig = dir + "/retry-gw.json"
            let app = #"{ "bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 120, "retry": { "voip": \#(voipRetry) } }"#
            let apps = (["\"acme\": \(app)"] + (0..<extraApps).map { "\"app-\($0)\": \(app)" }).joined(separator: ", ")
            try """
                { "redis": { "url": "\(redis.url)" },
                  "apns": { "production": { "endpoint": "127.0.0.1:\(simPort)" }, "sandbox": { "endpoint": "127.0.0.1:\(simPort)" },
                            "ca_file": "ca.pem", "connections": 2 },
                  "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "AuthKey.p8" } },
                  "apps": { \(apps) } }
                """.write(toFile: gatewayConfig, atomically: true, encoding: .utf8)
            simulator = try ChildProcess(pushgw, ["simulator", "--config", dir + "/retry-sim.json", "--port", String(simPort)],
                                         captureOutput: false)
            try waitForPort(simPort)
        }

        func gateway(_ consumer: String, roles: String? = nil) throws -> ChildProcess {
            try ChildProcess(pushgw, ["run", "--config", gatewayConfig, "--consumer", consumer, "--log-level", "error"]
                                 + (roles.map { ["--role", $0] } ?? []), captureOutput: false)
        }

        /// `redis-cli MONITOR` into `file`, line-buffered so nothing is lost when it is stopped.
        func monitor(into file: String) throws -> ChildProcess {
            try ChildProcess("/bin/sh", ["-c", "exec stdbuf -oL redis-cli -p \(redis.port) monitor > '\(file)'"], captureOutput: false)
        }

        func integer(_ args: String...) -> Int {
            Int((try? redis.cli(args))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1
        }

        /// VoIP pushes the simulator answered, per token (after it stopped and flushed its log).
        func pushesPerToken() throws -> [String: Int] {
            var perToken: [String: Int] = [:]
            for line in try String(contentsOfFile: simLog, encoding: .utf8).split(separator: "\n") {
                if let obj = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                   let token = obj["token"] as? String { perToken[token, default: 0] += 1 }
            }
            return perToken
        }

        func stop() {
            simulator.stop()
            redis.stop()
        }
    }

    // MARK: Crash safety

    func testSigkillDuringSchedulingAndMovingFiresEveryRetryExactlyOnce() throws {
        let total = 800
        // Every VoIP push gets 503: each call makes exactly 3 attempts (2 retries, backoff up to
        // 200 and 400 ms), then, with no alert token, is dead-lettered `retries_exhausted: voip`.
        let world = try World(scenario: "unavailable", voipRetry: #"{ "max_attempts": 3, "base_ms": 200, "cap_ms": 1000 }"#)
        defer { world.stop() }
        let monitorFile = world.dir + "/retry-monitor.txt"
        let monitor = try world.monitor(into: monitorFile)
        defer { monitor.stop() }
        usleep(200_000)

        var generation = [0, 0]
        func start(_ slot: Int) throws -> ChildProcess {
            generation[slot] += 1
            return try world.gateway("gw-\(slot)-\(generation[slot])")
        }
        var gateways = [try start(0), try start(1)]
        defer { for g in gateways { g.stop() } }
        // A steady producer: 100 calls a second for 8 s, one VoIP token per call.
        let producer = try ChildProcess("python3", ["-c", """
            import json, time, redis
            r = redis.Redis(port=\(world.redis.port))
            start = time.time()
            for i in range(\(total)):
                r.xadd("pushgw:{acme}:calls", {"event": json.dumps({"v": 1, "id": f"rc-{i}", "type": "incoming_call",
                       "voip_token": f"{i:08x}"})})
                time.sleep(max(0, start + (i + 1) / 100 - time.time()))
            """], captureOutput: false)
        defer { producer.stop(signal: SIGKILL) }

        // Kill one gateway every 2 s, alternately, and start a fresh one in its place.
        let began = Date()
        var scheduledAtKill: [Int] = []
        for (i, at) in [1.5, 3.5, 5.5, 7.5].enumerated() {
            while Date().timeIntervalSince(began) < at { usleep(10_000) }
            scheduledAtKill.append(world.integer("ZCARD", "pushgw:{acme}:retry"))
            let slot = i % 2
            gateways[slot].stop(signal: SIGKILL)
            gateways[slot] = try start(slot)
        }
        func results() -> Int { world.integer("XLEN", "pushgw:{acme}:results") }
        while results() < total && Date().timeIntervalSince(began) < 60 { usleep(100_000) }
        XCTAssertEqual(results(), total, "every call has a result after 4 kills")
        for g in gateways { g.stop() }
        usleep(200_000)
        monitor.stop()
        XCTAssertGreaterThanOrEqual(scheduledAtKill.filter { $0 > 0 }.count, 3,
                                    "the kills landed while retries were scheduled: \(scheduledAtKill)")

        // Nothing left behind anywhere.
        XCTAssertEqual(world.integer("XLEN", "pushgw:{acme}:calls"), 0, "the calls stream is empty")
        XCTAssertEqual(world.integer("EXISTS", "pushgw:{acme}:retry", "pushgw:{acme}:retry:data", "pushgw:{acme}:retry:byCall"), 0,
                       "the schedule is empty")
        XCTAssertEqual(world.integer("ZCARD", "pushgw:retry-due"), 0, "and so is the due index")

        // What Redis saw: every schedule and every move, from MONITOR.
        let check = try runCommand("python3", ["-c", """
            import json, re, collections, redis
            tok = re.compile(r'"((?:[^"\\\\]|\\\\.)*)"')
            def unq(s): return s.encode('latin-1').decode('unicode_escape')
            zadd, zrem, moves = collections.Counter(), collections.Counter(), collections.Counter()
            for line in open("\(monitorFile)", encoding="latin-1"):
                if "[0 lua]" not in line: continue
                a = tok.findall(line)
                if len(a) < 2: continue
                cmd, key = a[0].upper(), a[1]
                if cmd == "ZADD" and key == "pushgw:{acme}:retry": zadd[a[3]] += 1
                elif cmd == "ZREM" and key == "pushgw:{acme}:retry": zrem[a[2]] += 1
                elif cmd == "XADD" and key == "pushgw:{acme}:calls" and "retry" in a:
                    state = json.loads(unq(a[a.index("retry") + 1]))
                    moves[(state["id"], state["made"])] += 1
            r = redis.Redis(port=\(world.redis.port), decode_responses=True)
            results = [json.loads(f["result"]) for _, f in r.xrange("pushgw:{acme}:results")]
            ids = collections.Counter(x["id"] for x in results)
            outcomes = collections.Counter((x["outcome"], x.get("reason")) for x in results)
            attempts = collections.Counter(len(x["attempts"]) for x in results)
            want = {(f"rc-{i}", m) for i in range(\(total)) for m in (1, 2)}
            print(json.dumps({
              "scheduled": sum(zadd.values()), "scheduled_twice": sum(1 for v in zadd.values() if v > 1),
              "moved": sum(zrem.values()), "moved_twice": sum(1 for v in zrem.values() if v > 1),
              "scheduled_not_moved": len(set(zadd) - set(zrem)), "moved_not_scheduled": len(set(zrem) - set(zadd)),
              "retry_entries": sum(moves.values()), "retry_entries_twice": sum(1 for v in moves.values() if v > 1),
              "retries_missing": len(want - set(moves)), "retries_unexpected": len(set(moves) - want),
              "ids": len(ids), "max_results_per_id": max(ids.values()),
              "outcomes": {f"{o}/{r}": n for (o, r), n in outcomes.items()}, "attempts": dict(attempts)}))
            """])
        XCTAssertEqual(check.0, 0, check.2)
        let figures = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(check.1.utf8)) as? [String: Any], check.1)
        func n(_ key: String) -> Int { figures[key] as? Int ?? -1 }
        XCTAssertEqual(n("scheduled"), 2 * total, "two retries scheduled per call, no more, no fewer: \(check.1)")
        XCTAssertEqual(n("scheduled_twice"), 0, "no retry id scheduled twice")
        XCTAssertEqual(n("moved"), 2 * total, "every scheduled retry moved back")
        XCTAssertEqual(n("moved_twice"), 0, "none moved twice")
        XCTAssertEqual(n("scheduled_not_moved"), 0, "none lost in the schedule")
        XCTAssertEqual(n("moved_not_scheduled"), 0)
        XCTAssertEqual(n("retry_entries"), 2 * total, "one calls entry per moved retry")
        XCTAssertEqual(n("retry_entries_twice"), 0, "each (call, attempt) came back exactly once")
        XCTAssertEqual(n("retries_missing"), 0, "each call's first and second retry came back")
        XCTAssertEqual(n("retries_unexpected"), 0)
        XCTAssertEqual(n("ids"), total, "a result for every call")
        XCTAssertEqual(n("max_results_per_id"), 1, "exactly one result per call")
        XCTAssertEqual(figures["outcomes"] as? [String: Int], ["dead_lettered/retries_exhausted: voip": total],
                       "every call made its 3 attempts and no more")
        XCTAssertEqual(figures["attempts"] as? [String: Int], ["3": total], "each record lists the policy's 3 attempts")

        world.simulator.stop()  // flushes its request log
        let perToken = try world.pushesPerToken()
        XCTAssertEqual(perToken.count, total, "every call reached APNs")
        XCTAssertTrue(perToken.values.allSatisfy { $0 >= 3 }, "every token got its 3 attempts")
        let resent = perToken.values.reduce(0) { $0 + $1 - 3 }
        print("retry crash test: \(total) calls, 4 SIGKILLs (retries scheduled at each kill: \(scheduledAtKill)); \(n("scheduled")) retries scheduled and \(n("moved")) moved, each exactly once; \(resent) pushes re-sent after a kill (an attempt in flight when its gateway died)")
    }

    // MARK: Idle polling

    /// Counts what an idle `pushgw run` (roles router and retry, 100 apps, nothing to do) sends
    /// over 4 s, by connection: the mover's looks at the due index (about 20/s), the router's
    /// blocking read (1/s: one XREADGROUP over every app), its heartbeat (1/s) and its read of
    /// the consumer registry (1/s); the per-app take-over sweep runs only when a consumer died,
    /// or every 30 s (outside the window here). Commands run inside Lua scripts are not counted:
    /// they are not sent.
    func testAnIdleGatewayPollsRedisAboutTwentyTimesASecond() throws {
        let world = try World(scenario: "ok", voipRetry: #"{ "max_attempts": 3, "base_ms": 100, "cap_ms": 1000 }"#, extraApps: 99)
        defer { world.stop() }
        let gateway = try world.gateway("idle-1")
        defer { gateway.stop() }
        // Let it connect and settle (script loads, group creation) before counting.
        var waited = 0
        while world.integer("ZCARD", "pushgw:consumers") < 1 && waited < 500 { usleep(10_000); waited += 1 }
        usleep(1_500_000)
        let file = world.dir + "/idle-monitor.txt"
        let monitor = try world.monitor(into: file)
        usleep(4_000_000)
        monitor.stop()
        let clients = try world.redis.cli(["CLIENT", "LIST"])
        var names: [String: String] = [:]  // addr → name
        for line in clients.split(separator: "\n") {
            let fields = Dictionary(line.split(separator: " ").compactMap { part -> (String, String)? in
                let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
                return kv.count == 2 ? (kv[0], kv[1]) : nil
            }, uniquingKeysWith: { a, _ in a })
            if let addr = fields["addr"] { names[addr] = fields["name"].flatMap { $0.isEmpty ? nil : $0 } ?? "unnamed" }
        }
        var perClient: [String: Int] = [:], perCommand: [String: Int] = [:]
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        for line in lines where !line.contains("[0 lua]") {
            guard let open = line.firstIndex(of: "["), let close = line.firstIndex(of: "]") else { continue }
            let addr = String(line[line.index(after: open)..<close].split(separator: " ").last ?? "")
            let command = line[line.index(after: close)...].split(separator: " ").first.map {
                $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).uppercased() } ?? "?"
            perClient[names[addr] ?? addr, default: 0] += 1
            perCommand[command, default: 0] += 1
        }
        let total = perClient.values.reduce(0, +)
        let perSecond = Double(total) / 4
        let moverPerSecond = Double(perClient["pushgw-retry"] ?? 0) / 4
        print("idle gateway (100 apps, roles router,retry) over 4 s: \(String(format: "%.1f", perSecond)) commands/s sent to Redis; by connection \(perClient); by command \(perCommand)")
        XCTAssertGreaterThan(moverPerSecond, 10, "the mover does look (the count is real): \(perClient)")
        XCTAssertLessThanOrEqual(moverPerSecond, 22, "the idle mover looks about 20 times a second: \(perClient)")
        XCTAssertLessThanOrEqual(perSecond, 25, "an idle gateway sends about 20 commands/s in total (mover ~20, router ~3, whatever the number of apps): \(perClient)")
    }
}
