import EventLoop
import XCTest
@testable import RedisClient

/// `RedisCluster.StateMachine` played as transcripts of events and the actions they must
/// produce: no sockets, no loop, no clock (times are given). Slot maps are the `CLUSTER SHARDS`
/// and `CLUSTER SLOTS` answers Redis sends over RESP2.
final class RedisClusterStateMachineTests: XCTestCase {
    typealias Machine = RedisCluster.StateMachine
    typealias Outcome = RedisCluster.RefreshOutcome

    private let seedA = Endpoint(host: "127.0.0.1", port: 7001)
    private let seedB = Endpoint(host: "127.0.0.1", port: 7002)
    private let primary1 = Endpoint(host: "127.0.0.1", port: 7101)
    private let primary2 = Endpoint(host: "127.0.0.1", port: 7102)
    private let stranger = Endpoint(host: "10.9.9.9", port: 7000)

    /// Refreshes every 30 s, at least 250 ms apart; seeds A and B; trusts their host and, with
    /// `allowedHosts` nil, what they announce.
    private func machine(allowedHosts: [HostPattern]? = nil) -> Machine {
        let seeds = [seedA, seedB]
        return Machine(seeds: seeds, refreshEveryMs: 30_000, minRefreshGapMs: 250, tls: false,
                       trust: RedisNodeTrust(configured: seeds, allowedHosts: allowedHosts, learnsFromSeeds: true))
    }

    private static func text(_ s: String) -> RedisReply { .bulk(Array(s.utf8)) }

    private static func fields(_ list: [(String, RedisReply)]) -> RedisReply {
        .array(list.flatMap { [text($0.0), $0.1] })
    }

    /// `CLUSTER SHARDS`: one shard per owner, its slots, its online primary.
    private static func shards(_ owners: [(slots: ClosedRange<Int>, node: Endpoint)]) -> RedisReply {
        .array(owners.map { owner in
            fields([("slots", .array([.integer(Int64(owner.slots.lowerBound)), .integer(Int64(owner.slots.upperBound))])),
                    ("nodes", .array([fields([("id", text("0cf8e32b25d9")), ("port", .integer(Int64(owner.node.port))),
                                              ("ip", text(owner.node.host)), ("endpoint", text(owner.node.host)),
                                              ("role", text("master")), ("replication-offset", .integer(0)),
                                              ("health", text("online"))])]))])
        })
    }

    /// `CLUSTER SLOTS`: one range per owner, `[start, end, [ip, port, id]]`.
    private static func slots(_ owners: [(slots: ClosedRange<Int>, node: Endpoint)]) -> RedisReply {
        .array(owners.map { owner in
            .array([.integer(Int64(owner.slots.lowerBound)), .integer(Int64(owner.slots.upperBound)),
                    .array([text(owner.node.host), .integer(Int64(owner.node.port)), text("0cf8e32b25d9")])])
        })
    }

    /// `HELLO 2`'s answer from a server of `version`.
    private static func hello(_ version: String) -> RedisReply {
        fields([("server", text("redis")), ("version", text(version)), ("proto", .integer(2)), ("id", .integer(7)),
                ("mode", text("cluster")), ("role", text("master")), ("modules", .array([]))])
    }

    /// Two primaries, half the slots each.
    private var twoPrimaries: [(slots: ClosedRange<Int>, node: Endpoint)] {
        [(0...8191, primary1), (8192...16383, primary2)]
    }

    private func mapRead(next: Int64 = 30_000, refusals: [RedisNodeRefusal] = [], changed: Bool = true) -> Machine.Action {
        .finishRefresh(Outcome(refusals: refusals, mapChanged: changed, waiters: .mapRead, nextRefreshAfterMs: next))
    }

    /// Plays `onStart` at `nowMs` and seed A's answer with `twoPrimaries`.
    private func started(_ m: inout Machine, at nowMs: Int64 = 0, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(m.onStart(nowMs: nowMs), .askSlotMap(seedA, .shards), "the first refresh asks the first seed", file: file, line: line)
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .success(Self.shards(twoPrimaries))), mapRead(), file: file, line: line)
        XCTAssertEqual(m.state, .running(.waiting), file: file, line: line)
    }

    // MARK: Refreshes

    func testStartReadsTheMapFromASeedAndArmsTheRefreshTimer() {
        var m = machine()
        XCTAssertEqual(m.onRefreshRequested(nowMs: 0), .none, "before start nothing is asked: the start's refresh comes")
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        XCTAssertEqual(m.onStart(nowMs: 1), .none, "starting twice does nothing")
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .success(Self.shards(twoPrimaries))), mapRead(next: 30_000),
                       "the map is new; waiters go again; the next refresh in refreshEveryMs")
        XCTAssertEqual(m.map.owner(of: HashSlot(0)!), primary1)
        XCTAssertEqual(m.map.owner(of: HashSlot(16383)!), primary2)
        XCTAssertEqual(m.stats.refreshes, 1)
        XCTAssertNil(m.lastProblem)
        XCTAssertTrue(m.trust.allows(primary1), "a seed's announcement is trusted")
    }

    func testARefreshAsksTheKnownPrimariesFirstThenTheSeedsAndFailsWithEveryNodesProblem() {
        var m = machine()
        started(&m)
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 30_000), .askSlotMap(primary1, .shards), "known primaries first")
        XCTAssertEqual(m.onSlotMapAnswered(by: primary1, .failure(.disconnected)), .askSlotMap(primary2, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: primary2, .success(Self.shards([]))), .askSlotMap(seedA, .shards),
                       "a node that serves no slot is no answer")
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .success(.integer(1))), .askSlotMap(seedB, .shards), "nor is an unreadable one")
        let reason = "redis cluster: no node gave the slot map: 127.0.0.1:7101: redis: connection lost before the reply; "
            + "127.0.0.1:7102: serves no slot; 127.0.0.1:7001: CLUSTER SHARDS: not a list: :1; 127.0.0.1:7002: redis: connection closed"
        let failed = RedisError.connectFailed(reason)
        XCTAssertEqual(m.onSlotMapAnswered(by: seedB, .failure(.closed)),
                       .finishRefresh(Outcome(refusals: [], mapChanged: false, waiters: .refreshFailed("\(failed)"),
                                              nextRefreshAfterMs: 250)),
                       "waiting commands fail with every node's problem; the next try at the gap")
        XCTAssertEqual(m.lastProblem, "\(failed)")
        XCTAssertEqual(m.stats.refreshFailures, 1)
        XCTAssertEqual(m.map.owner(of: HashSlot(0)!), primary1, "a failed refresh keeps the map it had")
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 30_300), .askSlotMap(primary1, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: primary1, .success(Self.shards(twoPrimaries))), mapRead(changed: false),
                       "the same map again: nothing changed")
        XCTAssertNil(m.lastProblem, "a refresh that succeeds clears the problem")
    }

    func testRequestsAreKeptAtTheGapAndOneWhileARefreshRunsCountsOnceAfterIt() {
        var m = machine()
        started(&m, at: 1_000)
        XCTAssertEqual(m.onRefreshRequested(nowMs: 1_100), .armRefreshTimer(afterMs: 150), "150 ms left of the 250 ms gap")
        XCTAssertEqual(m.onRefreshRequested(nowMs: 1_200), .armRefreshTimer(afterMs: 50))
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 1_250), .askSlotMap(primary1, .shards))
        XCTAssertEqual(m.onRefreshRequested(nowMs: 1_260), .none, "one runs: it is noted")
        XCTAssertEqual(m.onRefreshRequested(nowMs: 1_270), .none, "and noted once")
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 1_280), .none, "a timer armed before this refresh began does nothing")
        XCTAssertEqual(m.onSlotMapAnswered(by: primary1, .success(Self.shards(twoPrimaries))), mapRead(next: 250, changed: false),
                       "asked for meanwhile: the next refresh at the gap, not in refreshEveryMs")
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 1_600), .askSlotMap(primary1, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: primary1, .success(Self.shards(twoPrimaries))), mapRead(next: 30_000, changed: false))
        XCTAssertEqual(m.onRefreshRequested(nowMs: 2_000), .askSlotMap(primary1, .shards), "past the gap: at once")
    }

    // MARK: Server versions

    func testAServerBefore7IsAskedItsVersionAndReadWithClusterSlotsFromThenOn() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        let unknown = RedisError.server("ERR unknown subcommand 'SHARDS'. Try CLUSTER HELP.")
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .failure(unknown)), .askVersion(seedA),
                       "an ERR to CLUSTER SHARDS: the server's version says why")
        XCTAssertEqual(m.onVersionAnswered(by: seedA, .success(Self.hello("6.2.14"))), .askSlotMap(seedA, .slots),
                       "6.2 has no CLUSTER SHARDS: the same node, with CLUSTER SLOTS")
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .success(Self.slots(twoPrimaries))), mapRead())
        XCTAssertEqual(m.map.owner(of: HashSlot(8192)!), primary2)
        XCTAssertEqual(m.slotMapCommand, .slots)
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 30_000), .askSlotMap(primary1, .slots), "CLUSTER SLOTS from then on")
    }

    func testAServerWithoutHelloIsOlderThan6() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .failure(.server("ERR unknown command 'CLUSTER'"))), .askVersion(seedA))
        XCTAssertEqual(m.onVersionAnswered(by: seedA, .failure(.server("ERR unknown command 'HELLO'"))), .askSlotMap(seedA, .slots))
    }

    func testAShardsRefusalFromA7ServerIsThatNodesProblemAndTheNextNodeIsAsked() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        let disabled = RedisError.server("ERR This instance has cluster support disabled")
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .failure(disabled)), .askVersion(seedA))
        XCTAssertEqual(m.onVersionAnswered(by: seedA, .success(Self.hello("7.0.15"))), .askSlotMap(seedB, .shards),
                       "7.0 knows CLUSTER SHARDS: the refusal is real")
        XCTAssertEqual(m.slotMapCommand, .shards)
        XCTAssertEqual(m.onSlotMapAnswered(by: seedB, .failure(.server("ERR nope"))), .askVersion(seedB))
        XCTAssertEqual(m.onVersionAnswered(by: seedB, .success(Self.fields([("server", Self.text("redis"))]))),
                       .finishRefresh(Outcome(refusals: [], mapChanged: false,
                                              waiters: .refreshFailed("\(RedisError.connectFailed("redis cluster: no node gave the slot map: 127.0.0.1:7001: redis: ERR This instance has cluster support disabled; 127.0.0.1:7002: redis: ERR nope; HELLO named no version: [\"server\", \"redis\"]"))"),
                                              nextRefreshAfterMs: 250)),
                       "a HELLO without a version decides nothing: the node's problem too")
        XCTAssertEqual(m.slotMapCommand, .shards)
    }

    func testServerVersionsAreParsedNotMatched() {
        XCTAssertEqual(RedisServerVersion(parsing: "7.0.15"), RedisServerVersion(major: 7, minor: 0))
        XCTAssertEqual(RedisServerVersion(parsing: "6.2"), RedisServerVersion(major: 6, minor: 2))
        XCTAssertEqual(RedisServerVersion(parsing: "10.12.1-rc1"), RedisServerVersion(major: 10, minor: 12))
        for bad in ["7", "", "7.", ".0", "v7.0", "7.x.1", "seven.zero", "7.0a"] {
            XCTAssertNil(RedisServerVersion(parsing: bad), bad)
        }
        XCTAssertLessThan(RedisServerVersion(parsing: "6.2.14")!, .clusterShards)
        XCTAssertLessThan(RedisServerVersion(parsing: "6.10.0")!, .clusterShards, "compared as numbers, not text")
        XCTAssertGreaterThanOrEqual(RedisServerVersion(parsing: "7.0.0")!, .clusterShards)
        XCTAssertGreaterThan(RedisServerVersion(parsing: "10.0.0")!, .clusterShards, "10 > 7, though \"10\" < \"7\" as text")
        XCTAssertEqual(RedisServerVersion(hello: Self.hello("7.2.4")), RedisServerVersion(major: 7, minor: 2))
        XCTAssertNil(RedisServerVersion(hello: .array([Self.text("version")])), "a field list of odd length")
        XCTAssertNil(RedisServerVersion(hello: .status("OK")))
    }

    // MARK: Commands' redirects

    func testAMovedAnswerCorrectsItsSlotAndAsksForARefresh() {
        var m = machine()
        started(&m, at: 0)
        let slot = HashSlot(100)!
        XCTAssertEqual(m.onCommandRedirected(.resendAfterMove(slot, primary2), nowMs: 100), .armRefreshTimer(afterMs: 150),
                       "a refresh at the gap")
        XCTAssertEqual(m.map.owner(of: slot), primary2, "the slot's owner is corrected at once")
        XCTAssertEqual(m.map.owner(of: HashSlot(101)!), primary1, "and only that slot")
        XCTAssertEqual(m.onCommandRedirected(.resendAfterMove(HashSlot(101)!, primary2), nowMs: 400), .askSlotMap(primary1, .shards),
                       "past the gap: at once")
        XCTAssertEqual(m.onCommandRedirected(.resendAsking(primary2), nowMs: 410), .none, "ASK leaves the map alone")
        XCTAssertEqual(m.onCommandRedirected(.retryLater(delayMs: 20), nowMs: 420), .none, "a refresh runs already")
        XCTAssertEqual(m.onCommandRedirected(.complete, nowMs: 430), .none)
        XCTAssertEqual(m.stats.moved, 2)
        XCTAssertEqual(m.stats.asked, 1)
        XCTAssertEqual(m.stats.retriedLater, 1)
    }

    func testARefusedRedirectSendsTheNextRefreshToTheSeedsFirst() {
        var m = machine()
        started(&m, at: 0)
        let refusal = RedisNodeRefusal(kind: .moved, node: stranger, namedBy: primary1)
        XCTAssertEqual(m.onCommandRedirected(.refuse(refusal), nowMs: 1_000), .askSlotMap(seedA, .shards),
                       "the seeds first: a node the cluster really gained is learned from them")
        XCTAssertEqual(m.stats.refused, [.moved: 1])
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .failure(.disconnected)), .askSlotMap(seedB, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: seedB, .failure(.disconnected)), .askSlotMap(primary1, .shards), "then the primaries")
        XCTAssertEqual(m.onSlotMapAnswered(by: primary1, .success(Self.shards(twoPrimaries))), mapRead(next: 30_000, changed: false))
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 31_000), .askSlotMap(primary1, .shards), "once: primaries first again")
    }

    func testAMapNamingAnUntrustedPrimaryIsNotUsedAndTheRefusalReportedAtTheEnd() {
        var m = machine(allowedHosts: [])  // the seeds' host only; announcements are not learned
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .success(Self.shards([(0...16383, stranger)]))), .askSlotMap(seedB, .shards),
                       "not used: the next candidate")
        XCTAssertNil(m.map.owner(of: HashSlot(0)!))
        let refusal = RedisNodeRefusal(kind: .slotMap, node: stranger, namedBy: seedA)
        XCTAssertEqual(m.onSlotMapAnswered(by: seedB, .success(Self.shards(twoPrimaries))), mapRead(refusals: [refusal]),
                       "the good map is used; the stranger is reported once the refresh ends")
        XCTAssertEqual(m.stats.refused, [.slotMap: 1])
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 30_000), .askSlotMap(seedA, .shards), "after a refusal, the seeds first")
    }

    // MARK: Closing

    func testCloseEndsEverythingAndLateAnswersAreIgnored() {
        var m = machine()
        XCTAssertEqual(m.onStart(nowMs: 0), .askSlotMap(seedA, .shards))
        XCTAssertEqual(m.onCloseRequested(), .shutDown)
        XCTAssertTrue(m.isClosed)
        XCTAssertEqual(m.onSlotMapAnswered(by: seedA, .failure(.disconnected)), .none, "the question out is answered by its connection's close")
        XCTAssertEqual(m.onVersionAnswered(by: seedA, .failure(.disconnected)), .none)
        XCTAssertEqual(m.onRefreshRequested(nowMs: 1_000), .none)
        XCTAssertEqual(m.onRefreshTimerFired(nowMs: 1_000), .none)
        XCTAssertEqual(m.onStart(nowMs: 1_000), .none, "closed is final")
        XCTAssertEqual(m.onCloseRequested(), .none, "closing twice does nothing")
        XCTAssertEqual(m.stats, RedisCluster.Stats())

        var unstarted = machine()
        XCTAssertEqual(unstarted.onCloseRequested(), .shutDown, "waiting commands of a client never started are told too")
    }
}
