import Foundation
import Glibc
import TestSupport
import XCTest

/// `pushgw run` under systemd's `Type=notify` with a watchdog (deploy/systemd/pushgw.service,
/// docs/operations.md "Under systemd"), as systemd starts it: `NOTIFY_SOCKET` names a datagram
/// socket (here the test's own) and `WATCHDOG_USEC` the interval. The gateway says `READY=1`,
/// pings `WATCHDOG=1` at least every half interval from its loop, says `RELOADING=1` then
/// `READY=1` around a SIGHUP, and `STOPPING=1` when SIGTERM drains it. A gateway whose loop is
/// stopped (SIGSTOP) stops pinging, which is what makes systemd restart a hung service.
final class ServiceNotificationsProcessTests: XCTestCase {
    func testReadinessReloadStopAndTheWatchdogReachSystemdsSocket() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let socket = try NotifySocket()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app(), "beta": ProcessWorld.app()])
        let log = world.directory + "/gateway.log"
        let run = [world.pushgw, "run", "--config", config, "--consumer", "notify"].map { "'" + $0 + "'" }.joined(separator: " ")
        let gateway = try ChildProcess("/bin/sh", ["-c", "NOTIFY_SOCKET='\(socket.path)' WATCHDOG_USEC=400000 exec \(run) > '\(log)' 2>&1"],
                                       captureOutput: false)
        defer { _ = gateway.stop(signal: SIGKILL) }

        let ready = try socket.receive(until: { $0.contains { $0.hasPrefix("READY=1") } })
        XCTAssertEqual(ready.first { $0.hasPrefix("READY=1") }, "READY=1\nSTATUS=running for 2 apps", "\(ready)")
        XCTAssertTrue(try mappedFiles(pid: gateway.pid).contains("libsystemd"), "under systemd, libsystemd is opened")
        let pings = try socket.receive(until: { $0.filter { $0 == "WATCHDOG=1" }.count >= 5 })
        XCTAssertGreaterThanOrEqual(pings.filter { $0 == "WATCHDOG=1" }.count, 5, "pings every 200 ms: \(pings)")

        kill(gateway.pid, SIGSTOP)
        usleep(300_000)
        socket.drain()
        usleep(600_000)
        XCTAssertEqual(socket.drain().filter { $0 == "WATCHDOG=1" }, [], "a stopped loop sends no ping")
        kill(gateway.pid, SIGCONT)
        _ = try socket.receive(until: { $0.contains("WATCHDOG=1") })

        kill(gateway.pid, SIGHUP)
        let reload = try socket.receive(until: { $0.contains { $0.hasPrefix("READY=1") } })
        let states = reload.filter { $0 != "WATCHDOG=1" }
        XCTAssertEqual(states, ["RELOADING=1", "READY=1\nSTATUS=running for 2 apps"], "\(reload)")
        XCTAssertTrue(textSoFar(log).contains(#""msg":"config reloaded""#), textSoFar(log))

        kill(gateway.pid, SIGTERM)
        let stop = try socket.receive(until: { $0.contains { $0.hasPrefix("STOPPING=1") } })
        XCTAssertTrue(stop.contains("STOPPING=1\nSTATUS=draining"), "\(stop)")
        XCTAssertEqual(gateway.stop(signal: SIGTERM), 0)
    }

    func testWithoutSystemdNothingIsSentAndTheGatewayRunsAsBefore() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let port = freeLoopbackPort()
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: #""listen": "127.0.0.1:\#(port)""#)
        let gateway = try world.gateway(config: config, consumer: "no-notify")
        try waitForPort(port)
        let maps = try mappedFiles(pid: gateway.pid)
        XCTAssertTrue(maps.contains("libhiredis"), "the running gateway's maps were read whole: \(maps.suffix(300))")
        XCTAssertFalse(maps.contains("libsystemd"), "outside systemd, libsystemd is not opened (CSystemdCalls)")
        XCTAssertEqual(gateway.stop(signal: SIGTERM), 0)
    }
}

/// systemd's notification socket, as the test's own: a datagram socket on a path.
private final class NotifySocket {
    let path = "/tmp/pushgw-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
    private let fd: Int32

    init() throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw TestSupportError("cannot bind \(path): errno \(errno)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        unlink(path)
    }

    /// Messages received until `done` holds for those received so far (at most 20 s).
    func receive(until done: ([String]) -> Bool) throws -> [String] {
        var messages: [String] = []
        let deadline = Date().addingTimeInterval(20)
        while !done(messages) {
            guard Date() < deadline else { throw TestSupportError("no such notification within 20 s; received: \(messages)") }
            if let message = next() { messages.append(message) }
        }
        return messages
    }

    /// What is waiting now.
    @discardableResult
    func drain() -> [String] {
        var messages: [String] = []
        while let message = next() { messages.append(message) }
        return messages
    }

    private func next() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
    }
}
