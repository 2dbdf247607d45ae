import XCTest
@testable import RedisClient

/// `RedisConnection.StateMachine` played as transcripts of events and the actions they must
/// produce: no sockets, no loop, no clock (times are given).
final class RedisConnectionStateMachineTests: XCTestCase {
    typealias Machine = RedisConnection.StateMachine
    typealias Step = RedisConnection.HandshakeStep

    private let primary = RedisURL.Endpoint.tcp(host: "10.0.0.1", port: 6379)
    private let replica = RedisURL.Endpoint.tcp(host: "10.0.0.2", port: 6379)
    private let target = "redis://u:***@10.0.0.1:6379/2"

    /// A machine for `redis://u:pw@…/2` (AUTH, SELECT), watchdog 5 s.
    private func machine(viaSentinels: Bool = false) -> Machine {
        let url = try! RedisURL(parsing: "redis://u:pw@10.0.0.1:6379/2")
        return Machine(watchdogMs: 5_000, viaSentinels: viaSentinels,
                       handshake: Step.steps(url: url, named: false, viaSentinels: viaSentinels))
    }

    /// Plays `onStart` to `ready` and checks every action on the way.
    private func makeReady(_ m: inout Machine, at nowMs: Int64 = 0, host: RedisURL.Endpoint? = nil,
                           file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(m.onStart(nowMs: nowMs), .locate(watchdogMs: 5_000), file: file, line: line)
        connect(&m, host: host ?? primary, file: file, line: line)
    }

    /// Plays `onLocated` to `ready` from `locating`.
    private func connect(_ m: inout Machine, host: RedisURL.Endpoint, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(m.onLocated(host, target: target), .openTransport(host: host), file: file, line: line)
        XCTAssertEqual(m.onTransportConnected(), .sendHandshake(m.handshake), file: file, line: line)
        for _ in m.handshake.dropLast() {
            XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .none, "no action until the last step is answered",
                           file: file, line: line)
        }
        XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .becomeReady, file: file, line: line)
        XCTAssertTrue(m.isReady, file: file, line: line)
    }

    func testTheHandshakeIsAuthThenNameThenSelectThenRole() throws {
        let url = try RedisURL(parsing: "rediss://pushgw:pw@h:1/3")
        XCTAssertEqual(Step.steps(url: url, named: true, viaSentinels: true),
                       [.authenticate(user: "pushgw"), .setName, .selectDatabase(3), .checkPrimary])
        XCTAssertEqual(Step.steps(url: try RedisURL(parsing: "redis://h:1/0"), named: false, viaSentinels: false), [],
                       "no password, no name, db 0, no sentinels: no handshake")
        XCTAssertEqual(Step.steps(url: try RedisURL(parsing: "redis://:pw@h:1"), named: false, viaSentinels: false),
                       [.authenticate(user: nil)])
    }

    func testANewConnectionLocatesConnectsShakesHandsAndCommandsWaitUntilReady() {
        var m = machine()
        XCTAssertEqual(m.onSend(waiting: 0, maxQueued: 2), .wait, "before start, commands wait")
        XCTAssertEqual(m.onStart(nowMs: 0), .locate(watchdogMs: 5_000))
        XCTAssertEqual(m.onStart(nowMs: 1), .none, "starting twice does nothing")
        XCTAssertEqual(m.onLocated(primary, target: target), .openTransport(host: primary))
        XCTAssertEqual(m.onSend(waiting: 1, maxQueued: 2), .wait)
        XCTAssertEqual(m.onSend(waiting: 2, maxQueued: 2), .refuse(.disconnected), "the waiting queue is bounded")
        XCTAssertEqual(m.onTransportConnected(), .sendHandshake([.authenticate(user: "u"), .selectDatabase(2)]))
        XCTAssertEqual(m.onSend(waiting: 0, maxQueued: 2), .wait, "still waiting during the handshake")
        XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .none)
        XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .becomeReady)
        XCTAssertEqual(m.onSend(waiting: 5, maxQueued: 2), .write, "ready: written at once")
        XCTAssertEqual(m.stats, RedisConnection.Stats(ready: 1))
        XCTAssertNil(m.lastProblem)
    }

    func testALostConnectionReconnectsWithGrowingBackoffUntilReadyAgain() {
        var m = machine()
        makeReady(&m)
        XCTAssertEqual(m.onTransportClosed(reason: "connection reset by peer"),
                       .dropConnection(reason: "\(target): connection reset by peer", reconnect: .afterBackoff(attempt: 0)))
        XCTAssertEqual(m.onSend(waiting: 0, maxQueued: 2), .wait, "commands sent meanwhile wait for the next connection")
        for attempt in 1...3 {
            XCTAssertEqual(m.onBackoffElapsed(nowMs: 100), .locate(watchdogMs: 5_000))
            XCTAssertEqual(m.onLocated(primary, target: target), .openTransport(host: primary))
            XCTAssertEqual(m.onTransportClosed(reason: "connection refused"),
                           .failAttempt(reason: "\(target): connection refused", reconnect: .afterBackoff(attempt: attempt)),
                           "each failed attempt backs off longer")
        }
        XCTAssertEqual(m.onBackoffElapsed(nowMs: 200), .locate(watchdogMs: 5_000))
        connect(&m, host: primary)
        XCTAssertEqual(m.stats, RedisConnection.Stats(ready: 2, connectFailures: 3, lost: 1))
        XCTAssertNil(m.lastProblem, "ready again: no problem to report")
        XCTAssertEqual(m.onTransportClosed(reason: "EOF"),
                       .dropConnection(reason: "\(target): EOF", reconnect: .afterBackoff(attempt: 0)),
                       "a connect resets the backoff")
    }

    func testARefusedHandshakeStepFailsTheAttemptNamingTheStepAndTheServer() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 0), .locate(watchdogMs: 5_000))
        XCTAssertEqual(m.onLocated(primary, target: target), .openTransport(host: primary))
        XCTAssertEqual(m.onTransportConnected(), .sendHandshake([.authenticate(user: "u"), .selectDatabase(2)]))
        let refusal = Step.authenticate(user: "u").refusal(of: .failure(.server("WRONGPASS invalid username-password pair")))
        XCTAssertEqual(m.onHandshakeAnswered(refusal: refusal),
                       .failAttempt(reason: "AUTH as user 'u' refused by \(target): WRONGPASS invalid username-password pair",
                                    reconnect: .afterBackoff(attempt: 0)))
        XCTAssertEqual(m.lastProblem, "AUTH as user 'u' refused by \(target): WRONGPASS invalid username-password pair")
        XCTAssertEqual(m.stats.connectFailures, 1)
    }

    func testTheWatchdogGivesAnAttemptItsTimeAndACommandItsAllowance() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 1_000), .locate(watchdogMs: 5_000))
        XCTAssertEqual(m.onLocated(primary, target: target), .openTransport(host: primary))
        XCTAssertEqual(m.onWatchdogFired(nowMs: 4_000, oldestUnanswered: nil), .armWatchdog(afterMs: 2_000),
                       "an attempt has watchdogMs from its start")
        XCTAssertEqual(m.onWatchdogFired(nowMs: 6_000, oldestUnanswered: nil),
                       .failAttempt(reason: "\(target): not ready within 5000 ms", reconnect: .afterBackoff(attempt: 0)))
        XCTAssertEqual(m.stats.watchdogFirings, 1)
        XCTAssertEqual(m.onWatchdogFired(nowMs: 7_000, oldestUnanswered: nil), .none, "tolerated: armed for the attempt gone")

        XCTAssertEqual(m.onBackoffElapsed(nowMs: 7_000), .locate(watchdogMs: 5_000))
        connect(&m, host: primary)
        XCTAssertEqual(m.onWatchdogFired(nowMs: 8_000, oldestUnanswered: nil), .none, "nothing in flight: nothing to watch")
        XCTAssertEqual(m.onWatchdogFired(nowMs: 8_000, oldestUnanswered: (sinceMs: 7_500, allowanceMs: 6_000)),
                       .armWatchdog(afterMs: 5_500), "a BLOCK command's allowance includes its block time")
        XCTAssertEqual(m.onWatchdogFired(nowMs: 13_500, oldestUnanswered: (sinceMs: 7_500, allowanceMs: 6_000)),
                       .dropConnection(reason: "\(target): no reply within 6000 ms (watchdog)", reconnect: .afterBackoff(attempt: 0)))
        XCTAssertEqual(m.stats.watchdogFirings, 2)
    }

    func testThroughSentinelsTheRoleIsCheckedAndReadonlyOrLoadingSendsItBack() {
        var m = machine(viaSentinels: true)
        XCTAssertEqual(m.handshake, [.authenticate(user: "u"), .selectDatabase(2), .checkPrimary])
        XCTAssertEqual(m.onStart(nowMs: 0), .locate(watchdogMs: 5_000))
        XCTAssertEqual(m.onLocateFailed(reason: "no sentinel named the primary of 'mymaster': sentinel a:1: connection refused"),
                       .failAttempt(reason: "no sentinel named the primary of 'mymaster': sentinel a:1: connection refused",
                                    reconnect: .afterBackoff(attempt: 0)),
                       "no sentinel reachable fails like a Redis that is down")
        XCTAssertEqual(m.onBackoffElapsed(nowMs: 50), .locate(watchdogMs: 5_000))
        XCTAssertEqual(m.onLocated(replica, target: target), .openTransport(host: replica))
        XCTAssertEqual(m.onTransportConnected(), .sendHandshake(m.handshake))
        XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .none)
        XCTAssertEqual(m.onHandshakeAnswered(refusal: nil), .none)
        let role = Step.checkPrimary.refusal(of: .success(.array([.bulk(Array("slave".utf8)), .bulk(Array("10.0.0.1".utf8))])))
        XCTAssertEqual(role, "it is a replica, not the primary")
        XCTAssertEqual(m.onHandshakeAnswered(refusal: role),
                       .failAttempt(reason: "ROLE refused by \(target): it is a replica, not the primary",
                                    reconnect: .afterBackoff(attempt: 1)))
        XCTAssertNil(Step.checkPrimary.refusal(of: .success(.array([.bulk(Array("master".utf8)), .integer(0), .array([])]))))

        XCTAssertEqual(m.onBackoffElapsed(nowMs: 100), .locate(watchdogMs: 5_000))
        connect(&m, host: primary)
        XCTAssertEqual(m.onErrorReplied(code: "WRONGTYPE"), .none, "an ordinary error keeps the connection")
        XCTAssertEqual(m.onErrorReplied(code: "READONLY"),
                       .dropConnection(reason: "\(target) answered READONLY: asking the sentinels for the primary again",
                                       reconnect: .afterBackoff(attempt: 0)))
        XCTAssertEqual(m.onBackoffElapsed(nowMs: 200), .locate(watchdogMs: 5_000))
        connect(&m, host: primary)
        XCTAssertEqual(m.onErrorReplied(code: "LOADING"),
                       .dropConnection(reason: "\(target) answered LOADING: asking the sentinels for the primary again",
                                       reconnect: .afterBackoff(attempt: 0)))

        var fixed = machine(viaSentinels: false)
        makeReady(&fixed)
        XCTAssertEqual(fixed.onErrorReplied(code: "READONLY"), .none, "without sentinels there is nobody to ask again")
    }

    func testAnAnnouncedFailoverMovesTheConnectionAtOnce() {
        var m = machine(viaSentinels: true)
        makeReady(&m)
        XCTAssertEqual(m.onPrimaryMoved(to: primary, nowMs: 10), .none, "already on the announced primary")
        XCTAssertEqual(m.onPrimaryMoved(to: replica, nowMs: 10),
                       .dropConnection(reason: "\(target): the sentinels announced a new primary", reconnect: .now))
        XCTAssertEqual(m.onPrimaryMoved(to: replica, nowMs: 20), .locate(watchdogMs: 5_000),
                       "backing off: asks at once instead of after the backoff")
        XCTAssertEqual(m.onPrimaryMoved(to: replica, nowMs: 30), .none, "locating: the answer awaited is the new one")
        XCTAssertEqual(m.onLocated(primary, target: target), .openTransport(host: primary))
        XCTAssertEqual(m.onPrimaryMoved(to: replica, nowMs: 40), .restartAttempt, "connecting to the old primary: start over")
        XCTAssertEqual(m.state, .locating(.init(startedMs: 40)))
        XCTAssertEqual(m.onBackoffElapsed(nowMs: 50), .none, "tolerated: a backoff timer armed before the early start")
        connect(&m, host: replica)
    }

    func testCloseIsFinalFromEveryStateAndLateAnswersAreIgnored() {
        var states: [Machine] = []
        var m = machine(viaSentinels: true)
        states.append(m)                                         // idle
        _ = m.onStart(nowMs: 0); states.append(m)                  // locating
        _ = m.onLocated(primary, target: target); states.append(m) // connecting
        _ = m.onTransportConnected(); states.append(m)             // handshaking
        var ready = machine(viaSentinels: true)
        makeReady(&ready); states.append(ready)
        _ = ready.onTransportClosed(reason: "EOF"); states.append(ready) // backingOff
        for var s in states {
            let before = s.state
            XCTAssertEqual(s.onCloseRequested(), .shutDown, "close from \(before)")
            XCTAssertEqual(s.state, .closed)
            XCTAssertEqual(s.onCloseRequested(), .none, "closing twice does nothing")
            XCTAssertEqual(s.onSend(waiting: 0, maxQueued: 10), .refuse(.closed))
            XCTAssertEqual(s.onStart(nowMs: 1), .none)
            XCTAssertEqual(s.onLocated(primary, target: target), .none, "a sentinel's answer after close is ignored")
            XCTAssertEqual(s.onLocateFailed(reason: "x"), .none)
            XCTAssertEqual(s.onBackoffElapsed(nowMs: 1), .none)
            XCTAssertEqual(s.onWatchdogFired(nowMs: 99_999, oldestUnanswered: nil), .none)
            XCTAssertEqual(s.onPrimaryMoved(to: replica, nowMs: 1), .none)
        }
    }
}
