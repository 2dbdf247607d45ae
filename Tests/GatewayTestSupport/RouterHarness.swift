import APNs
import APNsSimulator
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import CallStorage
import RedisClient
import Retry
import Routing
import TestSupport
import XCTest

/// A router under test with real parts: a redis-server child process (reached as `deployment`
/// says: TCP, TLS, an ACL user, a sentinel), the APNs simulator on the test's loop, and the
/// gateway's `RouterRole`, `CallStore`, `ApnsPools` and retry mover (`RetryRole`, on a
/// connection of its own, as in `pushgw run`) on the same loop. Producers write with a plain
/// Redis connection, as any language would.
package final class RouterHarness {
    /// The server and how the gateway reaches it.
    package let access: GatewayRedis
    package var redis: RedisServer { access.server }
    /// The APNs simulator; both environments' endpoint unless `sandboxSim` exists.
    package let sim: SimTestServer
    /// With `separateSandbox`: a second simulator (`sandbox: true`) on the same loop, the
    /// sandbox endpoint.
    package let sandboxSim: ApnsSimulator?
    package var loop: EventLoop { sim.loop }
    package let config: GatewayConfig
    package let apps: [AppRuntime]
    package let store: CallStore
    package let pools: ApnsPools
    package let runner: RouterRole
    package let moverConnection: RedisConnection
    package let mover: RetryRole
    package let producer: RedisConnection
    /// The router's consumer name in the apps' groups.
    package let consumer: String
    /// The router's observer: every outcome recorded, in order, with its app.
    package let outcomes = RecordedOutcomes()
    package var recorded: [(app: String, record: OutcomeRecord)] { outcomes.all }

    /// A second key id the simulator knows (credential `second`, the same key as `good`'s):
    /// with `betaOnItsOwnCredential`, beta's pushes go through a pool of their own.
    package static let secondKeyID = "KEY7654321"

    /// Apps `acme` (its missed-call alert `missedCallAlert`, its ring receipts `ringReceiptTimeoutMs`, the name of its FCM credential `acmeFcmCredential`) and `beta` use the simulator's key (one shared pool; with `betaOnItsOwnCredential` beta uses credential `second`); app `broken` a key the simulator does not know;
    /// app `other` the same good key with another bundle id the simulator refuses (BadTopic). With
    /// `separateSandbox`, app `sandy` is acme's twin in the sandbox environment. With
    /// `acmeFcmCredential`, that FCM credential is the PKI's service account (its fields changed
    /// by `fcmServiceAccountChanges`), exchanging and sending at the simulator's FCM endpoints.
    /// `limits` and `retention` set those of the apps they name.
    package init(redis deployment: RedisDeployment = .tcp, simulator configure: (inout SimulatorConfig) -> Void = { _ in },
         separateSandbox: Bool = false,
         voipRetry: RetryPolicy = RetryPolicy(maxAttempts: 4, baseMs: 20, capMs: 100),
         alertRetry: RetryPolicy = RetryPolicy(maxAttempts: 3, baseMs: 20, capMs: 100),
         missedCallAlert: MissedCallAlert = .undelivered, ringReceiptTimeoutMs: Int? = nil,
         acmeFcmCredential: String? = nil,
         fcmServiceAccountChanges: [String: Any] = [:],
         betaOnItsOwnCredential: Bool = false,
         limits: [String: AppLimits] = [:],
         retention: [String: RetentionWindows] = [:],
         settings: (inout RouterRoleSettings) -> Void = { _ in },
         store storeSettings: (inout CallStore.Config) -> Void = { _ in },
         storeConnection: (inout RedisConnection.Config) -> Void = { _ in },
         startRouter: Bool = true, startMover: Bool = true, routerLog: Log = Log(minimum: .error)) throws {
        access = try GatewayRedis(deployment)
        sim = try SimTestServer(configure: { c in
            c.tokenKeys[RouterHarness.secondKeyID] = c.tokenKeys.first?.value
            configure(&c)
        })
        let pki = sim.pki
        let endpoint = Endpoint(host: "127.0.0.1", port: sim.port)
        var sandboxEndpoint = endpoint
        if separateSandbox {
            var sandboxConfig = sim.simulator.config
            sandboxConfig.sandbox = true
            sandboxConfig.logFile = nil
            let second = try ApnsSimulator(loop: sim.loop, config: sandboxConfig)
            try second.start()
            sandboxSim = second
            sandboxEndpoint = Endpoint(host: "127.0.0.1", port: second.port)
        } else {
            sandboxSim = nil
        }
        let policies = RetryPolicies(voip: voipRetry, alert: alertRetry, alertTTLSeconds: 60)
        var acme = AppConfig(bundleId: sim.bundleID, credential: "good", environment: .production, retry: policies,
                             missedCallAlert: missedCallAlert)
        acme.ringReceiptTimeoutMs = ringReceiptTimeoutMs
        acme.fcmCredential = acmeFcmCredential
        var appConfigs = ["acme": acme,
                    "beta": AppConfig(bundleId: sim.bundleID, credential: betaOnItsOwnCredential ? "second" : "good",
                                      environment: .production, retry: policies),
                    "broken": AppConfig(bundleId: sim.bundleID, credential: "wrong", environment: .production, retry: policies),
                    "other": AppConfig(bundleId: "com.example.notallowed", credential: "good", environment: .production,
                                       retry: policies)]
        for (app, l) in limits { appConfigs[app]?.limits = l }
        for (app, r) in retention { appConfigs[app]?.retention = r }
        if separateSandbox {
            appConfigs["sandy"] = AppConfig(bundleId: sim.bundleID, credential: "good", environment: .sandbox, retry: policies)
        }
        var gatewayConfig = GatewayConfig(
            redis: access.config,
            apns: ApnsConfig(productionEndpoint: endpoint, sandboxEndpoint: sandboxEndpoint, caFile: pki.caCert,
                             connections: 1, requestTimeoutMs: 2_000),
            credentials: ["good": .token(teamId: sim.teamID, keyId: sim.keyID, keyFile: pki.jwtKey),
                          "second": .token(teamId: sim.teamID, keyId: RouterHarness.secondKeyID, keyFile: pki.jwtKey),
                          "wrong": .token(teamId: sim.teamID, keyId: sim.keyID, keyFile: pki.otherJWTKey)],
            apps: appConfigs)
        if let name = acmeFcmCredential {
            let file = try pki.writeServiceAccount(to: pki.directory + "/service-account-\(name).json", tokenURI: sim.fcmTokenURI,
                                                   changes: fcmServiceAccountChanges)
            gatewayConfig.fcmCredentials[name] = FcmCredential(serviceAccountFile: file)
            gatewayConfig.fcm = FcmConfig(endpoint: endpoint, caFile: pki.caCert, connections: 1, requestTimeoutMs: 2_000)
        }
        config = gatewayConfig
        apps = AppRuntime.all(config)
        let gateway = try access.config.connection()
        var storeConfig = CallStore.Config(windows: config.retentionWindows)
        storeSettings(&storeConfig)
        var storeRedis = RedisConnection.Config(url: gateway.url, tls: gateway.tls, sentinel: gateway.sentinel)
        storeConnection(&storeRedis)
        store = CallStore(config: storeConfig, apps: apps.map(\.keys),
                          topology: .own(loop: sim.loop, redis: storeRedis, cluster: nil, clientName: "pushgw-write"))
        pools = ApnsPools(loop: sim.loop, config: config)
        consumer = "test-\(getpid())"
        var s = RouterRoleSettings(consumer: consumer)
        s.blockMs = 100
        settings(&s)
        runner = RouterRole(loop: sim.loop, store: store, pools: pools, fcmPools: FcmPools(loop: sim.loop, config: config), apps: apps, settings: s, log: routerLog)
        producer = RedisConnection(loop: sim.loop, config: access.admin)
        moverConnection = RedisConnection(loop: sim.loop, config: try access.config.connection(clientName: "pushgw-retry"))
        mover = RetryRole(loop: sim.loop, schedule: RetrySchedule(topology: .single(moverConnection), config: .init()),
                           log: Log(minimum: .error))
        mover.apps = apps.map(\.keys)
        runner.observations = outcomes
        runner.onRetryScheduled = { [unowned self] due in self.mover.retryScheduled(dueAtMs: due) }
        producer.start()
        store.start()
        moverConnection.start()
        if startRouter { runner.start() }
        if startMover { mover.start() }
    }

    package func close() {
        var drained = false
        runner.drain(timeoutMs: 1_000) { drained = true }
        loop.run(waitingFor: "the router to drain") { drained }
        mover.close()
        moverConnection.close()
        pools.close()
        store.close()
        producer.close()
        sandboxSim?.close()
        sim.close()
        XCTAssertEqual(try? access.refusedCommands(), [], "the least-privileged user was refused nothing")
        access.stop()
    }

    package func keys(_ app: String) -> AppKeys { AppKeys(app: app) }

    /// XADDs the raw text as field `event` of the app's calls stream; the entry id XADD
    /// returned ("" when it failed, which fails the test).
    @discardableResult
    package func xaddRaw(_ app: String, _ text: String, field: String = "event", file: StaticString = #filePath,
                 line: UInt = #line) -> String {
        xaddRaw(app, bytes: Array(text.utf8), field: field, file: file, line: line)
    }

    /// XADDs `bytes` (which need not be UTF-8) as field `event` of the app's calls stream; the
    /// entry id XADD returned ("" when it failed, which fails the test).
    @discardableResult
    package func xaddRaw(_ app: String, bytes: [UInt8], field: String = "event", file: StaticString = #filePath,
                 line: UInt = #line) -> String {
        var id: String?
        producer.send(command: RedisCommand([Array("XADD".utf8), Array(keys(app).calls.utf8), Array("*".utf8), Array(field.utf8), bytes]), blockMs: 0) { result in
            switch result {
            case let .success(reply): id = reply.string ?? ""
            case let .failure(e): XCTFail("XADD failed: \(e)", file: file, line: line); id = ""
            }
        }
        loop.run(waitingFor: "the XADD's reply", file: file, line: line) { id != nil }
        return id ?? ""
    }

    /// XADDs an event built from `fields` (JSON-serialized); the entry id.
    @discardableResult
    package func xadd(_ app: String = "acme", _ fields: [String: Any]) -> String {
        let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return xaddRaw(app, String(decoding: data, as: UTF8.self))
    }

    /// An `incoming_call` with the given tokens; `deadlineInMs` relative to now. Returns the entry id.
    @discardableResult
    package func call(_ id: String, voip: String? = nil, alert: String? = nil, deadlineInMs: Int64? = nil,
              app: String = "acme", extra: [String: Any] = [:]) -> String {
        var f: [String: Any] = ["v": 1, "id": id, "type": "incoming_call",
                                "voip": ["caller": "+15551234567", "callerName": "Alice"]]
        if let voip { f["voip_token"] = voip }
        if let alert { f["alert_token"] = alert }
        if let deadlineInMs { f["deadline"] = Clock.unixMs() + deadlineInMs }
        for (k, v) in extra { f[k] = v }
        return xadd(app, f)
    }

    /// Runs the loop until `count` outcomes were recorded in all; after `timeoutMs` fails the
    /// test and returns false.
    @discardableResult
    package func waitForRecords(_ count: Int, timeoutMs: Int64 = Deadline.defaultMs,
                        file: StaticString = #filePath, line: UInt = #line) -> Bool {
        loop.run(waitingFor: "\(count) recorded outcomes (\(recorded.count) so far)", timeoutMs: timeoutMs,
                 file: file, line: line) { recorded.count >= count }
    }

    /// Runs the loop until `condition` holds; after `timeoutMs` fails the test, naming `what`,
    /// and returns false.
    @discardableResult
    package func runUntil(_ what: @autoclosure () -> String, timeoutMs: Int64 = Deadline.defaultMs,
                  file: StaticString = #filePath, line: UInt = #line, _ condition: () -> Bool) -> Bool {
        loop.run(waitingFor: what(), timeoutMs: timeoutMs, file: file, line: line, until: condition)
    }

    /// One command on the producer's connection; its reply (nil on an error, which fails the test).
    @discardableResult
    package func command(_ args: String..., file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        command(args, file: file, line: line)
    }

    /// Forgets the outcome of call `id` of `app` as a dead letter's replay does: its result key
    /// and its compact record in every outcomes bucket of the app, so the id routes again.
    package func forgetOutcome(_ app: String, _ id: String, file: StaticString = #filePath, line: UInt = #line) {
        command("DEL", keys(app).result(id), file: file, line: line)
        let pattern = String(keys(app).outcomes(0).dropLast()) + "*"
        for bucket in command("KEYS", pattern, file: file, line: line)?.array?.compactMap(\.string) ?? [] {
            command("HDEL", bucket, id, file: file, line: line)
        }
    }

    /// One command on the producer's connection, its arguments as an array.
    @discardableResult
    package func command(_ args: [String], file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        var result: Result<RedisReply, RedisError>?
        producer.send(args) { result = $0 }
        guard loop.run(waitingFor: "the reply to \(args.joined(separator: " "))", file: file, line: line, until: { result != nil })
        else { return nil }
        switch result! {
        case let .success(reply): return reply
        case let .failure(error):
            XCTFail("\(args.joined(separator: " ")): \(error)", file: file, line: line)
            return nil
        }
    }

    /// Runs the loop for `ms` milliseconds (to see that something does not happen).
    package func runFor(_ ms: Int64) {
        loop.run(forMs: ms)
    }

    /// The outcome recorded for call `id` (not a cancel event's or a receipt's, nor a duplicate's answer).
    package func record(_ id: String, file: StaticString = #filePath, line: UInt = #line) -> OutcomeRecord? {
        let found = recorded.filter {
            $0.record.id == id && $0.record.type?.endsRing != true && $0.record.type != .callRinging && $0.record.outcome != .duplicate
        }
        XCTAssertLessThanOrEqual(found.count, 1, "one result per event (\(id))", file: file, line: line)
        return found.first?.record
    }

    /// The results stream's `result` JSONs, decoded, in order.
    package func results(_ app: String = "acme", file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        entries(keys(app).results, file: file, line: line).compactMap { entry in
            entry.values["result"].flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        }
    }

    /// Entries of a stream, read back from Redis. A Redis error fails the test (and reads
    /// as no entries, which the caller's assertion must not be the only one to notice).
    package func entries(_ stream: String, file: StaticString = #filePath, line: UInt = #line) -> [StreamEntry] {
        var result: Result<[StreamEntry], RedisError>?
        store.range(stream, count: 10_000) { result = $0 }
        guard loop.run(waitingFor: "XRANGE \(stream)", file: file, line: line, until: { result != nil }) else { return [] }
        switch result! {
        case let .success(entries): return entries
        case let .failure(error):
            XCTFail("XRANGE \(stream) failed: \(error)", file: file, line: line)
            return []
        }
    }

    /// Requests the simulator answered for `token`.
    package func requests(_ token: String) -> [RecordedRequest] {
        sim.simulator.recorded.filter { $0.token == token }
    }
}

extension RouterHarness {
    /// Pauses `app` as `pushgw apps pause` does, and runs until the router saw it.
    package func pause(_ app: String, file: StaticString = #filePath, line: UInt = #line) {
        let pauses = AppPauseStore(topology: store.topology)
        var answer: Result<AppPauseStore.Pause?, RedisError>?
        pauses.pause(keys(app), .init(sinceMs: Clock.unixMs(), user: "tester", reason: "testing")) { answer = $0 }
        runUntil("the pause written", file: file, line: line) { answer != nil }
        guard case .success(nil)? = answer else { return XCTFail("pause: \(String(describing: answer))", file: file, line: line) }
        runUntil("the router saw the pause", file: file, line: line) { self.runner.pausedApps.contains(app) }
    }
}

/// The nearest-rank 99th percentile of `sorted` (ascending): of 100 samples the second largest,
/// so one stall of a shared loop is not the figure; of 40 or fewer, the largest.
package func nearestRankP99(_ sorted: [Double]) -> Double {
    sorted[max(0, min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1))]
}
