import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import GatewayTestSupport
import CallStorage
import RedisClient
import Retry
import Routing
import TestSupport
import XCTest
@testable import PushgwCommands

/// A test class each of whose tests gets a fresh `DeadLetterHarness`, `h`, reaching Redis as
/// `redisDeployment` says (a subclass overrides it: TLS, the least-privileged user, a
/// sentinel), with the CLI's config file written (`broken` with the wrong key).
class DeadLetterHarnessTestCase: XCTestCase {
    var h: DeadLetterHarness!

    /// How the gateway and the CLI of this class's tests reach Redis.
    class var redisDeployment: RedisDeployment { .tcp }
    /// Whether the config file the CLI reads has app `broken` fixed (the good key).
    class var configFixed: Bool { false }

    override func setUpWithError() throws {
        h = try DeadLetterHarness(redis: Self.redisDeployment)
        try h.writeConfigFile(fixed: Self.configFixed)
    }

    override func tearDown() {
        h?.close()
        h = nil
    }
}

/// Real dead letters for the `pushgw dead` tests: one redis-server and one APNs simulator for
/// the whole test, and a router (`RouterRole`) that can be stopped and started again with
/// another config — app `broken` with the wrong key (every push `403 InvalidProviderToken`,
/// dead letter `apns_credentials: InvalidProviderToken`) or, once "fixed", with the good one.
/// App `acme` always has the good key. The CLI runs in-process through `pushgwMain`, reading
/// a config file written for the same Redis, with its own loop (the router waits meanwhile).
final class DeadLetterHarness {
    /// The server and how the gateway and the CLI reach it.
    let access: GatewayRedis
    var redis: RedisServer { access.server }
    let sim: SimTestServer
    var loop: EventLoop { sim.loop }
    let directory: String
    let producer: RedisConnection
    /// Every outcome recorded by the routers started so far, in order (their observer).
    let outcomes = RecordedOutcomes()
    var recorded: [(app: String, record: OutcomeRecord)] { outcomes.all }
    private var router: (store: CallStore, pools: ApnsPools, runner: RouterRole)?
    /// The apps the router started here last read as paused (`pushgw apps pause`).
    var pausedApps: Set<String> { router?.runner.pausedApps ?? [] }
    /// App `broken`'s `ring_timeout_s`, for the router and the CLI's config file alike.
    var brokenRingTimeoutSeconds = 30

    init(redis deployment: RedisDeployment = .tcp) throws {
        access = try GatewayRedis(deployment)
        sim = try SimTestServer()
        directory = makeTemporaryDirectory("pushgw-dead")
        producer = RedisConnection(loop: sim.loop, config: access.admin)
        producer.start()
    }

    func close() {
        stopRouter()
        producer.close()
        sim.close()
        XCTAssertEqual(try? access.refusedCommands(), [], "the least-privileged user was refused nothing")
        access.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    func keys(_ app: String) -> AppKeys { AppKeys(app: app) }

    // MARK: The router

    /// The router's config: `broken` uses the wrong key unless `fixed`.
    func config(fixed: Bool) -> GatewayConfig {
        let endpoint = Endpoint(host: "127.0.0.1", port: sim.port)
        let policies = RetryPolicies(voip: RetryPolicy(maxAttempts: 2, baseMs: 20, capMs: 50),
                                     alert: RetryPolicy(maxAttempts: 2, baseMs: 20, capMs: 50), alertTTLSeconds: 60)
        return GatewayConfig(
            redis: access.config,
            apns: ApnsConfig(productionEndpoint: endpoint, sandboxEndpoint: endpoint, caFile: sim.pki.caCert,
                             connections: 1, requestTimeoutMs: 2_000),
            credentials: ["good": .token(teamId: sim.teamID, keyId: sim.keyID, keyFile: sim.pki.jwtKey),
                          "wrong": .token(teamId: sim.teamID, keyId: sim.keyID, keyFile: sim.pki.otherJWTKey)],
            apps: ["acme": AppConfig(bundleId: sim.bundleID, credential: "good", environment: .production, retry: policies),
                   "broken": AppConfig(bundleId: sim.bundleID, credential: fixed ? "good" : "wrong", environment: .production,
                                       ringTimeoutSeconds: brokenRingTimeoutSeconds, retry: policies)])
    }

    /// Starts a router on the harness's loop (stopping the one running, if any).
    func startRouter(fixed: Bool) throws {
        stopRouter()
        let config = config(fixed: fixed)
        let apps = AppRuntime.all(config)
        let gateway = try access.config.connection()
        let store = CallStore(config: CallStore.Config(), apps: apps.map(\.keys),
                              topology: .own(loop: loop, redis: RedisConnection.Config(url: gateway.url, tls: gateway.tls, sentinel: gateway.sentinel),
                                             cluster: nil, clientName: "pushgw-write"))
        let pools = ApnsPools(loop: loop, config: config)
        var settings = RouterRoleSettings(consumer: "dead-test-\(fixed ? "fixed" : "broken")-\(getpid())")
        settings.blockMs = 100
        let runner = RouterRole(loop: loop, store: store, pools: pools, fcmPools: FcmPools(loop: loop, config: config), apps: apps, settings: settings,
                                   log: Log(minimum: .error, write: { _ in }))
        runner.observations = outcomes
        store.start()
        runner.start()
        router = (store, pools, runner)
    }

    /// Drains and stops the running router.
    func stopRouter() {
        guard let (store, pools, runner) = router else { return }
        var drained = false
        runner.drain(timeoutMs: 1_000) { drained = true }
        loop.run(waitingFor: "the router to drain") { drained }
        pools.close()
        store.close()
        router = nil
    }

    // MARK: Producing and waiting

    /// XADDs `text` as field `event` of the app's calls stream.
    func xaddRaw(_ app: String, _ text: String) {
        _ = send(["XADD", keys(app).calls, "*", "event", text])
    }

    /// The event text of an `incoming_call`; the deadline is a minute away unless given (nil:
    /// none, the app's ring timeout applies).
    func event(_ id: String, voip: String, alert: String? = nil, deadlineInMs: Int64? = 60_000) -> String {
        var f: [String: Any] = ["v": 1, "id": id, "type": "incoming_call", "voip_token": voip,
                                "voip": ["caller": "+15551234567", "callerName": "Alice"]]
        if let deadlineInMs { f["deadline"] = Clock.unixMs() + deadlineInMs }
        if let alert { f["alert_token"] = alert }
        let data = try! JSONSerialization.data(withJSONObject: f, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    func call(_ app: String, _ id: String, voip: String, alert: String? = nil) {
        xaddRaw(app, event(id, voip: voip, alert: alert))
    }

    /// Runs the loop until `count` outcomes were recorded in all; after the deadline fails the
    /// test and returns false.
    @discardableResult
    func waitForRecords(_ count: Int, file: StaticString = #filePath, line: UInt = #line) -> Bool {
        loop.run(waitingFor: "\(count) recorded outcomes (\(recorded.count) so far)", file: file, line: line) {
            recorded.count >= count
        }
    }

    /// The outcomes recorded for call `id`, in order.
    func outcomes(_ id: String) -> [CallOutcome] {
        recorded.filter { $0.record.id == id }.map(\.record.outcome)
    }

    /// One command on the harness's loop.
    @discardableResult
    func send(_ args: [String], file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        var result: Result<RedisReply, RedisError>?
        producer.send(args) { result = $0 }
        guard loop.run(waitingFor: "the reply to \(args.first ?? "")", file: file, line: line, until: { result != nil })
        else { return nil }
        switch result! {
        case let .success(reply): return reply
        case let .failure(error):
            XCTFail("\(args.first ?? ""): \(error)", file: file, line: line)
            return nil
        }
    }

    /// The entries of a stream, oldest first. An error or an unreadable entry fails the test.
    func entries(_ stream: String, file: StaticString = #filePath, line: UInt = #line) -> [StreamEntry] {
        guard let reply = send(["XRANGE", stream, "-", "+"], file: file, line: line) else { return [] }
        do {
            return try StreamReplies.entryList(reply).entries
        } catch {
            XCTFail("XRANGE \(stream): \(error)", file: file, line: line)
            return []
        }
    }

    /// The ids of the app's dead letters, oldest first.
    func deadIDs(_ app: String) -> [String] { entries(keys(app).dead).map(\.id) }

    // MARK: The CLI

    /// Writes the CLI's config file (what `config(fixed:)` holds, as JSON) and returns its path.
    /// `retention` adds `dead_letters` to app `broken`.
    @discardableResult
    func writeConfigFile(fixed: Bool = false, retention: [String: Any]? = nil) throws -> String {
        var broken: [String: Any] = ["bundle_id": sim.bundleID, "credential": fixed ? "good" : "wrong", "environment": "production",
                                     "ring_timeout_s": brokenRingTimeoutSeconds]
        if let retention { broken["dead_letters"] = retention }
        let json: [String: Any] = [
            "redis": access.json,
            "apns": ["production": ["endpoint": "127.0.0.1:\(sim.port)"], "sandbox": ["endpoint": "127.0.0.1:\(sim.port)"],
                     "ca_file": sim.pki.caCert],
            "credentials": ["good": ["team_id": sim.teamID, "key_id": sim.keyID, "key_file": sim.pki.jwtKey],
                            "wrong": ["team_id": sim.teamID, "key_id": sim.keyID, "key_file": sim.pki.otherJWTKey]],
            "apps": ["acme": ["bundle_id": sim.bundleID, "credential": "good", "environment": "production"],
                     "broken": broken],
        ]
        let path = directory + "/pushgw.json"
        try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// What one CLI run printed.
    struct Run {
        let status: Int32
        let out: [String]
        let err: [String]
        /// Questions asked on the terminal.
        let prompts: [String]
        var text: String { out.joined(separator: "\n") }
    }

    /// Runs `pushgw dead ARGS… --config FILE` in-process. `answer` is what the operator types
    /// at a confirmation (nil: no terminal). `USER` is `user`.
    func dead(_ args: [String], answer: String? = nil, user: String = "ops-test", config: String? = nil) -> Run {
        cli(["dead"] + args, answer: answer, user: user, config: config)
    }

    /// Runs `pushgw ARGS… --config FILE` in-process (`dead …`, `tokens …`).
    func cli(_ args: [String], answer: String? = nil, user: String = "ops-test", config: String? = nil) -> Run {
        var out: [String] = [], err: [String] = [], prompts: [String] = []
        let terminal = answer.map { text in
            Terminal(isInteractive: true, prompt: { prompts.append($0) }, readLine: { text })
        } ?? .none
        let context = CommandContext(output: CommandOutput(out: { out.append($0) }, err: { err.append($0) }),
                                     environment: ["USER": user], workingDirectory: directory, terminal: terminal)
        let path = config ?? directory + "/pushgw.json"
        let status = pushgwMain(args + ["--config", path], context: context)
        return Run(status: status, out: out, err: err, prompts: prompts)
    }
}
