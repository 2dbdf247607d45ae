import Foundation
import Glibc
import RedisClient

/// A real `redis-server` (the Debian package) for one test: loopback TCP (or TLS) on a free
/// port plus a unix socket, no persistence, killed at the end.
///
/// Invariant: `port` and `unixSocket` stay the same across `restart()` and `kill9()` +
/// `restart()`, and a restart starts empty (`--save '' --appendonly no`), which is what a
/// Redis restart without persistence looks like to pushgw. The directory stays until `stop()`:
/// a cluster node's `nodes.conf` is kept, so a restarted node comes back with its node id and
/// its slots, as a cluster node restarted without persistence does.
public final class RedisServer: @unchecked Sendable {
    /// How the code under test reaches the server (`url`, `tls`). The unix socket is always
    /// there too, without TLS, for the tests' own look at the data (`cli`).
    public enum Transport: String, CaseIterable, Sendable {
        /// `redis://127.0.0.1:PORT`.
        case tcp
        /// `unix:///…/redis.sock`.
        case unixSocket
        /// `rediss://127.0.0.1:PORT`: TLS only on the port (`--port 0 --tls-port PORT`), a
        /// certificate from the test CA, no client certificate asked for.
        case tls
        /// The same, and the server requires a client certificate (`--tls-auth-clients yes`).
        case mutualTLS
    }

    /// The certificate a TLS server presents.
    public enum ServerCertificate: Sendable {
        /// For localhost and 127.0.0.1, signed by the test CA.
        case valid
        /// The same, expired.
        case expired
        /// For other.example only.
        case otherHost
    }

    public let transport: Transport
    /// The TCP port (plain or TLS); no TCP listener at all for `.unixSocket`'s clients to miss.
    public let port: Int
    /// The unix socket path (`unix://` + this reaches the same server).
    public let unixSocket: String
    /// The PKI of a TLS server (its CA, the client certificate).
    public let pki: TestPKI?
    private let certificate: ServerCertificate
    private let extraArguments: [String]
    /// Its working directory (`--dir`): RDB and AOF files, the log.
    public let directory: String
    private var child: ChildProcess?

    /// The URL of the transport: `redis://127.0.0.1:PORT/0`, `unix:///…`, `rediss://127.0.0.1:PORT/0`.
    public var url: String {
        switch transport {
        case .tcp: return "redis://127.0.0.1:\(port)/0"
        case .unixSocket: return unixURL
        case .tls, .mutualTLS: return "rediss://127.0.0.1:\(port)/0"
        }
    }
    /// `unix:///…/redis.sock` (never TLS).
    public var unixURL: String { "unix://\(unixSocket)" }
    /// What a client of `url` needs: the test CA, and the client certificate for mutual TLS.
    public var tls: RedisTLSOptions {
        guard let pki else { return RedisTLSOptions() }
        return transport == .mutualTLS
            ? RedisTLSOptions(caFile: pki.caCert, certFile: pki.redisClientCert, keyFile: pki.redisClientKey)
            : RedisTLSOptions(caFile: pki.caCert)
    }

    private init(transport: Transport, port: Int, directory: String, pki: TestPKI?, certificate: ServerCertificate,
                 extraArguments: [String]) {
        self.transport = transport
        self.port = port
        self.directory = directory
        self.unixSocket = directory + "/redis.sock"
        self.pki = pki
        self.certificate = certificate
        self.extraArguments = extraArguments
    }

    /// Starts a server on a free loopback port and waits until it accepts connections.
    /// `extraArguments` go to redis-server as given (`--replicaof`, ACL users…).
    public static func start(_ transport: Transport = .tcp, certificate: ServerCertificate = .valid,
                             extraArguments: [String] = []) throws -> RedisServer {
        let pki: TestPKI? = transport == .tls || transport == .mutualTLS ? try TestPKI.shared() : nil
        let server = RedisServer(transport: transport, port: freeLoopbackPort(), directory: makeTemporaryDirectory("pushgw-redis"),
                                 pki: pki, certificate: certificate, extraArguments: extraArguments)
        try server.launch()
        return server
    }

    private func launch() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var arguments = ["--bind", "127.0.0.1",
                         "--unixsocket", unixSocket, "--unixsocketperm", "700",
                         "--save", "", "--appendonly", "no", "--daemonize", "no",
                         "--dir", directory, "--logfile", directory + "/redis.log"]
        if let pki {
            let (cert, key): (String, String)
            switch certificate {
            case .valid: (cert, key) = (pki.redisCert, pki.redisKey)
            case .expired: (cert, key) = (pki.redisExpiredCert, pki.redisExpiredKey)
            case .otherHost: (cert, key) = (pki.redisOtherHostCert, pki.redisOtherHostKey)
            }
            arguments += ["--port", "0", "--tls-port", String(port), "--tls-cert-file", cert, "--tls-key-file", key,
                          "--tls-ca-cert-file", pki.caCert, "--tls-auth-clients", transport == .mutualTLS ? "yes" : "no"]
        } else {
            arguments += ["--port", String(port)]
        }
        child = try ChildProcess("redis-server", arguments + extraArguments, captureOutput: false)
        try waitForPort(port)
        try waitForUnixSocket(unixSocket)
    }

    /// Stops the server (SIGTERM, after a SIGCONT in case it is paused), waits for its exit and
    /// removes its directory.
    public func stop() {
        terminate()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops it and starts a fresh, empty one on the same port and socket (with the same
    /// `nodes.conf`, for a cluster node).
    public func restart() throws {
        terminate()
        try launch()
    }

    private func terminate() {
        resume()
        child?.stop()
        child = nil
    }

    /// Freezes the server (SIGSTOP): connections stay open and nothing is answered, as with a
    /// hung Redis. `resume()` lets it go on where it stopped.
    public func pause() {
        if let child { kill(child.pid, SIGSTOP) }
    }

    /// Resumes a paused server (SIGCONT).
    public func resume() {
        if let child { kill(child.pid, SIGCONT) }
    }

    /// Kills the server with SIGKILL (no goodbye to clients) and waits for its exit.
    public func kill9() {
        child?.stop(signal: SIGKILL)
        child = nil
    }

    /// The server's process id, while it runs.
    public var pid: Int32? { child?.pid }

    /// Runs `redis-cli args…` on the unix socket (whatever the transport) and returns its
    /// stdout (`--raw` output).
    public func cli(_ args: [String]) throws -> String {
        let (status, out, err) = try runCommand("redis-cli", ["-s", unixSocket, "--raw"] + args)
        guard status == 0 else { throw TestSupportError("redis-cli \(args.joined(separator: " ")) failed: \(err)") }
        return out
    }

    deinit { stop() }
}

/// How many times Redis ran `command` (lower-case name), read from the text of
/// `INFO commandstats`; 0 when it never ran. Tests count round trips with it.
public func commandCalls(_ command: String, inInfo info: String) -> Int {
    let prefix = "cmdstat_\(command):calls="
    for line in info.split(whereSeparator: \.isNewline) where line.hasPrefix(prefix) {
        return Int(line.dropFirst(prefix.count).prefix { $0.isNumber }) ?? 0
    }
    return 0
}
