import HTTPMessages
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
            HTTPResponse(status: 200, contentType: "text/plain", body: "ok\n")
        }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        return (loop, server, port)
    }

    /// Whether the server closed `fd` (reads end of file without blocking).
    private func closedByServer(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_DONTWAIT)) == 0
    }

    func testBeyondTheCapANewConnectionTakesTheOldestIdleOnesPlace() throws {
        let (loop, server, port) = try server { $0.maxConnections = 4 }
        defer { server.close(); loop.close() }
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<10 {
            if let fd = LoopbackHTTP.connectWithoutWaiting(port: port) { idle.append(fd) }
            loop.run(forMs: 20)  // one after another, so "oldest" is well defined
        }
        loop.run(waitingFor: "all ten accepted: \(server.stats)", timeoutMs: 5_000) { server.stats.accepted == 10 }
        loop.run(forMs: 100)
        XCTAssertEqual(server.openConnections, 4, "never more than the cap stay open")
        XCTAssertEqual(server.stats.evicted, 6)
        XCTAssertEqual(idle.map(closedByServer), Array(repeating: true, count: 6) + Array(repeating: false, count: 4),
                       "the six oldest gave way to the newer ones")
        let reply = try LoopbackHTTP.request("GET", "/healthz", port: port, loop: loop)
        XCTAssertEqual(reply.status, 200, "and a probe gets in while the four newest are held")
    }

    func testATrustedConnectionGivesWayOnlyAfterTheUntrustedOnes() throws {
        let loop = EventLoop()
        var limits = AdminServer.Limits()
        limits.maxConnections = 3
        let server = AdminServer(loop: loop, limits: limits) { request in
            var response = HTTPResponse(status: 200, contentType: "text/plain", body: "ok\n")
            response.trusted = request.path == "/signed-in"
            return response
        }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        defer { server.close(); loop.close() }
        // A kept-alive connection whose request proved a token: the server marks it trusted.
        let trusted = try XCTUnwrap(try? LoopbackHTTP.connected(port: port).get())
        defer { close(trusted) }
        let request = Array("GET /signed-in HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(trusted, $0.baseAddress, $0.count, 0) }
        loop.run(forMs: 200)
        var idle: [Int32] = []
        defer { for fd in idle { close(fd) } }
        for _ in 0..<6 {
            if let fd = LoopbackHTTP.connectWithoutWaiting(port: port) { idle.append(fd) }
            loop.run(forMs: 20)
        }
        loop.run(waitingFor: "all accepted", timeoutMs: 5_000) { server.stats.accepted == 7 }
        loop.run(forMs: 100)
        XCTAssertEqual(server.stats.evicted, 4)
        var answer = [UInt8](repeating: 0, count: 4_096)
        XCTAssertGreaterThan(recv(trusted, &answer, answer.count, Int32(MSG_DONTWAIT)), 0, "the trusted one got its answer")
        XCTAssertFalse(closedByServer(trusted), "and stays, though it is the oldest: the untrusted gave way first")
        XCTAssertEqual(idle.map(closedByServer), [true, true, true, true, false, false])
    }

    func testOneClientsConnectionsGiveWayOnlyToItsOwn() throws {
        let (loop, server, port) = try server {
            $0.maxConnections = 8
            $0.maxConnectionsPerClient = 4
        }
        defer { server.close(); loop.close() }
        var first: [Int32] = [], second: [Int32] = []
        defer { for fd in first + second { close(fd) } }
        for _ in 0..<4 {
            if let fd = LoopbackHTTP.connectWithoutWaiting(port: port, from: "127.0.0.1") { first.append(fd) }
            loop.run(forMs: 20)
        }
        for _ in 0..<10 {
            if let fd = LoopbackHTTP.connectWithoutWaiting(port: port, from: "127.0.0.2") { second.append(fd) }
            loop.run(forMs: 20)
        }
        loop.run(waitingFor: "all accepted", timeoutMs: 5_000) { server.stats.accepted == 14 }
        loop.run(forMs: 100)
        XCTAssertEqual(first.map(closedByServer), [false, false, false, false],
                       "127.0.0.2 reconnecting ten times takes none of 127.0.0.1's places")
        XCTAssertEqual(second.filter(closedByServer).count, 6, "it is held to its own four")
        XCTAssertEqual(server.openConnections, 8)
    }

    func testAConnectionWaitingForItsAnswerNeverGivesWay() throws {
        let loop = EventLoop()
        var limits = AdminServer.Limits()
        limits.maxConnections = 2
        var pending: [(HTTPResponse) -> Void] = []
        let server = AdminServer(loop: loop, limits: limits, answering: { _, answer in pending.append(answer) })
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        defer { server.close(); loop.close() }
        let replies = [ThreadResult<Int>(), ThreadResult<Int>()]
        for reply in replies {
            Thread.detachNewThread { reply.set((try? LoopbackHTTP.blockingRequest("/slow", port: port))?.status ?? -1) }
        }
        loop.run(waitingFor: "two requests waiting for their answers", timeoutMs: 5_000) { pending.count == 2 }
        let third = ThreadResult<Int>()
        Thread.detachNewThread { third.set((try? LoopbackHTTP.blockingRequest("/healthz", port: port))?.status ?? -1) }
        loop.run(forMs: 300)
        XCTAssertEqual(server.stats.accepted, 2, "no place: the newcomer waits in the listen backlog, no waiting request is cut")
        XCTAssertEqual(server.stats.evicted, 0)
        for answer in pending { answer(HTTPResponse(status: 200, contentType: "text/plain", body: "late\n")) }
        loop.run(waitingFor: "both answered, and the newcomer's request taken", timeoutMs: 5_000) {
            replies.allSatisfy { $0.get() != nil } && pending.count == 3
        }
        XCTAssertEqual(replies.map { $0.get() }, [200, 200])
        guard pending.count == 3 else { return XCTFail("the newcomer's request never came") }
        pending[2](HTTPResponse(status: 200, contentType: "text/plain", body: "ok\n"))
        loop.run(waitingFor: "the newcomer answered", timeoutMs: 5_000) { third.get() != nil }
        XCTAssertEqual(third.get(), 200)
    }

    func testConnectionsAreAcceptedAtABoundedRate() {
        var limits = AdminServer.Limits()
        limits.acceptsPerSecond = 1_000
        limits.acceptBurst = 16
        var admission = AdminAdmission(limits: limits, descriptorLimit: 1_024)
        for _ in 0..<15 { XCTAssertNil(admission.takeAccept(nowMs: 0)) }
        XCTAssertEqual(admission.takeAccept(nowMs: 0), 1, "the burst spent, the next accept in 1 ms")
        XCTAssertNil(admission.takeAccept(nowMs: 2), "2 ms refilled two")
        XCTAssertNotNil(admission.takeAccept(nowMs: 2))
        XCTAssertNil(admission.takeAccept(nowMs: 1_000))
    }

    func testAConnectionAskingTooFastIsClosedAfterItsAnswer() throws {
        let (loop, server, port) = try server { $0.requestsPerConnectionPerSecond = 3 }
        defer { server.close(); loop.close() }
        let fd = try XCTUnwrap(try? LoopbackHTTP.connected(port: port).get())
        defer { close(fd) }
        let request = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        var answers = 0
        var closed = false
        var buffer = [UInt8](repeating: 0, count: 4_096)
        for _ in 0..<10 where !closed {
            _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            loop.run(forMs: 30)
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                answers += 1
                if String(decoding: buffer[0..<n], as: UTF8.self).contains("Connection: close") { closed = true }
            }
        }
        XCTAssertEqual(answers, 4, "three requests kept alive, the fourth answered and closed")
        XCTAssertTrue(closed)
        loop.run(forMs: 30)
        XCTAssertEqual(recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT)), 0, "the server closed it")
    }

    func testPlacementPrefersIdleUntrustedOldestAndRefusesOnlyWhenAllAreAnswering() {
        var limits = AdminServer.Limits()
        limits.maxConnections = 3
        limits.maxConnectionsPerClient = 2
        let admission = AdminAdmission(limits: limits, descriptorLimit: 1_024)
        let a = ClientAddress(address: "10.0.0.1"), b = ClientAddress(address: "10.0.0.2"), c = ClientAddress(address: "10.0.0.3")
        func candidate(_ serial: Int, _ client: ClientAddress, trusted: Bool = false, answering: Bool = false, at ms: Int64) -> AdminAdmission.Candidate {
            AdminAdmission.Candidate(serial: serial, client: client, trusted: trusted, answering: answering, lastActivityMs: ms)
        }
        XCTAssertEqual(admission.place(a, among: []), .keep(closing: nil))
        let open = [candidate(1, a, trusted: true, at: 0), candidate(2, a, at: 5), candidate(3, b, at: 9)]
        XCTAssertEqual(admission.place(a, among: open), .keep(closing: 2), "a's own share: its untrusted one, though newer")
        XCTAssertEqual(admission.place(c, among: open), .keep(closing: 2), "the global cap: the oldest untrusted of all")
        let busy = [candidate(1, a, trusted: true, at: 0), candidate(2, a, answering: true, at: 5), candidate(3, b, answering: true, at: 9)]
        XCTAssertEqual(admission.place(c, among: busy), .keep(closing: 1), "then a trusted idle one")
        let allBusy = busy.map { candidate($0.serial, $0.client, trusted: $0.trusted, answering: true, at: $0.lastActivityMs) }
        XCTAssertEqual(admission.place(c, among: allBusy), .refuse)
        XCTAssertFalse(admission.canMakeRoom(among: allBusy))
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

    func testAdmissionKeepsTheDescriptorReserve() {
        var limits = AdminServer.Limits()
        limits.reservedDescriptors = 128
        let admission = AdminAdmission(limits: limits, descriptorLimit: 1_024)
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
