import Foundation
import Glibc
import TestSupport
import XCTest

/// The admin endpoint of a running gateway cannot take the descriptors APNs and Redis need
/// (docs/operations.md, "Limits"): idle connections beyond the cap leave calls delivered,
/// refused accepts are logged a bounded number of times, and `pushgw run` raises the soft
/// descriptor limit at start.
final class DescriptorLimitProcessTests: XCTestCase {
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
            guard let fd = LoopbackHTTP.connectWithoutWaiting(port: gw.adminPort) else { break }
            idle.append(fd)
        }
        XCTAssertEqual(idle.count, 1_100, "the test opened its 1,100 idle connections")
        usleep(500_000)
        // The probes get in meanwhile: each new connection takes an idle one's place.
        let probes = (0..<5).map { _ in ConnectionFlood.probe("/healthz", port: gw.adminPort, limitMs: 1_000) }
        XCTAssertEqual(probes.map { $0?.status }, [200, 200, 200, 200, 200], "each /healthz answered within 1 s: \(probes)")

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
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let hard = limit.rlim_max
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

    private func raiseOwnDescriptorLimit(to wanted: Int) {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
