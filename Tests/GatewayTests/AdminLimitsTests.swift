import EventLoop
import Foundation
@testable import AdminEndpoint
@testable import GatewayConfiguration
@testable import GatewayRoles
@testable import PushgwCommands
import Glibc
import TestSupport
import XCTest

/// The admin endpoint cannot take the descriptors APNs and Redis need (docs/operations.md,
/// "Limits"): connections are capped, idle and trickling ones closed, the soft descriptor
/// limit raised at start, and refused accepts logged a bounded number of times.
final class AdminLimitsTests: XCTestCase {
    private var fleet: GatewayFleet?

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    func testElevenHundredIdleAdminConnectionsAtA1024DescriptorLimitLeaveCallsDelivered() throws {
        let fleet = try GatewayFleet(app: #", "ring_timeout_s": 60"#)
        self.fleet = fleet
        let gw = try fleet.startGateway(consumer: "fd-test", ulimit: "-n 1024")
        try waitForPort(gw.adminPort)
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { (try? LoopbackHTTP.blockingRequest("/readyz", port: gw.adminPort).status) == 200 },
                      "the gateway is ready before the flood")

        // 1,100 idle connections to the admin port, held open by this process.
        raiseOwnDescriptorLimit(to: 4_096)
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<1_100 {
            guard let fd = connectWithoutWaiting(port: gw.adminPort) else { break }
            idle.append(fd)
        }
        XCTAssertEqual(idle.count, 1_100, "the test opened its 1,100 idle connections")
        usleep(500_000)

        // Calls written now need new descriptors in the gateway: its APNs pool connects on the
        // first push.
        let ids = (0..<200).map { "fd-\($0)" }
        try fleet.call(ids)
        let missing = fleet.waitForResults(ids, seconds: 20)
        XCTAssertEqual(missing, [], "every call has a result while the idle connections are held")
        let outcomes = fleet.results()
        XCTAssertEqual(ids.filter { outcomes[$0] != ["delivered_voip"] }, [], "and every call was delivered by VoIP")

        // The log stays small: no line per refused connection or failed accept.
        let lines = ((try? String(contentsOfFile: gw.log, encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertLessThan(gw.logBytes, 64 * 1024, "the log is bounded: \(gw.logBytes) bytes, \(lines.count) lines")
        XCTAssertFalse(lines.contains { $0.contains("Too many open files") && $0.contains("APNs") },
                       "APNs never lacked a descriptor")

        for fd in idle { close(fd) }
        idle.removeAll()
        XCTAssertTrue(GatewayFleet.wait(seconds: 30) {
            (try? LoopbackHTTP.blockingRequest("/metrics", port: gw.adminPort).status) == 200
        }, "the admin endpoint answers again once the idle connections are closed")
        gw.process.stop(signal: SIGTERM)
        XCTAssertEqual(gw.process.process.terminationStatus, 0, "and the gateway drains and exits 0")
    }

    func testRunRaisesTheSoftDescriptorLimitToTheHardOne() throws {
        let hard = DescriptorLimit.current().hard
        try XCTSkipIf(hard <= 512, "the hard limit here (\(hard)) leaves nothing to raise")
        let fleet = try GatewayFleet()
        self.fleet = fleet
        let raised = try fleet.startGateway(consumer: "rlimit-test", ulimit: "-Sn 512")
        try waitForPort(raised.adminPort)
        let limits = try String(contentsOfFile: "/proc/\(raised.process.pid)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map(String.init) ?? ""
        let numbers = line.split(separator: " ").compactMap { Int($0) }
        XCTAssertEqual(numbers.count, 2, line)
        XCTAssertEqual(numbers.first, numbers.last, "the soft limit was raised to the hard one: \(line)")
        XCTAssertEqual(raised.lines("file descriptor limit raised").count, 1, "and the raise is logged")
    }

    // MARK: In process: the cap, the request deadline, the reserve

    private func server(_ configure: (inout AdminServer.Limits) -> Void) throws -> (EventLoop, AdminServer, Int) {
        let loop = EventLoop()
        var limits = AdminServer.Limits()
        configure(&limits)
        let server = AdminServer(loop: loop, limits: limits) { _ in
            AdminResponse(status: 200, contentType: "text/plain", body: "ok\n")
        }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        return (loop, server, port)
    }

    func testConnectionsBeyondTheCapWaitWithoutADescriptorUntilOneCloses() throws {
        let (loop, server, port) = try server { $0.maxConnections = 4 }
        defer { server.close(); loop.close() }
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<10 { if let fd = connectWithoutWaiting(port: port) { idle.append(fd) } }
        loop.run(waitingFor: "the first four are accepted", timeoutMs: 5_000) { server.stats.accepted >= 4 }
        loop.run(forMs: 300)
        XCTAssertEqual(server.openConnections, 4, "never more than the cap are open")
        XCTAssertEqual(server.stats.accepted, 4, "the others wait in the backlog, holding no descriptor of the server")
        XCTAssertGreaterThanOrEqual(server.stats.stopsAtCap, 1)
        for fd in idle { close(fd) }
        idle.removeAll()
        loop.run(waitingFor: "closed by their clients, the first four make room for the waiting ones, which close too: \(server.stats)",
                 timeoutMs: 5_000) { server.openConnections == 0 && server.stats.accepted == 10 }
        let reply = try LoopbackHTTP.request("GET", "/healthz", port: port, loop: loop)
        XCTAssertEqual(reply.status, 200, "and a new request is answered")
    }

    func testATricklingClientIsClosedAtTheRequestDeadline() throws {
        let (loop, server, port) = try server { $0.requestDeadlineMs = 500 }
        defer { server.close(); loop.close() }
        let closedByServer = Flag()
        // One byte every 100 ms: evhttp's own timeout (10 s without a byte) would never fire.
        Thread.detachNewThread {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = in_port_t(UInt16(port).bigEndian)
            _ = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            let bytes = Array("GET /healthz HTTP/1.1\r\nX-Slow: ".utf8) + [UInt8](repeating: 0x61, count: 100)
            for byte in bytes {
                var b = byte
                if send(fd, &b, 1, Int32(MSG_NOSIGNAL)) <= 0 { break }
                usleep(100_000)
            }
            closedByServer.set()
        }
        loop.run(waitingFor: "the trickling client was cut off within seconds", timeoutMs: 5_000) { closedByServer.isSet }
        XCTAssertEqual(server.stats.closedAtDeadline, 1, "by the request deadline")
        XCTAssertEqual(server.openConnections, 0)
    }

    func testAdmissionStopsAtTheCapAndKeepsTheDescriptorReserve() {
        var limits = AdminServer.Limits()
        limits.maxConnections = 64
        limits.reservedDescriptors = 128
        let admission = AdminAdmission(limits: limits, descriptorLimit: 1_024)
        XCTAssertEqual(admission.verdict(open: 63), .accept)
        XCTAssertEqual(admission.verdict(open: 64), .stopAtCap)
        XCTAssertFalse(admission.isWithinReserve(descriptor: 895), "895 leaves more than 128 of 1,024")
        XCTAssertTrue(admission.isWithinReserve(descriptor: 896), "from 896 on, fewer than 128 are left")
    }

    // MARK: Helpers

    private func raiseOwnDescriptorLimit(to wanted: Int) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    /// A non-blocking connect to 127.0.0.1:`port`; the socket, whether or not it completed.
    private func connectWithoutWaiting(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let rc = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 || errno == EINPROGRESS else {
            close(fd)
            return nil
        }
        return fd
    }
}

/// A flag one thread sets and another reads.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
    func set() { lock.lock(); value = true; lock.unlock() }
}
