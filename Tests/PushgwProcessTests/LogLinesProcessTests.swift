import Foundation
import Glibc
import TestSupport
import XCTest

/// The gateway's log as a pipeline reads it (docs/operations.md, "Logs"), on the real output of
/// `pushgw run`: every line starts `time`, `level`, `msg` in that order; `/` is written as it
/// is; the cause of a line is its `error`; under journald (stdout is the stream
/// `JOURNAL_STREAM` names) each line starts with its syslog priority, and elsewhere it does
/// not; and an admin endpoint whose port is taken says it cannot listen, then that it listens
/// once the port is free, never that it listens while it does not.
final class LogLinesProcessTests: XCTestCase {
    func testLinesStartWithTimeLevelMsgAndCarryTheirPriorityUnderJournald() throws {
        let world = try ProcessWorld()
        defer { world.stop() }
        let port = freeLoopbackPort()
        let taken = try TakenPort(port)
        let config = try world.writeConfig(apps: ["acme": ProcessWorld.app()], admin: #""listen": "127.0.0.1:\#(port)""#)
        let log = world.directory + "/journal-stream.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        var facts = stat()
        XCTAssertEqual(stat(log, &facts), 0)
        let run = [world.pushgw, "run", "--config", config, "--consumer", "log-lines"].map { "'" + $0 + "'" }.joined(separator: " ")
        // As systemd starts a unit whose stdout is the journal: the variable names stdout.
        let gateway = try ChildProcess("/bin/sh", ["-c", "JOURNAL_STREAM=\(facts.st_dev):\(facts.st_ino) exec \(run) >> '\(log)' 2>&1"],
                                       captureOutput: false)
        defer { _ = gateway.stop(signal: SIGKILL) }
        try waitUntil("the admin endpoint to say it cannot listen") { textSoFar(log).contains("admin endpoint cannot listen") }
        XCTAssertFalse(textSoFar(log).contains(#""msg":"admin endpoint","#), "no line says it listens while the port is taken")
        taken.release()
        try waitUntil("the admin endpoint to listen after all", timeoutMs: 30_000) { textSoFar(log).contains("admin endpoint listening after all") }
        try waitForPort(port)
        XCTAssertEqual(gateway.stop(signal: SIGTERM), 0)

        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertGreaterThan(lines.count, 3, lines.joined(separator: "\n"))
        let priorities = ["error": "<3>", "warn": "<4>", "info": "<6>", "debug": "<7>"]
        for line in lines {
            let match = line.wholeMatch(of: /<(\d)>\{"time":"[0-9T:.\-]+Z","level":"(\w+)","msg":"[^"]*"(,.*)?\}/)
            XCTAssertNotNil(match, "a line under journald is <N>{time, level, msg, …}: \(line)")
            if let match { XCTAssertEqual("<\(match.1)>", priorities[String(match.2)], line) }
            XCTAssertFalse(line.contains(#"\/"#), "`/` is written as it is: \(line)")
            XCTAssertFalse(line.contains(#""problem":"#) || line.contains(#""reason":"#), "a line's cause is `error`: \(line)")
        }
        let cannot = try XCTUnwrap(lines.first { $0.contains("admin endpoint cannot listen") })
        XCTAssertTrue(cannot.hasPrefix("<3>"), cannot)
        XCTAssertTrue(cannot.contains(#""error":"#), cannot)
        XCTAssertTrue(lines.first { $0.contains("admin endpoint listening after all") }?.hasPrefix("<6>") == true)

        // The same gateway writing to a file it was not started on by systemd: no prefix.
        let plain = world.directory + "/plain.log"
        let second = try world.gateway(config: config, consumer: "log-lines-plain", log: plain)
        try waitUntil("a start line") { textSoFar(plain).contains(#""msg":"admin endpoint""#) }
        XCTAssertEqual(second.stop(signal: SIGTERM), 0)
        for line in try String(contentsOfFile: plain, encoding: .utf8).split(separator: "\n") {
            XCTAssertTrue(line.hasPrefix(#"{"time":""#), "no priority prefix outside the journal: \(line)")
        }
    }
}

/// A loopback port something else listens on, until `release`.
private final class TakenPort {
    private var fd: Int32

    init(_ port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 1) == 0 else { throw TestSupportError("cannot take port \(port): errno \(errno)") }
    }

    func release() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    deinit { release() }
}
