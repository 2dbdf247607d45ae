import XCTest
import Foundation
import EventLoop
import TestSupport
@testable import CallStorage
@testable import RedisClient

/// The durable retry schedule's scripts against a real redis-server; what they write is read
/// back with plain commands.
class RetryScheduleTests: XCTestCase {
    var server: RedisServer!
    /// The one-node cluster `server` belongs to in the cluster variant.
    var clusterNode: LocalRedisCluster?
    /// Runs the tests on a one-node Redis Cluster, which refuses any script whose keys span slots.
    class var onClusterNode: Bool { false }
    var loop: EventLoop!
    var store: CallStore!
    var schedule: RetrySchedule { store.retries }
    var plain: RedisConnection!
    let acme = AppKeys(app: "acme"), beta = AppKeys(app: "beta")
    let due = GatewayKeys().retryDue

    override func setUpWithError() throws {
        if Self.onClusterNode {
            clusterNode = try LocalRedisCluster.start(primaries: 1)
            server = clusterNode?.nodes[0]
        } else {
            server = try RedisServer.start()
        }
        loop = EventLoop()
        let url = try RedisURL(parsing: server.url)
        // acme's windows are its own (apps.acme.retention); beta has the defaults.
        store = CallStore(config: .init(windows: ["acme": RetentionWindows(resultSeconds: 120, cancelSeconds: 60)]), apps: [acme, beta],
                          topology: .own(loop: loop, redis: .init(url: url, backoff: ReconnectBackoff(baseMs: 20, capMs: 200)), cluster: nil,
                                         clientName: "pushgw-write"))
        store.start()
        plain = try connect(loop, server.url)
        for app in [acme, beta] { XCTAssertNotNil(complete(loop) { store.ensureGroup(app, completion: $0) }.value()) }
    }

    override func tearDown() {
        store.close()
        plain.close()
        loop.close()
        server.stop()
    }

    // MARK: Helpers

    private func event(_ id: String) -> String { #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"aa01"}"# }

    /// XADDs an event for call `id` and reads it as `consumer`, so it is pending there; its entry id.
    private func pendingEntry(_ app: AppKeys, _ id: String, consumer: String = "c1",
                              file: StaticString = #filePath, line: UInt = #line) -> String {
        let entry = redis("XADD", app.calls, "*", "event", event(id), file: file, line: line)?.string ?? ""
        let read = complete(loop, file: file, line: line) {
            store.readNew(apps: [app], consumer: consumer, count: 100, blockMs: nil, completion: $0)
        }.value(file: file, line: line)
        XCTAssertTrue(read?[app]?.contains { $0.id == entry } == true, "read as \(consumer)", file: file, line: line)
        return entry
    }

    private func retry(_ entry: String, _ id: String, dueAtMs: Int64) -> ScheduledRetry {
        ScheduledRetry(retryID: entry, callID: id, dueAtMs: dueAtMs, event: event(id), state: #"{"id":"\#(id)","due":\#(dueAtMs)}"#,
                       mac: "mac-of-" + id)
    }

    @discardableResult
    private func schedule(_ app: AppKeys, _ r: ScheduledRetry, consumer: String = "c1",
                          file: StaticString = #filePath, line: UInt = #line) -> ScheduleOutcome? {
        complete(loop, file: file, line: line) { schedule.schedule(app, consumer: consumer, retry: r, completion: $0) }
            .value(file: file, line: line)
    }

    private func move(_ app: AppKeys, now: Int64, limit: Int = 100, file: StaticString = #filePath, line: UInt = #line) -> MoveReport? {
        complete(loop, file: file, line: line) { schedule.moveDue(app, nowMs: now, limit: limit, completion: $0) }
            .value(file: file, line: line)
    }

    @discardableResult
    private func redis(_ args: String..., file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        call(plain, args, file: file, line: line).value(file: file, line: line)
    }

    private func strings(_ args: String..., file: StaticString = #filePath, line: UInt = #line) -> [String] {
        call(plain, args, file: file, line: line).value(file: file, line: line)?.array?.compactMap(\.string) ?? []
    }

    private func entries(_ stream: String) -> [StreamEntry] {
        complete(loop) { store.range(stream, count: 1000, completion: $0) }.value() ?? []
    }

    // MARK: Scheduling

    func testSchedulingAcknowledgesTheEntryAndKeepsTheRetryWithItsStateAndDueTime() {
        let entry = pendingEntry(acme, "call-1")
        let r = retry(entry, "call-1", dueAtMs: 1_764_412_345_678)
        XCTAssertEqual(schedule(acme, r), .scheduled)
        XCTAssertEqual(strings("ZRANGE", acme.retrySchedule, "0", "-1", "WITHSCORES"), [entry, "1764412345678"],
                       "member = the entry id, score = the due time in ms")
        XCTAssertEqual(redis("HGET", acme.retryData, entry + ":state")?.string, r.state)
        XCTAssertEqual(redis("HGET", acme.retryData, entry + ":event")?.bytes, r.event)
        XCTAssertEqual(redis("HGET", acme.retryData, entry + ":call")?.string, "call-1")
        XCTAssertEqual(redis("HGET", acme.retryData, entry + ":mac")?.string, r.mac, "the MAC beside the state")
        XCTAssertEqual(redis("HGET", acme.retryByCall, "call-1")?.string, entry)
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "1764412345678"], "the due index")
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0, "the entry is deleted with the scheduling")
        let pending = strings("XPENDING", acme.calls, "pushgw")
        XCTAssertEqual(redis("XPENDING", acme.calls, "pushgw")?.array?.first?.integer, 0, "and acknowledged: \(pending)")
        let found = complete(loop) { schedule.pending(acme, callID: "call-1", completion: $0) }.value()
        var withoutMAC = r
        withoutMAC.mac = ""
        XCTAssertEqual(found ?? nil, withoutMAC, "the call's retry is found by its id (a cancel needs no MAC)")
    }

    func testOnlyTheConsumerHoldingTheEntryCanScheduleItAndOnlyOnce() {
        let entry = pendingEntry(acme, "call-1", consumer: "c1")
        XCTAssertEqual(schedule(acme, retry(entry, "call-1", dueAtMs: 5), consumer: "c2"), .notOwned,
                       "an entry another consumer holds (taken over) is not scheduled")
        XCTAssertEqual(redis("ZCARD", acme.retrySchedule)?.integer, 0)
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 1, "nothing acknowledged")
        XCTAssertEqual(schedule(acme, retry(entry, "call-1", dueAtMs: 5)), .scheduled)
        XCTAssertEqual(schedule(acme, retry(entry, "call-1", dueAtMs: 9)), .notOwned, "a second schedule of one entry writes nothing")
        XCTAssertEqual(strings("ZRANGE", acme.retrySchedule, "0", "-1", "WITHSCORES"), [entry, "5"])
    }

    func testACancelledCallIsNotScheduled() {
        let entry = pendingEntry(acme, "call-1")
        redis("SET", acme.cancelled("call-1"), "1")
        XCTAssertEqual(schedule(acme, retry(entry, "call-1", dueAtMs: 5)), .cancelled)
        XCTAssertEqual(redis("ZCARD", acme.retrySchedule)?.integer, 0)
        XCTAssertEqual(redis("EXISTS", due)?.integer, 0)
        XCTAssertEqual(redis("XPENDING", acme.calls, "pushgw")?.array?.first?.integer, 1, "still pending, to be finished as cancelled")
    }

    func testTheDueIndexHoldsEachAppsEarliestDueTime() {
        schedule(acme, retry(pendingEntry(acme, "a1"), "a1", dueAtMs: 3_000))
        schedule(acme, retry(pendingEntry(acme, "a2"), "a2", dueAtMs: 1_000))
        schedule(acme, retry(pendingEntry(acme, "a3"), "a3", dueAtMs: 2_000))
        schedule(beta, retry(pendingEntry(beta, "b1"), "b1", dueAtMs: 1_500))
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "1000", "beta", "1500"],
                       "a later retry does not raise an app's score")
        let earliest = complete(loop) { schedule.earliest(limit: 1, completion: $0) }.value()
        XCTAssertEqual(earliest, [DueApp(app: "acme", dueAtMs: 1_000)])
    }

    // MARK: Moving

    func testMovingPutsDueRetriesBackWithTheirStateAndKeepsTheRest() {
        let e1 = pendingEntry(acme, "a1"), e2 = pendingEntry(acme, "a2"), e3 = pendingEntry(acme, "a3")
        schedule(acme, retry(e1, "a1", dueAtMs: 1_000))
        schedule(acme, retry(e2, "a2", dueAtMs: 1_005))
        schedule(acme, retry(e3, "a3", dueAtMs: 9_000))
        let first = move(acme, now: 1_010)
        XCTAssertEqual(first, MoveReport(movedDueAtMs: [1_000, 1_005], nextDueAtMs: 9_000, dropped: [], more: false))
        let back = entries(acme.calls)
        XCTAssertEqual(back.map { $0.fields["event"] }, [event("a1"), event("a2")], "due first, the raw event as field event")
        XCTAssertEqual(back.map { $0.fields["retry"] }, [retry(e1, "a1", dueAtMs: 1_000).state, retry(e2, "a2", dueAtMs: 1_005).state],
                       "with the snapshot as field retry")
        XCTAssertEqual(back.map { $0.fields["retry_mac"] }, ["mac-of-a1", "mac-of-a2"], "and its MAC as field retry_mac")
        XCTAssertFalse(back.contains { [e1, e2].contains($0.id) }, "as new entries")
        XCTAssertEqual(strings("ZRANGE", acme.retrySchedule, "0", "-1"), [e3])
        XCTAssertEqual(Set(strings("HKEYS", acme.retryData)), [e3 + ":state", e3 + ":event", e3 + ":call", e3 + ":mac"])
        XCTAssertEqual(strings("HKEYS", acme.retryByCall), ["a3"])
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "9000"], "the index moves to the next due time")
        XCTAssertEqual(move(acme, now: 1_010)?.movedDueAtMs, [], "nothing is moved twice")

        XCTAssertEqual(move(acme, now: 9_000)?.movedDueAtMs, [9_000])
        XCTAssertEqual(redis("EXISTS", acme.retrySchedule, acme.retryData, acme.retryByCall)?.integer, 0)
        XCTAssertEqual(redis("EXISTS", due)?.integer, 0,
                       "an empty schedule leaves no keys and no index entry")
        XCTAssertEqual(entries(acme.calls).count, 3)
        let read = complete(loop) { store.readNew(apps: [acme], consumer: "c9", count: 10, blockMs: nil, completion: $0) }.value()
        XCTAssertEqual(read?[acme]?.count, 3, "moved entries are read by the consumer group like new calls")
    }

    func testTheDueIndexIsRepairedFromTheAppsSchedules() {
        // A process that died between its schedule step and the index command leaves a retry
        // the index does not show; the repair reads every app's earliest due time again.
        schedule(acme, retry(pendingEntry(acme, "a1"), "a1", dueAtMs: 5_000))
        schedule(acme, retry(pendingEntry(acme, "a2"), "a2", dueAtMs: 4_000))
        redis("DEL", due)
        XCTAssertEqual(complete(loop) { schedule.repairDueIndex([acme, beta], completion: $0) }.value(), 1, "one app has retries")
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "4000"])
        redis("ZADD", due, "3000", "acme")
        XCTAssertEqual(complete(loop) { schedule.repairDueIndex([acme], completion: $0) }.value(), 1)
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "3000"], "an earlier score stays (ZADD LT)")
        XCTAssertEqual(move(acme, now: 3_500)?.movedDueAtMs, [], "which costs one empty move")
        XCTAssertEqual(strings("ZRANGE", due, "0", "-1", "WITHSCORES"), ["acme", "4000"], "that refreshes it")
    }

    func testTheRegistrysKeysShareOneSlot() {
        let keys = GatewayKeys(prefix: "voicegw")
        XCTAssertEqual(HashSlot(key: keys.consumers), HashSlot(key: keys.consumerInstances), "its scripts touch both")
        XCTAssertEqual(keys.consumers, "voicegw:consumers", "the name earlier versions read and wrote")
        XCTAssertTrue(keys.consumerInstances.hasPrefix("voicegw:"), "under the prefix, as ACL key patterns expect")
    }

    func testAMoveIsBoundedByItsLimitAndSaysThereIsMore() {
        for i in 0..<5 { schedule(acme, retry(pendingEntry(acme, "a\(i)"), "a\(i)", dueAtMs: Int64(100 + i))) }
        let first = move(acme, now: 1_000, limit: 2)
        XCTAssertEqual(first?.movedDueAtMs, [100, 101])
        XCTAssertEqual(first?.more, true)
        XCTAssertEqual(first?.nextDueAtMs, 102, "the index still shows the app due")
        XCTAssertEqual(move(acme, now: 1_000, limit: 3)?.more, true, "a full batch may have emptied it: one more look says")
        XCTAssertEqual(move(acme, now: 1_000, limit: 3), MoveReport(movedDueAtMs: [], nextDueAtMs: nil, dropped: [], more: false))
    }

    func testARetryWhoseDataIsMissingIsDroppedAndReported() {
        let e = pendingEntry(acme, "a1")
        schedule(acme, retry(e, "a1", dueAtMs: 10))
        redis("DEL", acme.retryData)
        XCTAssertEqual(move(acme, now: 20), MoveReport(movedDueAtMs: [], nextDueAtMs: nil, dropped: [e], more: false))
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0)
    }

    // MARK: Cancelling

    /// With webhooks on, the cancel step queues both results it records, in order.
    func testCancelOfAnAppWithWebhooksQueuesBothResultsForDelivery() {
        let hooked = AppKeys(app: "acme", sendsWebhooks: true)
        let e = pendingEntry(acme, "call-1")
        schedule(acme, retry(e, "call-1", dueAtMs: 5_000))
        let own = #"{"outcome":"cancelled","id":"call-1","type":"call_cancelled"}"#
        let report = complete(loop) {
            schedule.cancel(hooked, callID: "call-1", cancelEntryID: nil, resultJSON: own,
                            removing: [(e, #"{"outcome":"cancelled","id":"call-1"}"#)], completion: $0)
        }.value()
        XCTAssertEqual(report?.recorded, [e])
        let results = entries(acme.results)
        XCTAssertEqual(entries(acme.webhooks).map(\.fields), results.map { ["result": $0.fields["result"] ?? "", "results_entry": $0.id] })
        XCTAssertEqual(results.count, 2)
    }

    func testCancelRemovesTheCallsRetryAndRecordsBothOutcomesInOneStep() {
        let e = pendingEntry(acme, "call-1")
        schedule(acme, retry(e, "call-1", dueAtMs: 5_000))
        let cancelEntry = redis("XADD", acme.calls, "*", "event", #"{"v":1,"id":"call-1","type":"call_cancelled"}"#)?.string ?? ""
        _ = complete(loop) { store.readNew(apps: [acme], consumer: "c1", count: 10, blockMs: nil, completion: $0) }.value()
        let record = ResultEntry(eventId: "call-1", namespace: .cancel,
                                 resultJSON: #"{"outcome":"cancelled","id":"call-1","type":"call_cancelled"}"#)
        let report = complete(loop) {
            schedule.cancel(acme, callID: "call-1", cancelEntryID: cancelEntry, resultJSON: record.resultJSON,
                            removing: [(e, #"{"outcome":"cancelled","id":"call-1"}"#)], completion: $0)
        }.value()
        XCTAssertEqual(report, CancelReport(cancelRecorded: true, acknowledged: true, removed: [e], recorded: [e]))
        XCTAssertEqual(entries(acme.results).map { $0.fields["result"] },
                       [#"{"outcome":"cancelled","id":"call-1"}"#, record.resultJSON])
        XCTAssertEqual(redis("GET", acme.result("call-1"))?.string, #"{"outcome":"cancelled","id":"call-1"}"#)
        XCTAssertEqual(redis("GET", acme.cancelResult("call-1"))?.string, record.resultJSON, "the cancel's own result, by id")
        XCTAssertEqual(redis("EXISTS", acme.result("cancel:call-1"))?.integer, 0, "not in the calls' namespace")
        XCTAssertNotNil(redis("GET", acme.cancelled("call-1"))?.string, "the marker stops what the cancel could not see")
        let ttl = redis("TTL", acme.cancelled("call-1"))?.integer ?? 0
        XCTAssertTrue(ttl > 0 && ttl <= 60, "the marker expires with acme's cancel window (60 s): \(ttl)")
        let resultTTL = redis("TTL", acme.cancelResult("call-1"))?.integer ?? 0
        XCTAssertTrue(resultTTL > 60 && resultTTL <= 120, "the cancel's result expires with acme's result window (120 s): \(resultTTL)")
        let callTTL = redis("TTL", acme.result("call-1"))?.integer ?? 0
        XCTAssertTrue(callTTL > 60 && callTTL <= 120, "the removed retry's result too: \(callTTL)")
        XCTAssertEqual(redis("EXISTS", acme.retrySchedule, acme.retryData, acme.retryByCall)?.integer, 0)
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0, "the cancel entry is acknowledged and deleted")
        XCTAssertEqual(move(acme, now: 10_000)?.movedDueAtMs, [], "nothing left to fire")

        let again = complete(loop) {
            schedule.cancel(acme, callID: "call-1", cancelEntryID: nil, resultJSON: record.resultJSON,
                            removing: [(e, "{}")], completion: $0)
        }.value()
        XCTAssertEqual(again, CancelReport(cancelRecorded: false, acknowledged: false, removed: [], recorded: []),
                       "a repeated cancel records nothing")
        XCTAssertEqual(entries(acme.results).last?.fields["result"],
                       #"{"outcome":"duplicate","first_outcome":"cancelled","id":"call-1","type":"call_cancelled"}"#,
                       "but is answered as a duplicate")
    }

    func testACancelOfADeliveredCallSaysSoInItsResult() {
        redis("SET", acme.result("call-2"),
              #"{"outcome":"delivered_voip","id":"call-2","type":"incoming_call","app":"acme","entry":"1764412340012-0","channel":"voip","latency_ms":7,"attempts":[]}"#)
        let report = complete(loop) {
            schedule.cancel(acme, callID: "call-2", cancelEntryID: nil,
                            resultJSON: #"{"outcome":"cancelled","id":"call-2","type":"call_cancelled","attempts":[]}"#,
                            removing: [], completion: $0)
        }.value()
        XCTAssertEqual(report?.callDelivered, "delivered_voip")
        XCTAssertEqual(report?.callDeliveredAtMs, 1_764_412_340_019, "the entry's time + the call's latency")
        let expected = OutcomeRecordJSON.cancelAfterDelivery
        XCTAssertEqual(redis("GET", acme.cancelResult("call-2"))?.string, expected)
        XCTAssertEqual(entries(acme.results).last?.fields["result"], expected)
    }

    func testCancelLeavesARetryThatWasAlreadyMovedToTheMarker() {
        let e = pendingEntry(acme, "call-1")
        schedule(acme, retry(e, "call-1", dueAtMs: 5))
        XCTAssertEqual(move(acme, now: 10)?.movedDueAtMs, [5])
        let found = complete(loop) { schedule.pending(acme, callID: "call-1", completion: $0) }.value()
        XCTAssertEqual(found ?? nil, nil, "a moved retry is no longer pending")
        let report = complete(loop) {
            schedule.cancel(acme, callID: "call-1", cancelEntryID: nil, resultJSON: "{}", removing: [(e, "{}")],
                            completion: $0)
        }.value()
        XCTAssertEqual(report?.removed, [])
        XCTAssertNil(redis("GET", acme.result("call-1"))?.string, "the call's outcome is left to its resumed router")
        XCTAssertEqual(redis("EXISTS", acme.cancelled("call-1"))?.integer, 1)
    }
}

/// `RetryScheduleTests` on a one-node Redis Cluster: every script and command touches one slot (no `CROSSSLOT`).
final class RetryScheduleOnClusterNodeTests: RetryScheduleTests {
    override class var onClusterNode: Bool { true }

    override func testSchedulingAcknowledgesTheEntryAndKeepsTheRetryWithItsStateAndDueTime() { super.testSchedulingAcknowledgesTheEntryAndKeepsTheRetryWithItsStateAndDueTime() }
    override func testOnlyTheConsumerHoldingTheEntryCanScheduleItAndOnlyOnce() { super.testOnlyTheConsumerHoldingTheEntryCanScheduleItAndOnlyOnce() }
    override func testACancelledCallIsNotScheduled() { super.testACancelledCallIsNotScheduled() }
    override func testTheDueIndexHoldsEachAppsEarliestDueTime() { super.testTheDueIndexHoldsEachAppsEarliestDueTime() }
    override func testMovingPutsDueRetriesBackWithTheirStateAndKeepsTheRest() { super.testMovingPutsDueRetriesBackWithTheirStateAndKeepsTheRest() }
    override func testTheDueIndexIsRepairedFromTheAppsSchedules() { super.testTheDueIndexIsRepairedFromTheAppsSchedules() }
    override func testTheRegistrysKeysShareOneSlot() { super.testTheRegistrysKeysShareOneSlot() }
    override func testAMoveIsBoundedByItsLimitAndSaysThereIsMore() { super.testAMoveIsBoundedByItsLimitAndSaysThereIsMore() }
    override func testARetryWhoseDataIsMissingIsDroppedAndReported() { super.testARetryWhoseDataIsMissingIsDroppedAndReported() }
    override func testCancelRemovesTheCallsRetryAndRecordsBothOutcomesInOneStep() { super.testCancelRemovesTheCallsRetryAndRecordsBothOutcomesInOneStep() }
    override func testCancelOfAnAppWithWebhooksQueuesBothResultsForDelivery() { super.testCancelOfAnAppWithWebhooksQueuesBothResultsForDelivery() }
    override func testACancelOfADeliveredCallSaysSoInItsResult() { super.testACancelOfADeliveredCallSaysSoInItsResult() }
    override func testCancelLeavesARetryThatWasAlreadyMovedToTheMarker() { super.testCancelLeavesARetryThatWasAlreadyMovedToTheMarker() }

    func testEveryTestRunsOnTheClusterNode() throws {
        XCTAssertEqual(try testsMissingFromVariants(of: "RetryScheduleTests", ["RetryScheduleOnClusterNodeTests"], in: "Tests/CallStorageTests/RetryScheduleTests.swift"), [])
    }
}

/// The bytes the cancel script writes for a cancel after delivery: those `OutcomeRecord.json()`
/// writes for the same record (RoutingTests checks that side).
enum OutcomeRecordJSON {
    static let cancelAfterDelivery =
        #"{"outcome":"cancelled","cancelled_after":"delivered_voip","delivered_at":1764412340019,"id":"call-2","type":"call_cancelled","attempts":[]}"#
}
