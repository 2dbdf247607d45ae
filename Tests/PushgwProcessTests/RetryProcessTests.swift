import Foundation
import Glibc
import TestSupport
import XCTest

/// The retry schedule across real `pushgw run` processes (docs/architecture.md): gateways
/// killed with SIGKILL while retries are scheduled and moved, after which every retry fired
/// exactly once; and the Redis commands an idle gateway sends.
///
/// Both tests watch Redis from outside with `MONITOR` (redis-cli): it shows every command a
/// client sent (`[0 127.0.0.1:PORT]`) and every command a Lua script ran (`[0 lua]`), which is
/// how a schedule or a move step is seen without trusting the gateway's own counters.
final class RetryProcessTests: XCTestCase {
    /// Redis, the simulator answering every push as `scenario`, and a gateway config with app
    /// `acme` (plus `extraApps` apps `app-0`… with the same settings) whose VoIP retry policy
    /// is `voipRetry`.
    private func makeWorld(scenario: String, voipRetry: String, extraApps: Int = 0) throws -> (ProcessWorld, String) {
        let world = try ProcessWorld(simulator: #""default_scenario": "\#(scenario)""#)
        let app = ProcessWorld.app(#""ring_timeout_s": 120, "retry": { "voip": \#(voipRetry) }"#)
        var apps = ["acme": app]
        for i in 0..<extraApps { apps["app-\(i)"] = app }
        return (world, try world.writeConfig(apps: apps, apns: #""connections": 2"#))
    }

    /// `redis-cli MONITOR` into `file`, line-buffered so nothing is lost when it is stopped;
    /// returns once it sees commands.
    private func startMonitor(_ world: ProcessWorld, into file: String) throws -> ChildProcess {
        let monitor = try ChildProcess("/bin/sh", ["-c", "exec stdbuf -oL redis-cli -p \(world.redis.port) monitor > '\(file)'"],
                                       captureOutput: false)
        try waitUntil("MONITOR to show a command") {
            _ = try world.redis.cli(["ECHO", "monitor-ready"])
            return textSoFar(file).contains("monitor-ready")
        }
        return monitor
    }

    // MARK: Crash safety

    func testSigkillDuringSchedulingAndMovingFiresEveryRetryExactlyOnce() throws {
        let total = 800
        // Every VoIP push gets 503: each call makes exactly 3 attempts (2 retries, backoff up to
        // 200 and 400 ms), then, with no alert token, is dead-lettered `retries_exhausted: voip`.
        let (world, config) = try makeWorld(scenario: "unavailable", voipRetry: #"{ "max_attempts": 3, "base_ms": 200, "cap_ms": 1000 }"#)
        defer { world.stop() }
        let monitorFile = world.directory + "/retry-monitor.txt"
        let monitor = try startMonitor(world, into: monitorFile)
        defer { monitor.stop() }

        var generation = [0, 0]
        func start(_ slot: Int) throws -> ChildProcess {
            generation[slot] += 1
            return try world.gateway(config: config, consumer: "gw-\(slot)-\(generation[slot])", arguments: ["--log-level", "error"])
        }
        var gateways = [try start(0), try start(1)]
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

        // Kill one gateway at each fifth of the results, alternately, at a moment when retries
        // are scheduled, and start a fresh one in its place.
        var scheduledAtKill: [Int] = []
        for (i, fifth) in (1...4).enumerated() {
            var scheduled = 0
            waitUntil("\(fifth * total / 5) results with retries scheduled", timeoutMs: 60_000) {
                scheduled = world.integer("ZCARD", "pushgw:{acme}:retry")
                return world.results() >= fifth * total / 5 && scheduled > 0
            }
            scheduledAtKill.append(scheduled)
            let slot = i % 2
            gateways[slot].stop(signal: SIGKILL)
            gateways[slot] = try start(slot)
        }
        waitUntil("a result for every call after 4 kills", timeoutMs: 120_000) { world.results() >= total }
        XCTAssertEqual(world.results(), total, "every call has a result after 4 kills")
        for g in gateways { XCTAssertEqual(g.stop(), 0) }
        producer.waitForExit()
        // MONITOR has seen every command once its ECHO comes back through it.
        _ = try world.redis.cli(["ECHO", "monitor-done"])
        waitUntil("MONITOR to catch up") { textSoFar(monitorFile).contains("monitor-done") }
        monitor.stop()
        XCTAssertEqual(scheduledAtKill.filter { $0 > 0 }.count, 4, "each kill landed while retries were scheduled: \(scheduledAtKill)")

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

        var perToken: [String: Int] = [:]
        for request in try world.stopSimulator() {
            if let token = request["token"] as? String { perToken[token, default: 0] += 1 }
        }
        XCTAssertEqual(perToken.count, total, "every call reached APNs")
        XCTAssertTrue(perToken.values.allSatisfy { $0 >= 3 }, "every token got its 3 attempts")
        let resent = perToken.values.reduce(0) { $0 + $1 - 3 }
        print("retry crash test: \(total) calls, 4 SIGKILLs (retries scheduled at each kill: \(scheduledAtKill)); \(n("scheduled")) retries scheduled and \(n("moved")) moved, each exactly once; \(resent) pushes re-sent after a kill (an attempt in flight when its gateway died)")
    }

    // MARK: Idle polling

    /// Counts what an idle `pushgw run` (roles router and retry, 100 apps, nothing to do) sends
    /// between two of its heartbeats (one a second, on its own clock), by connection: the
    /// mover's looks at the due index (about 20 per interval), the router's blocking read (one
    /// XREADGROUP over every app), its heartbeat and its read of the consumer registry; the
    /// per-app take-over sweep runs only when a consumer died, or every 30 s (outside the
    /// window here). Commands run inside Lua scripts are not counted: they are not sent.
    /// Counting per heartbeat interval rather than per second of the test's clock keeps the
    /// figures true on a loaded machine: a slow gateway sends fewer commands, never more.
    func testAnIdleGatewayPollsRedisAboutTwentyTimesASecond() throws {
        let (world, config) = try makeWorld(scenario: "ok", voipRetry: #"{ "max_attempts": 3, "base_ms": 100, "cap_ms": 1000 }"#,
                                            extraApps: 99)
        defer { world.stop() }
        let gateway = try world.gateway(config: config, consumer: "idle-1", arguments: ["--log-level", "error"])
        waitUntil("the gateway's first heartbeat") { world.integer("ZCARD", "pushgw:consumers") >= 1 }
        let file = world.directory + "/idle-monitor.txt"
        let monitor = try startMonitor(world, into: file)
        // A heartbeat is the registry script's ZADD, run inside Lua.
        func isHeartbeat(_ line: Substring) -> Bool { line.contains("[0 lua]") && line.contains(#""ZADD" "pushgw:consumers""#) }
        let intervals = 4
        waitUntil("\(intervals + 2) heartbeats in MONITOR's output", timeoutMs: 60_000) {
            let text = textSoFar(file)
            return text.split(separator: "\n").filter(isHeartbeat).count >= intervals + 2
        }
        monitor.stop()
        let clients = try world.redis.cli(["CLIENT", "LIST"])
        XCTAssertEqual(gateway.stop(), 0)
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        // The first interval may still hold start-up work (script loads, group creation).
        let beats = lines.indices.filter { isHeartbeat(lines[$0]) }
        let window = lines[beats[1]..<beats[1 + intervals]]
        var names: [String: String] = [:]  // addr → name
        for line in clients.split(separator: "\n") {
            let fields = Dictionary(line.split(separator: " ").compactMap { part -> (String, String)? in
                let kv = part.split(separator: "=", maxSplits: 1).map(String.init)
                return kv.count == 2 ? (kv[0], kv[1]) : nil
            }, uniquingKeysWith: { a, _ in a })
            if let addr = fields["addr"] { names[addr] = fields["name"].flatMap { $0.isEmpty ? nil : $0 } ?? "unnamed" }
        }
        var perClient: [String: Int] = [:], perCommand: [String: Int] = [:]
        for line in window where !line.contains("[0 lua]") {
            guard let open = line.firstIndex(of: "["), let close = line.firstIndex(of: "]") else { continue }
            let addr = String(line[line.index(after: open)..<close].split(separator: " ").last ?? "")
            let command = line[line.index(after: close)...].split(separator: " ").first.map {
                $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).uppercased() } ?? "?"
            perClient[names[addr] ?? addr, default: 0] += 1
            perCommand[command, default: 0] += 1
        }
        let total = perClient.values.reduce(0, +)
        let mover = perClient["pushgw-retry"] ?? 0
        print("idle gateway (100 apps, roles router,retry) over \(intervals) heartbeat intervals: \(total) commands sent to Redis; by connection \(perClient); by command \(perCommand)")
        XCTAssertGreaterThanOrEqual(mover, intervals, "the mover does look (the count is real): \(perClient)")
        // The bounds leave room for an interval stretched by a late timer; polling per app would
        // send at least 100 commands per interval.
        XCTAssertLessThanOrEqual(mover, 25 * intervals, "the idle mover looks about 20 times a second: \(perClient)")
        XCTAssertLessThanOrEqual(total, 30 * intervals,
                                 "an idle gateway sends about 22 commands a second in total (mover ~20, router ~3, whatever the number of apps): \(perClient)")
        XCTAssertLessThanOrEqual(perCommand["XREADGROUP", default: 0], 2 * intervals, "one blocking read a second over every app: \(perCommand)")
    }
}
