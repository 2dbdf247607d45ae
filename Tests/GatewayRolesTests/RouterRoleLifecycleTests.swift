import RedisClient
import XCTest
@testable import GatewayRoles

/// `RouterRole.Lifecycle` played as transcripts of events and the actions they must produce:
/// no sockets, no loop, no clock (times are given). Heartbeat every 1 s, claim round every 2 s.
final class RouterRoleLifecycleTests: XCTestCase {
    typealias Machine = RouterRole.Lifecycle

    private func machine() -> Machine {
        Machine(timing: Machine.Timing(heartbeatEveryMs: 1_000, claimEveryMs: 2_000))
    }

    /// Plays `onStart` to running (registered at `atMs`), checking every action on the way.
    private func makeRunning(_ m: inout Machine, atMs: Int64 = 100, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(m.onStart(), .register, file: file, line: line)
        XCTAssertEqual(m.onRegistered(nowMs: atMs), .beginRunning(claimAfterMs: 2_000), file: file, line: line)
        XCTAssertEqual(m.onHeartbeatDue(), .beat(againAfterMs: 1_000), file: file, line: line)
    }

    func testStartRegistersThenRunsHeartBeatsAndReads() {
        var m = machine()
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead, "nothing is read before the lease")
        XCTAssertFalse(m.isRegistered)
        XCTAssertEqual(m.onStart(), .register)
        XCTAssertEqual(m.onStart(), .none, "starting twice does nothing")
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead, "nor while registering")
        XCTAssertEqual(m.onRegistered(nowMs: 500), .beginRunning(claimAfterMs: 2_000))
        XCTAssertTrue(m.isRegistered)
        XCTAssertEqual(m.registeredAtMs, 500)
        XCTAssertEqual(m.ownSweeps, Machine.OwnSweeps(due: 1, inFlight: false),
                       "entries a previous run under the name left pending are swept once")
        XCTAssertEqual(m.onHeartbeatDue(), .beat(againAfterMs: 1_000), "running: every heartbeat arms the next")
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        XCTAssertTrue(m.isReading)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .none, "one read at a time")
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain)
        XCTAssertFalse(m.isReading)
    }

    func testARegisterThatFailsIsTriedAgainAfterABeatThenSucceeds() {
        var m = machine()
        XCTAssertEqual(m.onStart(), .register)
        XCTAssertEqual(m.onRegisterFailed(.disconnected), .registerLater(afterMs: 1_000, because: .failed(.disconnected)))
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead, "still not registered: nothing read")
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onRegisterFailed(.server("LOADING Redis is loading the dataset in memory")), .registerLater(afterMs: 1_000, because: .failed(.server("LOADING Redis is loading the dataset in memory"))),
                       "every failure is tried again")
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onRegistered(nowMs: 3_000), .beginRunning(claimAfterMs: 2_000))
        XCTAssertEqual(m.registeredAtMs, 3_000)
    }

    func testALeaseOfAnEarlierProcessIsWaitedOutAndTakenWhenItLapses() {
        var m = machine()
        XCTAssertEqual(m.onStart(), .register)
        XCTAssertEqual(m.onLeaseTaken(holder: "old", leaseUntil: 10_000), .registerLater(afterMs: 1_000, because: .leaseFirstSeen),
                       "the wait is said once")
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onLeaseTaken(holder: "old", leaseUntil: 10_000), .registerLater(afterMs: 1_000, because: .leaseStillHeld),
                       "the same lease, not renewed: wait on, silently")
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onRegisterFailed(.disconnected), .registerLater(afterMs: 1_000, because: .failed(.disconnected)))
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onLeaseTaken(holder: "old", leaseUntil: 10_000), .registerLater(afterMs: 1_000, because: .leaseStillHeld),
                       "a failure in between does not forget the lease first seen")
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onRegistered(nowMs: 4_000), .beginRunning(claimAfterMs: 2_000), "lapsed: taken")
    }

    func testALeaseRenewedWhileWaitingMeansTheNameIsTakenAndNothingIsRead() {
        var m = machine()
        XCTAssertEqual(m.onStart(), .register)
        XCTAssertEqual(m.onLeaseTaken(holder: "other", leaseUntil: 10_000), .registerLater(afterMs: 1_000, because: .leaseFirstSeen))
        XCTAssertEqual(m.onRegisterDue(), .register)
        XCTAssertEqual(m.onLeaseTaken(holder: "other", leaseUntil: 11_000), .reportNameTaken(holder: "other"))
        XCTAssertEqual(m.state, .nameTaken)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead)
        XCTAssertEqual(m.onHeartbeatDue(), .none, "no heartbeat under a name another process holds")
        XCTAssertFalse(m.isRegistered)
    }

    func testAReadThatFailsIsTriedAgainLaterAndCallsOfTheLastReadMakeTheNextOneNotBlock() {
        var m = machine()
        makeRunning(&m)
        XCTAssertEqual(m.onReadWanted(appsReady: false), .startCallsAwaitingRead, "every app at its cap: no read")
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        XCTAssertEqual(m.onReadAnswered(failure: .disconnected), .readAgainLater(afterMs: 200, failure: .disconnected))
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        XCTAssertFalse(m.isReadingWithoutBlocking)
        m.onCallsAwaitRead()
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: false), "calls of the last read wait for this one")
        XCTAssertTrue(m.isReadingWithoutBlocking)
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true), "none waits now: it blocks again")
    }

    func testCallsThatAwaitTheNextReadWhileOneIsInFlightMakeTheOneAfterNotBlock() {
        var m = machine()
        makeRunning(&m)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        // A call left while the read's entries were routed, and a read went out meanwhile.
        m.onCallsAwaitRead()
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: false))
    }

    func testOwnSweepsDueWhileASweepRunsAreNotStartedTwiceAndStayDueWhenOneFails() {
        var m = machine()
        m.onOwnSweepsDue(atLeast: 2)  // the reading connection reconnected before the lease
        makeRunning(&m)
        XCTAssertEqual(m.ownSweeps.due, 2, "the lease's sweep does not lower what the reconnect asked")
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: true))
        XCTAssertEqual(m.ownSweeps, Machine.OwnSweeps(due: 2, inFlight: true))
        m.onOwnSweepsDue(atLeast: 1)  // a lookup failed meanwhile
        XCTAssertEqual(m.onClaimRoundEnded(), .scheduleClaim(afterMs: 2_000))
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: false), "a sweep is in flight: the round does not start another")
        m.onOwnSweepAnswered(succeeded: false, filledPage: false)
        XCTAssertEqual(m.ownSweeps, Machine.OwnSweeps(due: 2, inFlight: false), "a failed sweep stays due")
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: true))
        m.onOwnSweepAnswered(succeeded: true, filledPage: false)
        XCTAssertEqual(m.ownSweeps.due, 1)
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: true))
        m.onOwnSweepAnswered(succeeded: true, filledPage: true)
        XCTAssertEqual(m.ownSweeps.due, 1, "a full page: more of its own entries wait, the next round sweeps again")
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: true))
        m.onOwnSweepAnswered(succeeded: true, filledPage: false)
        XCTAssertEqual(m.ownSweeps.due, 0)
        XCTAssertEqual(m.onClaimDue(), .claim(sweepOwn: false), "none due: the round takes over only")
    }

    func testADrainWhileReadingLetsTheReadAnswerAndStopsReadingAndClaimingButKeepsTheLease() {
        var m = machine()
        makeRunning(&m, atMs: 100)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        XCTAssertEqual(m.onDrain(nowMs: 1_000, timeoutMs: 5_000), .beginDrain)
        XCTAssertTrue(m.isStopping)
        XCTAssertTrue(m.isReading, "the read in flight still answers")
        XCTAssertTrue(m.isRegistered)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .none)
        XCTAssertEqual(m.onClaimDue(), .none, "nothing is taken over while draining")
        XCTAssertEqual(m.onClaimRoundEnded(), .none, "a round in flight does not arm the claim timer again")
        XCTAssertEqual(m.onHeartbeatDue(), .beat(againAfterMs: 1_000), "the lease is kept while the drain's calls are out")
        XCTAssertEqual(m.onDrainTick(liveCalls: 3, nowMs: 1_000), .drainTickLater(afterMs: 20))
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain, "its entries are routed, its waiting calls start")
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead, "and no read follows")
        XCTAssertEqual(m.onDrainTick(liveCalls: 1, nowMs: 2_000), .drainTickLater(afterMs: 20))
        XCTAssertEqual(m.onDrainTick(liveCalls: 0, nowMs: 2_020), .retire, "no call left: retired")
        XCTAssertEqual(m.onRetired(), .finishDrain)
        XCTAssertEqual(m.state, .retired)
        XCTAssertEqual(m.onDrain(nowMs: 3_000, timeoutMs: 5_000), .finishDrain, "a drain after the end finishes at once")
    }

    func testADrainThatFailsAReadStopsItWithoutRetrying() {
        var m = machine()
        makeRunning(&m)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: true))
        XCTAssertEqual(m.onDrain(nowMs: 1_000, timeoutMs: 5_000), .beginDrain)
        XCTAssertEqual(m.onReadAnswered(failure: .disconnected), .startCallsAwaitingRead, "no retry, no error counted")
    }

    func testADrainRetiresAtItsDeadlineWithCallsLeftAndASecondDrainKeepsTheFirstDeadline() {
        var m = machine()
        makeRunning(&m)
        XCTAssertEqual(m.onDrain(nowMs: 1_000, timeoutMs: 500), .beginDrain)
        XCTAssertEqual(m.onDrain(nowMs: 1_200, timeoutMs: 60_000), .none)
        XCTAssertEqual(m.onDrainTick(liveCalls: 4, nowMs: 1_499), .drainTickLater(afterMs: 20))
        XCTAssertEqual(m.onDrainTick(liveCalls: 4, nowMs: 1_500), .retire,
                       "the calls left stay pending in Redis, claimable by other processes")
        XCTAssertEqual(m.onDrain(nowMs: 1_600, timeoutMs: 500), .none, "retiring: the answer finishes every drain")
        XCTAssertEqual(m.onRetired(), .finishDrain)
    }

    func testADrainWhileRegisteringStartsNothingWhenTheRegistrationAnswers() {
        for answer in 0..<3 {
            var m = machine()
            XCTAssertEqual(m.onStart(), .register)
            XCTAssertEqual(m.onDrain(nowMs: 0, timeoutMs: 1_000), .beginDrain)
            XCTAssertEqual(m.onDrainTick(liveCalls: 0, nowMs: 0), .retire)
            let action: Machine.Action
            switch answer {
            case 0: action = m.onRegistered(nowMs: 10)
            case 1: action = m.onLeaseTaken(holder: "x", leaseUntil: 5)
            default: action = m.onRegisterFailed(.disconnected)
            }
            XCTAssertEqual(action, .none, "answer \(answer): no heartbeat, read or retry after a drain began")
            XCTAssertFalse(m.isRegistered)
            XCTAssertEqual(m.onRetired(), .finishDrain)
        }
    }

    func testADrainWhileTheRegisterTimerWaitsCancelsTheRegistration() {
        var m = machine()
        XCTAssertEqual(m.onStart(), .register)
        XCTAssertEqual(m.onRegisterFailed(.disconnected), .registerLater(afterMs: 1_000, because: .failed(.disconnected)))
        XCTAssertEqual(m.onDrain(nowMs: 0, timeoutMs: 1_000), .beginDrain)
        XCTAssertEqual(m.onRegisterDue(), .none, "a timer that fires after the drain began registers nothing")
    }

    func testADrainBeforeStartRetiresAtOnce() {
        var m = machine()
        XCTAssertEqual(m.onDrain(nowMs: 0, timeoutMs: 1_000), .beginDrain)
        XCTAssertEqual(m.onStart(), .none, "no start after a drain")
        XCTAssertEqual(m.onDrainTick(liveCalls: 0, nowMs: 0), .retire)
        XCTAssertEqual(m.onRetired(), .finishDrain)
    }

    func testAReadInFlightWhenTheDeadlineRetiresStillAnswers() {
        var m = machine()
        makeRunning(&m)
        m.onCallsAwaitRead()
        XCTAssertEqual(m.onReadWanted(appsReady: true), .read(blocks: false))
        XCTAssertEqual(m.onDrain(nowMs: 0, timeoutMs: 10), .beginDrain)
        XCTAssertEqual(m.onDrainTick(liveCalls: 2, nowMs: 10), .retire)
        XCTAssertTrue(m.isReadingWithoutBlocking, "calls that wait for that read still wait for its answer")
        XCTAssertEqual(m.onReadAnswered(failure: nil), .readAgain)
        XCTAssertEqual(m.onReadWanted(appsReady: true), .startCallsAwaitingRead)
    }
}
