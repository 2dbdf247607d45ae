import Foundation
import Glibc
import TestSupport
import XCTest

/// Two gateways under one `--consumer` name would take each other's entries for their own:
/// the second is refused at start (exit 2, saying what to fix), while a restart under its own
/// name waits out the previous run's lease and carries on with what that run left pending.
final class ConsumerNameTests: XCTestCase {
    private var fleet: GatewayFleet?

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    private func leased(_ fleet: GatewayFleet, _ name: String) -> Bool {
        !((try? fleet.redis.cli(["ZSCORE", "pushgw:consumers", name])) ?? "").trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    func testASecondLiveGatewayWithTheSameNameIsRefusedWithExitStatus2() throws {
        let fleet = try GatewayFleet()
        self.fleet = fleet
        let first = try fleet.startGateway(consumer: "twin-name")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { self.leased(fleet, "twin-name") }, "the first gateway registered")
        let second = try fleet.startGateway(consumer: "twin-name")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { !second.process.isRunning }, "the second gateway gives up")
        second.process.stop()
        XCTAssertEqual(second.process.process.terminationStatus, 2, "with exit status 2")
        let text = (try? String(contentsOfFile: second.log, encoding: .utf8)) ?? ""
        XCTAssertTrue(text.contains("pushgw run: consumer name \"twin-name\" is in use by another live gateway")
                      && text.contains("give each process its own --consumer"), "saying what is wrong and the fix: \(text)")
        XCTAssertTrue(first.process.isRunning, "the first one carries on")
        try fleet.call(["after-refusal"])
        XCTAssertEqual(fleet.waitForResults(["after-refusal"], seconds: 10), [], "and routes")
    }

    func testARestartUnderItsOwnNameWaitsOutTheOldLeaseAndFinishesWhatTheOldRunLeftPending() throws {
        let fleet = try GatewayFleet(simulator: #", "default_scenario": "slow:1500""#)
        self.fleet = fleet
        let old = try fleet.startGateway(consumer: "restarted")
        XCTAssertTrue(GatewayFleet.wait(seconds: 15) { self.leased(fleet, "restarted") })
        let ids = (0..<20).map { "left-\($0)" }
        try fleet.call(ids)
        XCTAssertTrue(GatewayFleet.wait(seconds: 10) { fleet.simulatorRequestsSoFar() >= 1 }, "pushes are out")
        old.process.stop(signal: SIGKILL)
        let killed = Date()
        let new = try fleet.startGateway(consumer: "restarted")
        let missing = fleet.waitForResults(ids, seconds: 20)
        XCTAssertEqual(missing, [], "every call the killed run left pending finished")
        XCTAssertTrue(new.process.isRunning, "the restart was not refused")
        XCTAssertEqual(new.lines("consumer name leased by an earlier process; waiting for its lease to lapse or be renewed").count, 1,
                       "it waited for the old lease")
        let seconds = Date().timeIntervalSince(killed)
        XCTAssertLessThan(seconds, 15, "within seconds of the restart, not at the 2-minute own-entries rule (\(seconds) s)")
    }
}
