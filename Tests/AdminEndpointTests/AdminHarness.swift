import APNsSimulator
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import GatewayTestSupport
import RedisClient
import Glibc
import TestSupport
import XCTest
@testable import AdminEndpoint

/// A `RouterHarness` (real Redis, the simulator, the router) with the gateway's admin endpoint
/// on the same loop, listening on a free loopback port, and its log lines kept for checks.
final class AdminHarness {
    final class Lines: @unchecked Sendable {
        var all: [String] = []
    }

    let router: RouterHarness
    let admin: GatewayAdmin
    let port: Int
    let logLines = Lines()
    var loop: EventLoop { router.loop }

    /// - Parameters:
    ///   - tokenFile: `admin.token_file`; nil leaves the admin API closed.
    ///   - readonlyTokenFile: `admin.readonly_token_file`, for the console.
    ///   - publicHosts: `admin.public_host`.
    ///   - console: opens the operators' console as `pushgw run` does (it needs `tokenFile`),
    ///     on a Redis connection of its own to the harness's server.
    ///   - deployment: how the router reaches Redis, as for `RouterHarness`.
    ///   - simulator: the simulator's configuration, as for `RouterHarness`.
    ///   - settings: changes to the endpoint's settings (probes every 100 ms here).
    init(tokenFile: String? = nil, readonlyTokenFile: String? = nil, console: Bool = false, publicHosts: [String] = [],
         redis deployment: RedisDeployment = .tcp, simulator configure: (inout SimulatorConfig) -> Void = { _ in },
         settings change: (inout GatewayAdmin.Settings) -> Void = { _ in }) throws {
        router = try RouterHarness(redis: deployment, simulator: configure)
        let listenPort = freeLoopbackPort()
        var settings = GatewayAdmin.Settings()
        settings.maxPingAgeMs = 1_000
        settings.probe.pingEveryMs = 100
        settings.probe.backlogEveryMs = 100
        change(&settings)
        let lines = logLines
        let log = Log(minimum: .debug) { line in lines.all.append(line) }
        let adminConfig = AdminConfig(listen: "127.0.0.1:\(listenPort)", tokenFile: tokenFile, readonlyTokenFile: readonlyTokenFile,
                                      publicHosts: publicHosts)
        admin = GatewayAdmin(loop: router.loop, config: adminConfig, apps: router.apps, store: router.store, pools: router.pools,
                             runner: router.runner, log: log, settings: settings)
        router.outcomes.next = admin
        if console {
            var config = router.config
            config.admin = adminConfig
            let redis = RedisConnection.Config(url: try RedisURL(parsing: router.redis.url))
            admin.openConsole = { [unowned admin, loop = router.loop] token in
                GatewayConsole(loop: loop, config: config, redis: redis, sentinels: nil, adminToken: token, guesses: admin.guesses, log: log,
                               gateway: ("admin-test", ["router"]), figures: { admin.consoleFigures() })
            }
        }
        admin.start()
        guard let bound = admin.port else { throw TestSupportError("the admin endpoint did not bind: \(logLines.all)") }
        port = bound
    }

    func close() {
        admin.close()
        router.close()
    }

    /// One request to the admin endpoint.
    func get(_ path: String, method: String = "GET", headers: [String: String] = [:], body: String = "", from: String? = nil,
             file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
        try LoopbackHTTP.request(method, path, port: port, headers: headers, body: body, from: from, loop: loop, file: file, line: line)
    }

    /// Runs `requests` on a thread of its own (blocking HTTP requests to the endpoint) while
    /// the loop turns, until it returns; its result.
    func whileTurning<T: Sendable>(_ what: String, timeoutMs: Int64 = 60_000, _ requests: @escaping @Sendable (Int) -> T) throws -> T {
        let box = ThreadResult<T>()
        let port = self.port
        Thread.detachNewThread { box.set(requests(port)) }
        guard wait(what, timeoutMs: timeoutMs, until: { box.get() != nil }), let value = box.get() else {
            throw TestSupportError("\(what) did not finish")
        }
        return value
    }

    /// Runs the loop until `condition` holds; after `timeoutMs` fails the test, naming `what`.
    @discardableResult
    func wait(_ what: @autoclosure () -> String, timeoutMs: Int64 = Deadline.defaultMs,
              file: StaticString = #filePath, line: UInt = #line, until condition: () -> Bool) -> Bool {
        router.runUntil(what(), timeoutMs: timeoutMs, file: file, line: line, condition)
    }
}

/// A value one thread sets and another reads.
final class ThreadResult<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T? { lock.lock(); defer { lock.unlock() }; return value }
}
