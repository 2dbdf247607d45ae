import Foundation
import Glibc
import TestSupport
import XCTest

/// Real processes for the fault tests: a redis-server, the APNs simulator (`pushgw simulator`)
/// and any number of `pushgw run` gateways sharing one config, with helpers that write calls
/// and read results as a producer would (redis-cli and Python's redis package) and read what
/// the simulator received from its request log.
///
/// Every call of `call(_:)` uses its own VoIP token (the call id in hex), so the simulator's
/// log tells how many pushes each call got. Everything started is stopped by `close()`.
final class GatewayFleet {
    /// One `pushgw run` process.
    final class Gateway {
        let consumer: String
        let process: ChildProcess
        /// Its stdout and stderr.
        let log: String
        let adminPort: Int

        init(consumer: String, process: ChildProcess, log: String, adminPort: Int) {
            self.consumer = consumer
            self.process = process
            self.log = log
            self.adminPort = adminPort
        }

        /// Its log lines whose `msg` is `message`.
        func lines(_ message: String) -> [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                .filter { $0.contains("\"msg\":\"\(message)\"") }
        }

        var logBytes: Int { (try? FileManager.default.attributesOfItem(atPath: log)[.size] as? Int) ?? 0 }
    }

    let redis: RedisServer
    let pki: TestPKI
    let directory: String
    let simulatorPort: Int
    /// The simulator's JSONL request log (docs/simulator.md).
    let simulatorLog: String
    private(set) var simulator: ChildProcess?
    private(set) var gateways: [Gateway] = []
    let pushgw: String
    let configFile: String

    /// - Parameters:
    ///   - simulator: extra keys of the simulator's config (JSON members, comma-first).
    ///   - apns: extra keys of the gateway config's `apns` section.
    ///   - app: extra keys of app `acme`.
    ///   - otherApps: more apps (JSON members, comma-first); credential `revoked` is a key the
    ///     simulator refuses (403 InvalidProviderToken), as if revoked at Apple.
    init(simulator: String = "", apns: String = "", app: String = "", otherApps: String = "",
         redisArguments: [String] = []) throws {
        pushgw = try builtPushgw()
        redis = try RedisServer.start(extraArguments: redisArguments)
        pki = try TestPKI.shared()
        directory = makeTemporaryDirectory("pushgw-fleet")
        simulatorPort = freeLoopbackPort()
        simulatorLog = directory + "/apns.jsonl"
        try """
            { "cert_file": "\(pki.serverCert)", "key_file": "\(pki.serverKey)",
              "token_keys": { "KEY1234567": "\(pki.jwtPublicKey)" }, "team_id": "TEAM123456",
              "log_file": "\(simulatorLog)" \(simulator) }
            """.write(toFile: directory + "/sim.json", atomically: true, encoding: .utf8)
        configFile = directory + "/gw.json"
        try """
            { "redis": { "url": "\(redis.url)" },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simulatorPort)" },
                        "sandbox": { "endpoint": "127.0.0.1:\(simulatorPort)" },
                        "ca_file": "\(pki.caCert)" \(apns) },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" },
                               "revoked": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.otherJWTKey)" } },
              "apps": { "acme": { "bundle_id": "com.example.app", "credential": "k", "environment": "production"
                                  \(app) } \(otherApps) } }
            """.write(toFile: configFile, atomically: true, encoding: .utf8)
        try startSimulator()
    }

    func close() {
        for gw in gateways { gw.process.stop(signal: SIGKILL) }
        gateways.removeAll()
        if let simulator { kill(simulator.pid, SIGCONT) }
        simulator?.stop(signal: SIGKILL)
        simulator = nil
        redis.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: The simulator

    /// Starts the simulator on its port and waits until it listens.
    func startSimulator() throws {
        simulator = try ChildProcess(pushgw, ["simulator", "--config", directory + "/sim.json", "--port", String(simulatorPort)],
                                     captureOutput: false)
        try waitForPort(simulatorPort)
    }

    /// Stops the simulator: SIGTERM flushes its request log, SIGKILL is an APNs that vanishes.
    func stopSimulator(signal: Int32 = SIGTERM) {
        simulator?.stop(signal: signal)
        simulator = nil
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the simulator.
    func signalSimulator(_ signal: Int32) {
        if let simulator { kill(simulator.pid, signal) }
    }

    /// Every request the simulator logged (its log reaches the file at most a second late, and
    /// at its stop).
    func simulatorRequests() -> [[String: Any]] {
        ((try? String(contentsOfFile: simulatorLog, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Requests the simulator judged so far, from its log (flushed at most a second late).
    func simulatorRequestsSoFar() -> Int { simulatorRequests().count }

    /// VoIP pushes the simulator received, by the call id their token encodes.
    func voipPushesByCall() -> [String: Int] {
        var counts: [String: Int] = [:]
        for request in simulatorRequests() where request["push_type"] as? String == "voip" {
            if let token = request["token"] as? String { counts[GatewayFleet.callID(fromToken: token), default: 0] += 1 }
        }
        return counts
    }

    // MARK: Gateways

    /// Starts `pushgw run` as `consumer`. `ulimit` runs it under that shell limit (`-n 1024`:
    /// soft and hard; `-Sn 512`: soft only).
    @discardableResult
    func startGateway(consumer: String, ulimit: String? = nil, logLevel: String = "info",
                      arguments: [String] = []) throws -> Gateway {
        let adminPort = freeLoopbackPort()
        let log = directory + "/gw-\(consumer).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let limit = ulimit.map { "ulimit \($0) && " } ?? ""
        let args = (["run", "--config", configFile, "--consumer", consumer, "--log-level", logLevel] + arguments)
            .map { "'\($0)'" }.joined(separator: " ")
        let process = try ChildProcess("/bin/bash", ["-c", "\(limit)exec '\(pushgw)' \(args) > '\(log)' 2>&1"],
                                       environment: ["PUSHGW_ADMIN_LISTEN": "127.0.0.1:\(adminPort)"], captureOutput: false)
        let gw = Gateway(consumer: consumer, process: process, log: log, adminPort: adminPort)
        gateways.append(gw)
        return gw
    }

    // MARK: Calls and results

    /// The hex VoIP token of call `id` (its UTF-8 bytes).
    static func token(forCall id: String) -> String { id.utf8.map { String(format: "%02x", $0) }.joined() }

    static func callID(fromToken token: String) -> String {
        var bytes: [UInt8] = []
        var i = token.startIndex
        while i < token.endIndex, let next = token.index(i, offsetBy: 2, limitedBy: token.endIndex),
              let b = UInt8(token[i..<next], radix: 16) {
            bytes.append(b)
            i = next
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The event of call `id` (VoIP token only, ringing `ringSeconds`).
    static func event(_ id: String, ringSeconds: Int = 30) -> String {
        let deadline = Int64(Date().timeIntervalSince1970 * 1000) + Int64(ringSeconds) * 1000
        return #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token(forCall: id))","deadline":\#(deadline)}"#
    }

    /// XADDs the events of `ids` in one pipeline, to `app`'s stream.
    func call(_ ids: [String], ringSeconds: Int = 30, app: String = "acme") throws {
        let lines = ids.map { "XADD pushgw:{\(app)}:calls * event \(GatewayFleet.quoted(GatewayFleet.event($0, ringSeconds: ringSeconds)))" }
        let (status, _, err) = try runCommand("redis-cli", ["-p", String(redis.port)], stdin: lines.joined(separator: "\n") + "\n")
        guard status == 0 else { throw TestSupportError("XADD failed: \(err)") }
    }

    /// A producer as a real one is written (Python's redis package, one pooled connection):
    /// `perSecond` calls of `app` named `PREFIX-N`, each ringing `ringSeconds`, written one by
    /// one; an `XADD` Redis refuses (`OOM`, `NOREPLICAS`) is tried again every 50 ms, as a
    /// producer must, and a call's id goes to the returned file once its `XADD` succeeded.
    /// Stop it with `stop(signal: SIGKILL)`.
    func startProducer(prefix: String, perSecond: Int, ringSeconds: Int = 60, app: String = "acme") throws
        -> (process: ChildProcess, written: () -> [String]) {
        let file = directory + "/written-\(prefix).txt"
        let process = try ChildProcess("python3", ["-u", "-c", """
            import json, time, redis
            r = redis.Redis(port=\(redis.port))
            out = open("\(file)", "a", buffering=1)
            period, i, due = 1.0 / \(perSecond), 0, time.time()
            while True:
                cid = f"\(prefix)-{i}"
                event = json.dumps({"v": 1, "id": cid, "type": "incoming_call", "voip_token": cid.encode().hex(),
                                    "deadline": int(time.time() * 1000) + \(ringSeconds) * 1000})
                while True:
                    try:
                        r.xadd("pushgw:{\(app)}:calls", {"event": event})
                        break
                    except redis.exceptions.ResponseError:
                        time.sleep(0.05)
                out.write(cid + "\\n")
                i += 1
                due += period
                time.sleep(max(0, due - time.time()))
                due = max(due, time.time() - period)
            """], captureOutput: false)
        let written = { ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init) }
        return (process, written)
    }

    /// A gateway's `/readyz`: its status and body (status 0 when it did not answer).
    func readiness(of gateway: Gateway) -> (status: Int, body: String) {
        guard let reply = try? LoopbackHTTP.blockingRequest("/readyz", port: gateway.adminPort) else { return (0, "") }
        return (reply.status, reply.body)
    }

    private static func quoted(_ text: String) -> String {
        "\"" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"") + "\""
    }

    /// The outcomes recorded so far, by call id (in the order of the results stream).
    func results(app: String = "acme") -> [String: [String]] {
        resultRecords(app: app).mapValues { $0.map(\.outcome) }
    }

    /// One result as the results stream holds it: outcome, reason (empty when none), latency
    /// (ms, -1 when none) and the HTTP status of each attempt it lists (nil: no answer).
    struct ResultLine {
        var outcome: String
        var reason: String
        var latencyMs: Int
        var attemptStatuses: [Int?]
    }

    /// The results recorded so far, by call id (in the order of the results stream).
    func resultRecords(app: String = "acme") -> [String: [ResultLine]] {
        let (_, out, _) = (try? runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(redis.port), decode_responses=True)
            for _, f in r.xrange("pushgw:{\(app)}:results"):
                d = json.loads(f["result"])
                print(json.dumps([d.get("id"), d["outcome"], d.get("reason") or "", d.get("latency_ms", -1), [a.get("status") for a in d.get("attempts", [])]]))
            """])) ?? (1, "", "")
        var byCall: [String: [ResultLine]] = [:]
        for line in out.split(separator: "\n") {
            guard let row = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [Any], row.count == 5,
                  let id = row[0] as? String, let outcome = row[1] as? String else { continue }
            byCall[id, default: []].append(ResultLine(outcome: outcome, reason: row[2] as? String ?? "", latencyMs: row[3] as? Int ?? -1,
                                                      attemptStatuses: (row[4] as? [Any] ?? []).map { $0 as? Int }))
        }
        return byCall
    }

    /// When each push of each call was handed to the APNs client (`attempts[].t` of the
    /// results, unix ms), by call id.
    func attemptTimes() -> [String: [Int64]] {
        let (_, out, _) = (try? runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(redis.port), decode_responses=True)
            for _, f in r.xrange("pushgw:{acme}:results"):
                d = json.loads(f["result"])
                print(d.get("id"), *[a["t"] for a in d.get("attempts", [])])
            """])) ?? (1, "", "")
        var byCall: [String: [Int64]] = [:]
        for line in out.split(separator: "\n") {
            let parts = line.split(separator: " ").map(String.init)
            guard let id = parts.first else { continue }
            byCall[id, default: []] += parts.dropFirst().compactMap { Int64($0) }
        }
        return byCall
    }

    /// What happened to each of `ids`, for a failure message that says why: the simulator's
    /// requests for its token (time, connection, stream, status, apns-id), its results as
    /// written, and the lines of each gateway's log that name it, warn, or take entries over.
    func history(of ids: [String]) -> String {
        let requests = simulatorRequests()
        let (_, out, _) = (try? runCommand("python3", ["-c", """
            import json, redis
            r = redis.Redis(port=\(redis.port), decode_responses=True)
            for entry, f in r.xrange("pushgw:{acme}:results"):
                print(json.loads(f["result"]).get("id"), entry, f["result"])
            """])) ?? (1, "", "")
        let results = out.split(separator: "\n").map(String.init)
        var text = ""
        for id in ids {
            let token = GatewayFleet.token(forCall: id)
            text += "\(id):\n"
            for r in requests where r["token"] as? String == token {
                text += "  simulator: " + ["time_ms", "conn", "stream", "push_type", "status", "apns_id"]
                    .map { "\($0)=\(r[$0].map { "\($0)" } ?? "-")" }.joined(separator: " ") + "\n"
            }
            for line in results where line.hasPrefix(id + " ") { text += "  result: \(line.dropFirst(id.count + 1))\n" }
            for gw in gateways {
                let log = ((try? String(contentsOfFile: gw.log, encoding: .utf8)) ?? "").split(separator: "\n")
                for line in log where line.contains("\"event\":\"\(id)\"") { text += "  \(gw.consumer): \(line)\n" }
            }
        }
        for gw in gateways {
            let log = ((try? String(contentsOfFile: gw.log, encoding: .utf8)) ?? "").split(separator: "\n")
            let others = log.filter { !$0.contains("\"level\":\"debug\"") && !$0.contains("\"msg\":\"pushgw starting\"") }
            for line in others.prefix(40) {
                text += "  \(gw.consumer): \(line)\n"
            }
        }
        return text
    }

    /// Waits until every one of `ids` has a result, at most `seconds`; the ids still without one.
    func waitForResults(_ ids: [String], seconds: Double, app: String = "acme") -> [String] {
        let end = Date().addingTimeInterval(seconds)
        var missing = ids
        while true {
            let found = results(app: app)
            missing = ids.filter { found[$0] == nil }
            if missing.isEmpty || Date() >= end { return missing }
            usleep(100_000)
        }
    }

    /// Entries of the calls stream not acknowledged yet (XLEN: finished entries are deleted).
    func unfinishedEntries() -> Int {
        Int((try? redis.cli(["XLEN", "pushgw:{acme}:calls"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? -1
    }

    /// Waits until `condition` holds, at most `seconds`; whether it held (the caller asserts,
    /// saying what it waited for). Polls every 50 ms.
    @discardableResult
    static func wait(seconds: Double, until condition: () -> Bool) -> Bool {
        waitUntil("", timeoutMs: Int64(seconds * 1000), pollMs: 50, failing: false, condition)
    }
}
