import XCTest
import EventLoop
import CallStorage
import RedisClient
import TestSupport
@testable import DeadLetters

/// DeadLetterStore and DeadLetterRetention against a real redis-server: retention by count and
/// by age, the "about to remove" counts, the replay and purge scripts.
final class DeadLetterStoreTests: XCTestCase {
    var server: RedisServer!
    var loop: EventLoop!
    var connection: RedisConnection!
    var store: DeadLetterStore!
    let acme = AppKeys(app: "acme"), beta = AppKeys(app: "beta")
    let day: Int64 = 86_400_000

    override func setUpWithError() throws {
        server = try RedisServer.start()
        loop = EventLoop()
        connection = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: server.url)))
        connection.start()
        store = DeadLetterStore(topology: .single(connection), prefix: "pushgw")
    }

    override func tearDown() {
        connection.close()
        loop.close()
        server.stop()
    }

    // MARK: Helpers

    private func wait<T>(file: StaticString = #filePath, line: UInt = #line,
                         _ start: (@escaping (Result<T, RedisError>) -> Void) -> Void) -> T? {
        var result: Result<T, RedisError>?
        start { result = $0 }
        loop.run(waitingFor: "the store's answer", file: file, line: line) { result != nil }
        switch result {
        case let .success(value)?: return value
        case let .failure(error)?: XCTFail("redis: \(error)", file: file, line: line); return nil
        case nil: return nil
        }
    }

    private func send(_ args: [String], file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        wait(file: file, line: line) { connection.send(args, completion: $0) }
    }

    /// A dead letter with id `id` (`*` for now).
    @discardableResult
    private func dead(_ app: AppKeys, id: String = "*", event: String = #"{"id":"c"}"#) -> String {
        send(["XADD", app.dead, id, "event", event, "reason", "apns_credentials: InvalidProviderToken",
              "attempts", "[]", "replays", "0", "app", app.app])?.string ?? ""
    }

    /// Every entry id, oldest first, a bounded range step at a time.
    private func ids(_ app: AppKeys) -> [String] {
        var ids: [String] = []
        var start = "-"
        while let page = wait({ store.range(app, start: start, count: 500, newestFirst: false, completion: $0) }) {
            ids += page.entries.map(\.id)
            guard page.more, let last = ids.last else { break }
            start = "(" + last
        }
        return ids
    }

    // MARK: Reading

    /// A range step reads at most its count and about 256 KiB: an entry of 1 MB (as a gateway
    /// that kept refused events whole wrote them) ends its step alone, read as its first
    /// 4,096 bytes with `event_bytes`; stepping on reads every entry once, in order.
    func testARangeStepIsBoundedAndCutsAnEventOverTheWholeEventLimit() throws {
        let mega = #"{"id":"big","pad":""# + String(repeating: "x", count: 1 << 20) + #""}"#
        var written: [String] = []
        for i in 0..<12 { written.append(dead(acme, event: i % 4 == 1 ? mega : #"{"id":"small-\#(i)"}"#)) }
        let first = try XCTUnwrap(wait { store.range(acme, count: 500, newestFirst: false, completion: $0) })
        XCTAssertEqual(first.entries.map(\.id), Array(written.prefix(2)), "the step ends after the first large entry")
        XCTAssertTrue(first.more)
        let big = first.entries[1]
        XCTAssertEqual(big.values["event"], Array(mega.utf8.prefix(DeadLetterEntry.keptPrefixBytes)))
        XCTAssertEqual(big.fields["event_bytes"], String(mega.utf8.count))
        let record = DeadLetterRecord(entry: big, app: "acme", ledger: nil)
        XCTAssertFalse(record.isEventWhole)
        XCTAssertEqual(record.eventBytes, mega.utf8.count)
        XCTAssertEqual(ReplayForecast(record, ringTimeoutMs: 30_000, nowMs: Clock.unixMs()),
                       .notReplayable(keptBytes: 4_096, eventBytes: mega.utf8.count))
        XCTAssertNil(first.entries[0].values["event_bytes"], "a whole event is read whole")
        XCTAssertEqual(ids(acme), written, "step by step, every entry once, in order")
        let newest = try XCTUnwrap(wait { store.range(acme, count: 3, newestFirst: true, completion: $0) })
        XCTAssertEqual(newest.entries.map(\.id), [written[11], written[10], written[9]], "newest first, at most the count")
        XCTAssertEqual(wait { store.entry(acme, id: written[5], completion: $0) }??.fields["event_bytes"], String(mega.utf8.count))
    }

    // MARK: Retention

    func testTrimByCountKeepsTheNewestEntries() {
        let written = (0..<8).map { _ in dead(acme) }
        let trim = wait { store.trim(acme, maxEntries: 5, maxAgeMs: 14 * day, maxBytes: 64 << 20, completion: $0) }
        XCTAssertEqual(trim?.byCount, 3)
        XCTAssertEqual(trim?.byAge, 0)
        XCTAssertEqual(ids(acme), Array(written.suffix(5)), "the oldest go first, exactly")
    }

    func testTrimByAgeUsesTheEntryTimeAndIsPredictedBeforehand() {
        let now = Clock.unixMs()
        let old = [dead(acme, id: "\(now - 20 * day)-0"), dead(acme, id: "\(now - 15 * day)-0")]
        let soon = dead(acme, id: "\(now - 13 * day - 3_600_000)-0")
        let fresh = [dead(acme), dead(acme)]
        XCTAssertEqual(old.count + 1 + fresh.count, ids(acme).count)

        let dueNow = wait { store.pendingTrim(acme, maxEntries: 10_000, maxAgeMs: 14 * day, maxBytes: 64 << 20, horizonMs: 0, completion: $0) }
        XCTAssertEqual(dueNow?.length, 5)
        XCTAssertEqual(dueNow?.byAge, 2, "entries older than 14 days are about to go")
        XCTAssertEqual(dueNow?.byCount, 0)
        XCTAssertEqual(dueNow?.capped, false)
        let dueInADay = wait { store.pendingTrim(acme, maxEntries: 10_000, maxAgeMs: 14 * day, maxBytes: 64 << 20, horizonMs: day, completion: $0) }
        XCTAssertEqual(dueInADay?.byAge, 3, "within the horizon, the one 13 days old is about to go too")
        let overCount = wait { store.pendingTrim(acme, maxEntries: 2, maxAgeMs: 14 * day, maxBytes: 64 << 20, horizonMs: 0, completion: $0) }
        XCTAssertEqual(overCount?.byCount, 1, "after the age trim 3 are left, one more than the cap")
        XCTAssertEqual(overCount?.total, 3)

        let trim = wait { store.trim(acme, maxEntries: 10_000, maxAgeMs: 14 * day, maxBytes: 64 << 20, completion: $0) }
        XCTAssertEqual(trim?.byAge, 2, "what was predicted is what goes")
        XCTAssertEqual(ids(acme), [soon] + fresh)
    }

    /// Retention in bytes: 40 dead letters of 100 KB (4 MB) against a 1 MiB limit. What a trim
    /// would remove is counted first (after the age and count trims), and the trim removes the
    /// oldest until the stream's memory (`MEMORY USAGE`) is under the limit, the newest kept.
    func testTrimBySizeRemovesTheOldestUntilTheStreamFitsAndIsPredictedBeforehand() throws {
        let big = String(repeating: "x", count: 100_000)
        let written = (0..<40).map { _ in dead(acme, event: #"{"id":"c","pad":"\#(big)"}"#) }
        let usage = { self.send(["MEMORY", "USAGE", self.acme.dead, "SAMPLES", "0"])?.integer ?? 0 }
        XCTAssertGreaterThan(usage(), 4_000_000)
        let pending = try XCTUnwrap(wait { store.pendingTrim(acme, maxEntries: 35, maxAgeMs: 14 * day, maxBytes: 1 << 20, horizonMs: 0,
                                                             completion: $0) })
        XCTAssertEqual(pending.byCount, 5)
        XCTAssertEqual(pending.byAge, 0)
        XCTAssertGreaterThanOrEqual(pending.bySize, 24, "about 25 to 30 more of the 35 left must go for 1 MiB")
        XCTAssertLessThanOrEqual(pending.bySize, 32)
        let trim = try XCTUnwrap(wait { store.trim(acme, maxEntries: 35, maxAgeMs: 14 * day, maxBytes: 1 << 20, completion: $0) })
        XCTAssertEqual(trim.byCount, 5)
        XCTAssertLessThanOrEqual(abs(trim.bySize - pending.bySize), 1, "what was predicted is what goes, within an entry")
        XCTAssertLessThanOrEqual(usage(), 1 << 20, "the stream fits its limit")
        XCTAssertGreaterThanOrEqual(ids(acme).count, 4, "and keeps what fits (Redis' overhead per entry aside)")
        XCTAssertEqual(ids(acme), Array(written.suffix(40 - 5 - Int(trim.bySize))), "the oldest went, exactly in order")
        let again = try XCTUnwrap(wait { store.trim(acme, maxEntries: 35, maxAgeMs: 14 * day, maxBytes: 1 << 20, completion: $0) })
        XCTAssertEqual(again.total, 0, "nothing more once it fits")
    }

    func testRetentionRunnerTrimsEveryAppByItsPolicyAndReports() {
        let now = Clock.unixMs()
        dead(acme, id: "\(now - 3 * day)-0")
        (0..<4).forEach { _ in dead(acme) }
        (0..<6).forEach { _ in dead(beta) }
        let retention = DeadLetterRetention(loop: loop, store: store, apps: [
            .init(keys: acme, policy: DeadLetterRetentionPolicy(maxEntries: 100, maxAgeSeconds: 2 * 86_400)),
            .init(keys: beta, policy: DeadLetterRetentionPolicy(maxEntries: 4, maxAgeSeconds: 14 * 86_400)),
        ], intervalMs: 100)
        var reported: [String: Int64] = [:]
        retention.onTrim = { app, trim in reported[app, default: 0] += trim.total }

        let before = wait { done in retention.aboutToRemove { done(.success($0)) } }
        XCTAssertEqual(try before?["acme"]?.get().byAge, 1, "metrics see the old acme entry before it goes")
        XCTAssertEqual(try before?["beta"]?.get().byCount, 2, "and the two beta entries over its cap")

        retention.start()
        loop.run(waitingFor: "a trim reported for each app") { reported.count == 2 }
        // Later passes find nothing more to trim and keep running. A pass stamps each app with
        // Redis' time of its trim; passes are 100 ms apart, so each pass leaves its own stamp.
        var passes = Set<Int64>()
        loop.run(waitingFor: "three more retention passes (\(passes.count) seen)") {
            if let stamp = retention.stats["acme"]?.lastTrimMs { passes.insert(stamp) }
            return passes.count >= 4
        }
        retention.close()
        XCTAssertEqual(reported, ["acme": 1, "beta": 2], "each trim that removed entries is reported once")
        XCTAssertEqual(retention.stats["acme"]?.trimmedByAge, 1)
        XCTAssertEqual(retention.stats["beta"]?.trimmedByCount, 2)
        XCTAssertEqual(ids(acme).count, 4)
        XCTAssertEqual(ids(beta).count, 4)
        let after = wait { done in retention.aboutToRemove(horizonMs: 0) { done(.success($0)) } }
        XCTAssertEqual(try after?["beta"]?.get().total, 0, "nothing left to remove")
    }

    // MARK: Replay and purge

    func testReplayMovesTheEventBackOnceWithItsLedger() throws {
        let event = #"{"v":1,"id":"c-7","type":"incoming_call","voip_token":"aa"}"#
        let id = dead(acme, event: event)
        _ = send(["SET", acme.result("c-7"), "dead_lettered"])
        let replay = DeadLetterStore.Replay(deadEntryID: id, event: Array(event.utf8), eventId: "c-7", eventDigest: EventDigest.of(event),
                                            replays: 1, historyJSON: #"{"rounds":[]}"#, ledgerTTLSeconds: 600,
                                            callDeadlineMs: 1_764_412_345_678)
        guard case let .written(callsID)? = wait({ store.replay(acme, replay, completion: $0) }) else { return XCTFail("not replayed") }
        let calls = try XCTUnwrap(send(["XRANGE", acme.calls, "-", "+"])).array ?? []
        XCTAssertEqual(calls.count, 1)
        let entry = try XCTUnwrap(StreamReplies.entry(calls[0]))
        XCTAssertEqual(entry.id, callsID)
        XCTAssertEqual(entry.fields, ["event": event, "replay": id, "replays": "1", "call_deadline": "1764412345678"],
                       "the event unchanged, marked as a replay, with the original call's deadline")
        XCTAssertEqual(ids(acme), [], "the dead letter is gone with the replay")
        XCTAssertTrue(send(["GET", acme.result("c-7")])?.isNull ?? false, "the recorded outcome is forgotten")
        let ledger = wait { store.ledgers(acme, digests: [EventDigest.of(event), "nothing"], completion: $0) }
        XCTAssertEqual(ledger?.count, 1)
        XCTAssertEqual(ledger?[EventDigest.of(event)]?["calls_entry"], callsID)
        XCTAssertEqual(ledger?[EventDigest.of(event)]?["dead_entry"], id)
        XCTAssertEqual(ledger?[EventDigest.of(event)]?["call_deadline"], "1764412345678", "kept for a replay of the replay")
        let ttl = send(["TTL", acme.replayLedger(EventDigest.of(event))])?.integer ?? -1
        XCTAssertTrue((590...600).contains(ttl), "the ledger expires: \(ttl)")

        let twice = wait { store.replay(acme, replay, completion: $0) }
        XCTAssertEqual(twice, .gone, "a dead letter already replayed is not replayed again")
        XCTAssertEqual((send(["XLEN", acme.calls])?.integer), 1)

        let again = dead(acme, event: event)
        let purged = wait { store.purge(acme, ids: [again, "1-1"], ledgerDigests: [EventDigest.of(event)], completion: $0) }
        XCTAssertEqual(purged, 1, "only existing entries count")
        XCTAssertEqual(send(["EXISTS", acme.replayLedger(EventDigest.of(event))])?.integer, 0, "the ledger goes with it")
    }

    func testAReplayYieldsWhileTheCallsStreamHoldsEntriesTheRoutersHaveNotRead() throws {
        let event = #"{"v":1,"id":"c-8","type":"incoming_call","voip_token":"aa"}"#
        let id = dead(acme, event: event)
        for i in 0..<3 { _ = send(["XADD", acme.calls, "*", "event", "live-\(i)"]) }
        let replay = DeadLetterStore.Replay(deadEntryID: id, event: Array(event.utf8), eventId: "c-8", eventDigest: EventDigest.of(event),
                                            replays: 1, historyJSON: #"{"rounds":[]}"#, ledgerTTLSeconds: 600,
                                            callDeadlineMs: 1_764_412_345_678)
        XCTAssertEqual(wait { store.replay(acme, replay, yieldAtUnread: 3, completion: $0) }, .yielded(unread: 3),
                       "no group yet: all three are unread")
        XCTAssertEqual(ids(acme), [id], "a replay that yielded writes nothing")
        _ = send(["XGROUP", "CREATE", acme.calls, GatewayKeys.routersGroup, "0"])
        _ = send(["XREADGROUP", "GROUP", GatewayKeys.routersGroup, "gw", "COUNT", "1", "STREAMS", acme.calls, ">"])
        XCTAssertEqual(wait { store.replay(acme, replay, yieldAtUnread: 2, completion: $0) }, .yielded(unread: 2),
                       "what the routers read and route counts no more")
        guard case .written? = wait({ store.replay(acme, replay, yieldAtUnread: 3, completion: $0) }) else {
            return XCTFail("fewer unread than the bound: replayed")
        }
        XCTAssertEqual(ids(acme), [])
        XCTAssertEqual(send(["XLEN", acme.calls])?.integer, 4)
    }

    func testAuditRecordsGoToACappedGatewayStream() throws {
        let id = wait { store.audit([("verb", "purge"), ("user", "ops")], maxLen: 10, completion: $0) }
        XCTAssertNotNil(id)
        let first = try StreamReplies.entryList(try XCTUnwrap(send(["XRANGE", "pushgw:audit", "-", "+"]))).entries
        XCTAssertEqual(first.map(\.fields), [["verb": "purge", "user": "ops"]])

        // The cap is approximate (MAXLEN ~): Redis drops whole nodes of the stream, here of 10
        // entries, so 60 records leave between 10 and 19, the newest last.
        _ = send(["CONFIG", "SET", "stream-node-max-entries", "10"])
        var last: String?
        for i in 0..<60 { last = wait { store.audit([("verb", "purge"), ("n", String(i))], maxLen: 10, completion: $0) } }
        let length = try XCTUnwrap(send(["XLEN", "pushgw:audit"])?.integer)
        XCTAssertTrue((10..<20).contains(length), "the audit stream is capped near 10 entries: \(length)")
        let newest = try StreamReplies.entryList(try XCTUnwrap(send(["XREVRANGE", "pushgw:audit", "+", "-", "COUNT", "1"]))).entries
        XCTAssertEqual(newest.map(\.id), [last].compactMap { $0 }, "the newest record is kept")
    }
}
