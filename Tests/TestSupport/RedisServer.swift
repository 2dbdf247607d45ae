import Foundation
import Glibc

/// A real `redis-server` (the Debian package) for one test: loopback TCP on a free port
/// plus a unix socket, no persistence, killed at the end.
///
/// Invariant: `port` and `unixSocket` stay the same across `restart()` and `kill9()` +
/// `restart()`, and a restart starts empty (`--save '' --appendonly no`), which is what a
/// Redis restart without persistence looks like to pushgw.
public final class RedisServer: @unchecked Sendable {
    public let port: Int
    /// The unix socket path (`unix://` + this reaches the same server).
    public let unixSocket: String
    private let directory: String
    private var child: ChildProcess?

    /// `redis://127.0.0.1:PORT/0`.
    public var url: String { "redis://127.0.0.1:\(port)/0" }
    /// `unix:///…/redis.sock`.
    public var unixURL: String { "unix://\(unixSocket)" }

    private init(port: Int, directory: String) {
        self.port = port
        self.directory = directory
        self.unixSocket = directory + "/redis.sock"
    }

    /// Starts a server on a free loopback port and waits until it accepts connections.
    public static func start() throws -> RedisServer {
        let server = RedisServer(port: freeLoopbackPort(), directory: makeTemporaryDirectory("pushgw-redis"))
        try server.launch()
        return server
    }

    private func launch() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        child = try ChildProcess("redis-server", [
            "--port", String(port), "--bind", "127.0.0.1",
            "--unixsocket", unixSocket, "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no", "--daemonize", "no",
            "--dir", directory, "--logfile", directory + "/redis.log",
        ], captureOutput: false)
        try waitForPort(port)
    }

    /// Stops the server (SIGTERM, after a SIGCONT in case it is paused), waits for its exit and
    /// removes its directory.
    public func stop() {
        resume()
        child?.stop()
        child = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stops it and starts a fresh, empty one on the same port and socket.
    public func restart() throws {
        stop()
        try launch()
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
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `redis-cli -p PORT args…` and returns its stdout (`--raw` output).
    public func cli(_ args: [String]) throws -> String {
        let (status, out, err) = try runCommand("redis-cli", ["-p", String(port), "--raw"] + args)
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
