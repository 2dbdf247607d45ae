import EventLoop
import Foundation
import GatewayConfiguration
import Glibc
import TestSupport
import XCTest
@testable import AdminEndpoint

/// The admin endpoint cannot take the descriptors APNs and Redis need (docs/operations.md,
/// "Limits"): connections are capped and trickling ones closed, in process; the same limits
/// with a running gateway are in `DescriptorLimitProcessTests`.
final class AdminLimitsTests: XCTestCase {
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
        for _ in 0..<10 { if let fd = LoopbackHTTP.connectWithoutWaiting(port: port) { idle.append(fd) } }
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
}

/// A flag one thread sets and another reads.
private final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return value }
    func set() { lock.lock(); value = true; lock.unlock() }
}
