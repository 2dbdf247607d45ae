import Foundation
import Glibc
import RedisClient

/// A real Redis Sentinel (`redis-server --sentinel`) on a free loopback port, watching the
/// primary of a `RedisServer`, killed at the end. Short timings make a failover take a few
/// seconds instead of a minute.
public final class RedisSentinelServer: @unchecked Sendable {
    public let port: Int
    /// The name the sentinel knows the primary by.
    public let master: String
    private let directory: String
    private var child: ChildProcess?

    /// The sentinel's address as pushgw's config names it.
    public var address: RedisSentinelOptions.Address { RedisSentinelOptions.Address(host: "127.0.0.1", port: port) }

    private init(port: Int, master: String, directory: String) {
        self.port = port
        self.master = master
        self.directory = directory
    }

    /// Starts a sentinel watching `primary` as `master`, with `quorum` sentinels needed to
    /// agree that it is down after `downAfterMs` without an answer. A TLS primary is watched
    /// over TLS, and the sentinel itself then listens for TLS only (the primary's PKI).
    /// `password`: the sentinel's own (`requirepass`).
    public static func start(watching primary: RedisServer, master: String = "mymaster", quorum: Int = 1,
                             downAfterMs: Int = 1_000, failoverTimeoutMs: Int = 5_000,
                             password: String? = nil) throws -> RedisSentinelServer {
        precondition(primary.transport == .tcp || primary.transport == .tls, "the test sentinels watch TCP or TLS primaries")
        let sentinel = RedisSentinelServer(port: freeLoopbackPort(), master: master,
                                           directory: makeTemporaryDirectory("pushgw-sentinel"))
        var listen = "port \(sentinel.port)"
        if let pki = primary.pki {
            listen = """
                port 0
                tls-port \(sentinel.port)
                tls-cert-file \(pki.redisCert)
                tls-key-file \(pki.redisKey)
                tls-ca-cert-file \(pki.caCert)
                tls-auth-clients no
                tls-replication yes
                """
        }
        if let password { listen += "\nrequirepass \(password)" }
        try sentinel.launch(listen: listen, primaryPort: primary.port, quorum: quorum, downAfterMs: downAfterMs,
                            failoverTimeoutMs: failoverTimeoutMs)
        return sentinel
    }

    private func launch(listen: String, primaryPort: Int, quorum: Int, downAfterMs: Int, failoverTimeoutMs: Int) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Sentinel rewrites its config file with what it learns: it must be its own, writable.
        let file = directory + "/sentinel.conf"
        try """
            \(listen)
            bind 127.0.0.1
            daemonize no
            dir \(directory)
            logfile \(directory)/sentinel.log
            sentinel monitor \(master) 127.0.0.1 \(primaryPort) \(quorum)
            sentinel down-after-milliseconds \(master) \(downAfterMs)
            sentinel failover-timeout \(master) \(failoverTimeoutMs)
            sentinel parallel-syncs \(master) 1

            """.write(toFile: file, atomically: true, encoding: .utf8)
        child = try ChildProcess("redis-server", [file, "--sentinel"], captureOutput: false)
        try waitForPort(port)
    }

    /// `redis-cli -p PORT args…` against a plain, password-less sentinel; its stdout (`--raw`).
    public func cli(_ args: [String]) throws -> String {
        let (status, out, err) = try runCommand("redis-cli", ["-p", String(port), "--raw"] + args)
        guard status == 0 else { throw TestSupportError("redis-cli (sentinel) \(args.joined(separator: " ")) failed: \(err)") }
        return out
    }

    /// The primary's port as this sentinel sees it now (nil while it does not know).
    public func primaryPort() -> Int? {
        let lines = (try? cli(["SENTINEL", "get-master-addr-by-name", master]))?.split(separator: "\n") ?? []
        return lines.count == 2 ? Int(lines[1]) : nil
    }

    /// Stops the sentinel and removes its directory.
    public func stop() {
        child?.stop(signal: SIGKILL)
        child = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}
