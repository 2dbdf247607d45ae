import Foundation
import Glibc
import TestSupport
import XCTest

/// pushgw as an operator runs it, for the tests of whole processes: a redis-server, the APNs
/// simulator as `pushgw simulator`, and `pushgw run` gateways, all from the built binary, with
/// config files in a directory of their own and the shared test PKI (team `TEAM123456`, key
/// `KEY1234567`, bundle `com.example.app`). Gateways are watched from outside: Redis, the
/// simulator's request log, their own log files and their admin endpoints.
final class ProcessWorld {
    let redis: RedisServer
    let pki: TestPKI
    let pushgw: String
    /// Where configs and logs go (removed by `stop()`).
    let directory: String
    let simulatorPort: Int
    /// The simulator's JSONL request log, complete once `stopSimulator()` returned.
    let simulatorLog: String
    private var simulator: ChildProcess?
    private var started: [ChildProcess] = []

    /// Starts Redis and the simulator; `simulator` adds members to the simulator's config
    /// (`"default_scenario": "slow:300"`).
    init(simulator extra: String = "") throws {
        pushgw = try builtPushgw()
        pki = try TestPKI.shared()
        directory = makeTemporaryDirectory("pushgw-processes")
        redis = try RedisServer.start()
        simulatorPort = freeLoopbackPort()
        simulatorLog = directory + "/apns-requests.jsonl"
        let members = [#""cert_file": "\#(pki.serverCert)", "key_file": "\#(pki.serverKey)""#,
                       #""token_keys": { "KEY1234567": "\#(pki.jwtPublicKey)" }, "team_id": "TEAM123456""#,
                       #""log_file": "\#(simulatorLog)""#] + (extra.isEmpty ? [] : [extra])
        try "{ \(members.joined(separator: ", ")) }".write(toFile: directory + "/simulator.json", atomically: true, encoding: .utf8)
        simulator = try ChildProcess(pushgw, ["simulator", "--config", directory + "/simulator.json", "--port", String(simulatorPort)],
                                     captureOutput: false)
        try waitForPort(simulatorPort)
    }

    /// Whether headless Chromium and its driver are installed for the browser tests; fails the
    /// test, naming what is missing, when not.
    static func browserInstalled(file: StaticString = #filePath, line: UInt = #line) -> Bool {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] where !FileManager.default.isExecutableFile(atPath: tool) {
            XCTFail("\(tool) is missing: make test installs the browser group of scripts/debian-packages.txt", file: file, line: line)
            return false
        }
        return true
    }

    /// An app of the test PKI's team; `extra` adds members (`"ring_timeout_s": 120`).
    static func app(_ extra: String = "") -> String {
        #"{ "bundle_id": "com.example.app", "credential": "k", "environment": "production"\#(extra.isEmpty ? "" : ", " + extra) }"#
    }

    /// Writes a gateway config for `apps` (id → JSON object) to `name` and returns its path.
    /// Both APNs environments point at the simulator. `admin` is the admin section's members
    /// (default: listen on a free loopback port),
    /// `apns` more members of the apns section, `redis` more members of the redis section;
    /// `redisURL` replaces the server's plain URL (to give a user and password), `sections`
    /// adds top-level members (`"log": { … }`).
    @discardableResult
    func writeConfig(_ name: String = "gateway.json", apps: [String: String], admin: String? = nil, apns: String = "",
                     redis extraRedis: String = "", redisURL: String? = nil, sections: String = "") throws -> String {
        let appsJSON = apps.sorted { $0.key < $1.key }.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ")
        let text = """
            { "redis": { "url": "\(redisURL ?? redis.url)"\(extraRedis.isEmpty ? "" : ", " + extraRedis) },
              "admin": { \(admin ?? #""listen": "127.0.0.1:\#(freeLoopbackPort())""#) },
              "apns": { "production": { "endpoint": "127.0.0.1:\(simulatorPort)" },
                        "sandbox": { "endpoint": "127.0.0.1:\(simulatorPort)" },
                        "ca_file": "\(pki.caCert)"\(apns.isEmpty ? "" : ", " + apns) },
              "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "\(pki.jwtKey)" } },
              "apps": { \(appsJSON) }\(sections.isEmpty ? "" : ", " + sections) }
            """
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Starts `pushgw run --config CONFIG --consumer CONSUMER ARGS…`; its stdout and stderr go
    /// to `log` when given (a path in `directory`), else nowhere.
    func gateway(config: String, consumer: String, arguments: [String] = [], log: String? = nil) throws -> ChildProcess {
        let run = [pushgw, "run", "--config", config, "--consumer", consumer] + arguments
        let child: ChildProcess
        if let log {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            let quoted = run.map { "'" + $0 + "'" }.joined(separator: " ")
            child = try ChildProcess("/bin/sh", ["-c", "exec \(quoted) > '\(log)' 2>&1"], captureOutput: false)
        } else {
            child = try ChildProcess(pushgw, Array(run.dropFirst()), captureOutput: false)
        }
        started.append(child)
        return child
    }

    /// `redis-cli ARGS…` as a whole number; an error or another answer fails the test (-1).
    func integer(_ args: String..., file: StaticString = #filePath, line: UInt = #line) -> Int {
        do {
            let text = try redis.cli(args).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let n = Int(text) else {
                XCTFail("\(args.joined(separator: " ")): not a number: \(text)", file: file, line: line)
                return -1
            }
            return n
        } catch {
            XCTFail("\(args.joined(separator: " ")): \(error)", file: file, line: line)
            return -1
        }
    }

    /// Entries in `PREFIX:{app}:results`.
    func results(_ app: String = "acme", prefix: String = "pushgw", file: StaticString = #filePath, line: UInt = #line) -> Int {
        integer("XLEN", "\(prefix):{\(app)}:results", file: file, line: line)
    }

    /// The JSON lines of a log file whose `msg` is `message`. Lines that are not JSON objects
    /// (a crash report on stderr) are not log lines and are skipped.
    static func logLines(_ file: String, message: String) -> [[String: Any]] {
        textSoFar(file).split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  object["msg"] as? String == message else { return nil }
            return object
        }
    }

    /// Requests the simulator has logged so far (its log reaches the file at most a second
    /// late, and at its stop).
    func simulatorRequestsSoFar() -> Int {
        ((try? String(contentsOfFile: simulatorLog, encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// Stops the simulator (SIGTERM: it flushes its request log) and returns the logged
    /// requests, one object per line.
    func stopSimulator(file: StaticString = #filePath, line: UInt = #line) throws -> [[String: Any]] {
        XCTAssertEqual(simulator?.stop(file: file, line: line), 0, "the simulator exits 0 on SIGTERM", file: file, line: line)
        simulator = nil
        return try String(contentsOfFile: simulatorLog, encoding: .utf8).split(separator: "\n").map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw TestSupportError("not a JSON object in the simulator's log: \(line)")
            }
            return object
        }
    }

    /// Stops every process still running and removes the directory.
    func stop() {
        for child in started where child.isRunning { child.stop(signal: SIGKILL) }
        started = []
        simulator?.stop()
        simulator = nil
        redis.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
