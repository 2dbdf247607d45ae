import XCTest
import Foundation
import EventLoop
import TestSupport
@testable import CallStorage
@testable import RedisClient

/// CallStore against a real redis-server: what it writes is read back with plain commands,
/// redis-cli and Python's `redis`, the way producers in other languages see it.
class CallStoreTests: XCTestCase {
    var server: RedisServer!
    /// The one-node cluster `server` belongs to in the cluster variant.
    var clusterNode: LocalRedisCluster?
    /// Runs the tests on a one-node Redis Cluster, which refuses any script whose keys span slots.
    class var onClusterNode: Bool { false }
    var loop: EventLoop!
    var store: CallStore!
    /// How the store's connections reach the server (the cluster tests' node connections too).
    var connection: RedisConnection.Config!
    var producer: RedisConnection!
    let acme = AppKeys(app: "acme"), beta = AppKeys(app: "beta"), gamma = AppKeys(app: "gamma")

    override func setUpWithError() throws {
        if Self.onClusterNode {
            clusterNode = try LocalRedisCluster.start(primaries: 1)
            server = clusterNode?.nodes[0]
        } else {
            server = try RedisServer.start()
        }
        loop = EventLoop()
        let url = try RedisURL(parsing: server.url)
        connection = RedisConnection.Config(url: url, backoff: ReconnectBackoff(baseMs: 20, capMs: 200))
        store = CallStore(config: .init(), apps: [acme, beta, gamma],
                          topology: .own(loop: loop, redis: connection, cluster: nil, clientName: "pushgw-write"))
        store.start()
        producer = try connect(loop, server.url)
    }

    override func tearDown() {
        store.close()
        producer.close()
        loop.close()
        server.stop()
    }

    // MARK: Helpers

    /// A result JSON as `OutcomeRecord.json()` writes it: `outcome` first, then `id`.
    private func result(_ outcome: String, _ id: String, _ rest: String = "") -> String {
        #"{"outcome":"\#(outcome)","id":"\#(id)""# + (rest.isEmpty ? "" : ",\(rest)") + "}"
    }

    fileprivate func event(_ id: String) -> String {
        #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"aa01","alert_token":"bb02"}"#
    }

    @discardableResult
    fileprivate func produce(_ app: AppKeys, _ id: String, file: StaticString = #filePath, line: UInt = #line) -> String {
        call(producer, ["XADD", app.calls, "*", "event", event(id)], file: file, line: line).value(file: file, line: line)?.string ?? ""
    }

    private func read(_ apps: [AppKeys], consumer: String = "c1", count: Int = 10, blockMs: Int64? = 1000,
                      file: StaticString = #filePath, line: UInt = #line) -> [AppKeys: [StreamEntry]] {
        complete(loop, file: file, line: line) { store.readNew(apps: apps, consumer: consumer, count: count, blockMs: blockMs, completion: $0) }
            .value(file: file, line: line) ?? [:]
    }

    fileprivate func redis(_ args: String..., file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
        call(producer, args, file: file, line: line).value(file: file, line: line)
    }

    private func fields(_ stream: String, file: StaticString = #filePath, line: UInt = #line) -> [[String: String]] {
        complete(loop, file: file, line: line) { store.range(stream, count: 100, completion: $0) }.value(file: file, line: line)?.map(\.fields) ?? []
    }

    // MARK: Reading

    func testReadNewReadsEveryAppInOneCallWithACountPerApp() throws {
        for i in 0..<3 { produce(acme, "a\(i)") }
        produce(beta, "b0")
        for i in 0..<2 { produce(gamma, "g\(i)") }
        let first = read([acme, beta, gamma], count: 2)
        XCTAssertEqual(first[acme]?.count, 2, "COUNT applies per app")
        XCTAssertEqual(first[beta]?.count, 1)
        XCTAssertEqual(first[gamma]?.count, 2)
        XCTAssertEqual(first[acme]?.first?.fields, ["event": event("a0")])
        let second = read([acme, beta, gamma], count: 2)
        XCTAssertEqual(second[acme]?.map { $0.fields["event"] }, [event("a2")])
        XCTAssertNil(second[beta])
        XCTAssertNil(second[gamma])
        XCTAssertEqual(read([acme, beta, gamma], blockMs: 50), [:], "BLOCK timing out gives no entries")
    }

    func testEntriesWrittenBeforeTheGroupExistedAreDelivered() {
        // The group starts at 0: nothing a producer wrote before the first gateway ran is skipped.
        let early = AppKeys(app: "early")
        produce(early, "e0")
        XCTAssertNotNil(complete(loop) { store.ensureGroup(early, completion: $0) }.value())
        XCTAssertNotNil(complete(loop) { store.ensureGroup(early, completion: $0) }.value(), "BUSYGROUP is success")
        XCTAssertEqual(read([early])[early]?.count, 1)
    }

    func testReadNewSurvivesARestartWithoutNOGROUP() throws {
        produce(acme, "before")
        guard let before = read([acme])[acme]?.first else { return XCTFail("no entry read") }
        let first = complete(loop) { store.finish(acme, entryID: before.id, record: .init(eventId: "before", resultJSON: result("delivered_voip", "before")), completion: $0) }
        XCTAssertEqual(first.value()?.recorded, true)
        // No persistence: streams and groups are gone. A cluster node keeps its slots (its
        // nodes.conf) and serves them again before the loop runs and the store reconnects.
        if let clusterNode { try clusterNode.restart(server) } else { try server.restart() }
        XCTAssertNotNil(callUntilSuccess(producer, ["XADD", acme.calls, "*", "event", event("after")]))
        var errors: [RedisError] = []
        var got: [StreamEntry] = []
        for _ in 0..<100 where got.isEmpty {
            switch complete(loop, { store.readNew(apps: [acme], consumer: "c1", count: 10, blockMs: 200, completion: $0) }) {
            case .success(let entries): got = entries[acme] ?? []
            case .failure(let error): errors.append(error); pause(loop, ms: 50)
            }
        }
        XCTAssertEqual(got.map { $0.fields["event"] }, [event("after")])
        XCTAssertFalse(errors.contains { $0.serverCode == "NOGROUP" }, "onReady re-creates groups before reads: \(errors)")
        // Scripts are gone from Redis's cache too: EVALSHA's NOSCRIPT falls back to EVAL.
        let report = complete(loop) { store.finish(acme, entryID: got[0].id, record: .init(eventId: "after", resultJSON: result("delivered_voip", "after")), completion: $0) }
        XCTAssertEqual(report.value(), RecordReport(recorded: true, acknowledged: true, deadEntryID: nil))
    }

    /// A blocked read holds up its connection, so the store's reads have one of their own
    /// (`SingleStreamReads`, `pushgw-read`) beside the topology's (`pushgw-write`): while a read
    /// blocks in Redis, the store's other commands are answered.
    func testAReadThatBlocksHoldsUpNoOtherCommand() throws {
        XCTAssertEqual(store.links.map(\.name), ["read", "write"])
        var read: Result<[AppKeys: [StreamEntry]], RedisError>?
        store.readNew(apps: [acme], consumer: "c1", count: 10, blockMs: 20_000) { read = $0 }
        var blocked = false
        for _ in 0..<500 where !blocked {
            let list = call(producer, ["CLIENT", "LIST"]).value()?.string ?? ""
            blocked = list.split(separator: "\n").contains { $0.contains(" name=pushgw-read ") && $0.contains(" cmd=xreadgroup") }
            if !blocked { pause(loop, ms: 10) }
        }
        XCTAssertTrue(blocked, "the read blocks in XREADGROUP on its own connection")
        XCTAssertNotNil(complete(loop) { store.ping(completion: $0) }.value(), "answered while the read blocks")
        XCTAssertNil(read, "the read still blocks")
        produce(acme, "wakes-the-read")
        drive(loop, waitingFor: "the read's entry", until: { read != nil })
        XCTAssertEqual(try read?.get()[acme]?.map { $0.fields["event"] }, [event("wakes-the-read")])
    }

    // MARK: Recording

    func testFinishRecordsOnceAndAcknowledgesAndDeletesTheEntry() throws {
        produce(acme, "call-1")
        guard let entry = read([acme])[acme]?.first else { return XCTFail("no entry read") }
        let recorded = result("delivered_alert", "call-1", #""cause":"voip_token_invalid""#)
        let invalid = InvalidToken(token: "aa01", channel: .voip, reason: "Unregistered", timestampMs: 1_764_412_345_000)
        let report = complete(loop) {
            store.finish(acme, entryID: entry.id, record: .init(eventId: "call-1", resultJSON: recorded),
                         invalidTokens: [invalid], completion: $0)
        }
        XCTAssertEqual(report.value(), RecordReport(recorded: true, acknowledged: true, deadEntryID: nil))

        XCTAssertEqual(fields(acme.results), [["result": recorded]])
        XCTAssertEqual(redis("GET", acme.result("call-1"))?.string, recorded, "the result is found by event id")
        let doneTTL = redis("TTL", acme.result("call-1"))?.integer ?? -1
        XCTAssertTrue((1...86_400).contains(doneTTL), "the result key expires with the idempotency window: \(doneTTL)")
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0, "a finished entry is deleted")
        XCTAssertEqual(redis("XPENDING", acme.calls, "pushgw")?.array?.first?.integer, 0, "and acknowledged")
        XCTAssertEqual(fields(acme.feedback), [["token": "aa01", "channel": "voip", "reason": "Unregistered", "timestamp": "1764412345000"]])
        XCTAssertEqual(redis("GET", acme.invalidPrefix(.voip) + "aa01")?.string, "1764412345000")
        let invalidTTL = redis("TTL", acme.invalidPrefix(.voip) + "aa01")?.integer ?? -1
        XCTAssertTrue((29 * 86_400...30 * 86_400).contains(invalidTTL), "known-invalid tokens are kept 30 days: \(invalidTTL)")

        // The same event delivered again (a crash after APNs answered): only its duplicate
        // answer is written, naming the first outcome.
        let again = produce(acme, "call-1")
        _ = read([acme])
        let second = complete(loop) {
            store.finish(acme, entryID: again, record: .init(eventId: "call-1", resultJSON: result("delivered_voip", "call-1", #""entry":"\#(again)""#)),
                         invalidTokens: [invalid], completion: $0)
        }
        XCTAssertEqual(second.value(), RecordReport(recorded: false, firstOutcome: "delivered_alert", acknowledged: true, deadEntryID: nil))
        XCTAssertEqual(fields(acme.results).map { $0["result"] },
                       [recorded, #"{"outcome":"duplicate","first_outcome":"delivered_alert","id":"call-1","entry":"\#(again)"}"#],
                       "one outcome per event id; the copy gets a duplicate answer with its own fields")
        XCTAssertEqual(fields(acme.feedback).count, 1)
        XCTAssertEqual(redis("GET", acme.result("call-1"))?.string, recorded, "the first outcome stands")
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0, "the duplicate is still acknowledged and deleted")
    }

    /// An app with webhooks gets each result queued on its webhooks stream by the same script,
    /// with the results entry's id (the Idempotency-Key); an app without gets nothing there.
    func testResultsOfAnAppWithWebhooksAreQueuedForDeliveryInTheSameStep() throws {
        let hooked = AppKeys(app: "acme", sendsWebhooks: true)
        for id in ["w-1", "w-2"] { produce(acme, id) }
        let entries = read([acme])[acme] ?? []
        XCTAssertEqual(entries.count, 2)
        let recorded = result("delivered_voip", "w-1")
        _ = complete(loop) { store.finish(hooked, entryID: entries[0].id, record: .init(eventId: "w-1", resultJSON: recorded), completion: $0) }
            .value()
        // A copy of w-1: its duplicate answer is a result too.
        _ = complete(loop) {
            store.finish(hooked, entryID: entries[1].id, record: .init(eventId: "w-1", resultJSON: result("delivered_voip", "w-1", #""entry":"x""#)),
                         completion: $0)
        }.value()
        let letter = DeadLetterEntry(event: event("w-3"), reason: "BadTopic", attemptsJSON: "[]", firstFailureMs: 1, lastFailureMs: 1)
        let dead = result("dead_lettered", "w-3", #""reason":"apns_config: BadTopic""#)
        _ = complete(loop) { store.deadLetter(hooked, entryID: nil, deadLetter: letter, record: .init(eventId: "w-3", resultJSON: dead),
                                              completion: $0) }.value()
        let loose = #"{"outcome":"dead_lettered"}"#
        _ = complete(loop) {
            store.deadLetter(hooked, entryID: nil, deadLetter: letter, record: .init(eventId: nil, keying: .provisional, resultJSON: loose),
                             completion: $0)
        }.value()
        // A batch with ring tallies (the VoIP-ban guard's keys come before the webhooks stream).
        let tallied = complete(loop) {
            store.finish(hooked, [
                FinishRecord(entryID: nil, record: .init(eventId: "w-4", resultJSON: result("delivered_voip", "w-4")),
                             ringTally: .call(rings: [.init(voipToken: "aa04", silent: true, ringingID: "w-4")], suspectAfter: 3)),
                FinishRecord(entryID: nil, record: .init(eventId: "w-5", namespace: .ringing, resultJSON: result("ringing", "w-5")),
                             ringTally: .receipt(ringingID: "w-5")),
            ], completion: $0)
        }.value()
        XCTAssertEqual(tallied?.recorded, [true, true])
        let results = complete(loop) { store.range(acme.results, count: 100, completion: $0) }.value() ?? []
        let queued = complete(loop) { store.range(acme.webhooks, count: 100, completion: $0) }.value() ?? []
        XCTAssertEqual(results.count, 6)
        XCTAssertEqual(queued.map(\.fields), results.map { ["result": $0.fields["result"] ?? "", "results_entry": $0.id] },
                       "every result, in order, with its results entry id")
        XCTAssertEqual(queued.first?.fields["result"], recorded)
        XCTAssertEqual(redis("GET", acme.result("w-3"))?.string, dead, "the dead letter's result key is still written")
        XCTAssertEqual(fields(acme.dead).count, 2)

        // Without webhooks nothing is queued.
        produce(beta, "n-1")
        guard let plain = read([beta])[beta]?.first else { return XCTFail("no entry read") }
        _ = complete(loop) { store.finish(beta, entryID: plain.id, record: .init(eventId: "n-1", resultJSON: result("expired", "n-1")),
                                          completion: $0) }.value()
        XCTAssertEqual(redis("EXISTS", beta.webhooks)?.integer, 0)
    }

    /// A call with devices whose outcome is no dead letter carries its devices' dead letters:
    /// written with its result, beside feedback and a ring tally of the same batch, each
    /// naming its device; a record written again (its own result there) writes none twice.
    func testFinishWritesADevicesDeadLettersWithTheRecordOnlyOnce() throws {
        for id in ["dl-1", "dl-2"] { produce(acme, id) }
        let entries = read([acme], count: 10)[acme] ?? []
        XCTAssertEqual(entries.count, 2)
        let gone = InvalidToken(token: "dd01", channel: .voip, reason: "Unregistered", timestampMs: 7)
        let pixel = DeadLetterEntry(event: Array(event("dl-1").utf8), reason: "fcm_credentials: credentials.firebase: refused",
                                    attemptsJSON: #"{"outcome":"dead_lettered"}"#, firstFailureMs: 3, lastFailureMs: 4,
                                    device: "bob-pixel")
        var ipad = DeadLetterEntry(event: Array(event("dl-1").utf8), reason: "apns_credentials: InvalidProviderToken", attemptsJSON: "{}",
                                   firstFailureMs: 5, lastFailureMs: 6, device: "bob-ipad")
        ipad.eventBytes = 70_000
        ipad.eventSHA256 = "ab"
        let call = result("delivered_voip", "dl-1", #""entry":"\#(entries[0].id)""#)
        let batch = [
            FinishRecord(entryID: entries[0].id, record: .init(eventId: "dl-1", resultJSON: call), invalidTokens: [gone],
                         ringTally: .call(rings: [.init(voipToken: "aa04", silent: false, ringingID: "dl-1")], suspectAfter: 3),
                         deadLetters: [pixel, ipad]),
            FinishRecord(entryID: entries[1].id, record: .init(eventId: "dl-2", resultJSON: result("expired", "dl-2")),
                         invalidTokens: [gone]),
        ]
        let report = complete(loop) { store.finish(acme, batch, completion: $0) }.value()
        XCTAssertEqual(report?.recorded, [true, true])
        XCTAssertEqual(report?.acknowledged, 2)
        let expected = [
            ["event": event("dl-1"), "reason": pixel.reason, "attempts": pixel.attemptsJSON, "first_failure_ms": "3",
             "last_failure_ms": "4", "replays": "0", "app": "acme", "device": "bob-pixel"],
            ["event": event("dl-1"), "reason": ipad.reason, "attempts": "{}", "first_failure_ms": "5", "last_failure_ms": "6",
             "replays": "0", "app": "acme", "device": "bob-ipad", "event_bytes": "70000", "event_sha256": "ab"],
        ]
        XCTAssertEqual(fields(acme.dead), expected)
        XCTAssertEqual(fields(acme.feedback).map { $0["token"] }, ["dd01", "dd01"], "each record's feedback, after the dead letters too")
        XCTAssertEqual(redis("GET", acme.result("dl-2"))?.string, result("expired", "dl-2"), "the record after them is written")
        // Written again (its answer lost): the entry's own result is there, nothing more.
        let again = complete(loop) { store.finish(acme, [batch[0]], completion: $0) }.value()
        XCTAssertEqual(again?.recorded, [false])
        XCTAssertEqual(again?.firstOutcomes, [nil])
        XCTAssertEqual(fields(acme.dead), expected, "no dead letter twice")
        XCTAssertEqual(fields(acme.results).count, 2)
        // A copy's record (another entry, the id taken): its duplicate answer only.
        let copy = FinishRecord(entryID: nil, record: .init(eventId: "dl-1", resultJSON: result("delivered_voip", "dl-1", #""entry":"9-9""#)),
                                deadLetters: [pixel])
        let duplicate = complete(loop) { store.finish(acme, [copy], completion: $0) }.value()
        XCTAssertEqual(duplicate?.firstOutcomes, ["delivered_voip"])
        XCTAssertEqual(fields(acme.dead), expected, "a duplicate writes no dead letter")
        XCTAssertEqual(fields(acme.results).count, 3)
    }

    func testFinishOfABatchRecordsEachEventOnceAndAcknowledgesTheirEntriesInOneStep() throws {
        produce(acme, "done-before")
        for id in ["b-1", "b-2", "done-before"] { produce(acme, id) }
        let entries = read([acme], count: 10)[acme] ?? []
        XCTAssertEqual(entries.count, 4)
        // The first entry's event finishes alone; the batch then holds a second delivery of it.
        let first = complete(loop) {
            store.finish(acme, entryID: entries[0].id, record: .init(eventId: "done-before", resultJSON: result("delivered_voip", "done-before")),
                         completion: $0)
        }
        XCTAssertEqual(first.value()?.recorded, true)
        let gone = InvalidToken(token: "dd01", channel: .voip, reason: "Unregistered", timestampMs: 7)
        let bad = InvalidToken(token: "ee02", channel: .alert, reason: "BadDeviceToken", timestampMs: 8)
        let batch = [
            FinishRecord(entryID: entries[1].id, record: .init(eventId: "b-1", resultJSON: result("delivered_alert", "b-1")),
                         invalidTokens: [gone]),
            FinishRecord(entryID: entries[2].id, record: .init(eventId: "b-2", resultJSON: result("undeliverable", "b-2")),
                         invalidTokens: [gone, bad]),
            FinishRecord(entryID: entries[3].id, record: .init(eventId: "done-before", resultJSON: result("expired", "done-before"))),
        ]
        let report = complete(loop) { store.finish(acme, batch, completion: $0) }
        XCTAssertEqual(report.value(), FinishReport(recorded: [true, true, false], firstOutcomes: [nil, nil, "delivered_voip"],
                                                    acknowledged: 3))
        XCTAssertEqual(fields(acme.results).map { $0["result"] },
                       [result("delivered_voip", "done-before"), result("delivered_alert", "b-1"), result("undeliverable", "b-2"),
                        #"{"outcome":"duplicate","first_outcome":"delivered_voip","id":"done-before"}"#],
                       "one outcome per event id, in the batch's order, and the copy's duplicate answer")
        XCTAssertEqual(redis("GET", acme.result("b-1"))?.string, result("delivered_alert", "b-1"))
        XCTAssertEqual(redis("GET", acme.result("b-2"))?.string, result("undeliverable", "b-2"))
        XCTAssertEqual(redis("GET", acme.result("done-before"))?.string, result("delivered_voip", "done-before"),
                       "the first outcome stands")
        XCTAssertEqual(fields(acme.feedback).map { $0["token"] }, ["dd01", "dd01", "ee02"], "every record's feedback")
        XCTAssertEqual(redis("GET", acme.invalidPrefix(.alert) + "ee02")?.string, "8", "invalid-token keys of a later record")
        XCTAssertEqual(redis("XLEN", acme.calls)?.integer, 0, "every entry of the batch is deleted")
        XCTAssertEqual(redis("XPENDING", acme.calls, "pushgw")?.array?.first?.integer, 0)

        // Acknowledged entries count once: the same batch again acknowledges nothing and
        // records no outcome; each copy gets its duplicate answer.
        let again = complete(loop) { store.finish(acme, batch, completion: $0) }
        XCTAssertEqual(again.value(), FinishReport(recorded: [false, false, false],
                                                   firstOutcomes: ["delivered_alert", "undeliverable", "delivered_voip"], acknowledged: 0))
        XCTAssertEqual(fields(acme.results).count, 7)
        XCTAssertEqual(fields(acme.feedback).count, 3, "a duplicate writes no feedback")
    }

    func testDeadLetterWritesTheDeadEntryAndTheResultAndAcknowledges() {
        produce(beta, "call-9")
        guard let entry = read([beta])[beta]?.first else { return XCTFail("no entry read") }
        let dead = DeadLetterEntry(event: event("call-9"), reason: "BadTopic", attemptsJSON: #"[{"status":400,"reason":"BadTopic"}]"#,
                              firstFailureMs: 1_700_000_000_000, lastFailureMs: 1_700_000_000_500, replays: 0)
        let report = complete(loop) {
            store.deadLetter(beta, entryID: entry.id, deadLetter: dead,
                             record: .init(eventId: "call-9", resultJSON: result("dead_lettered", "call-9", #""reason":"apns_config: BadTopic""#)),
                             completion: $0)
        }.value()
        XCTAssertEqual(report?.recorded, true)
        XCTAssertEqual(report?.acknowledged, true)
        XCTAssertNotNil(report?.deadEntryID)
        XCTAssertEqual(fields(beta.dead), [[
            "event": event("call-9"), "reason": "BadTopic", "attempts": #"[{"status":400,"reason":"BadTopic"}]"#,
            "first_failure_ms": "1700000000000", "last_failure_ms": "1700000000500", "replays": "0", "app": "beta",
        ]])
        XCTAssertEqual(fields(beta.results), [["result": result("dead_lettered", "call-9", #""reason":"apns_config: BadTopic""#)]])
        XCTAssertEqual(redis("GET", beta.result("call-9"))?.string, result("dead_lettered", "call-9", #""reason":"apns_config: BadTopic""#))
        XCTAssertEqual(redis("XLEN", beta.calls)?.integer, 0)

        // An invalid event without an id, not from the stream: written, nothing to acknowledge.
        let loose = complete(loop) {
            store.deadLetter(beta, entryID: nil, deadLetter: DeadLetterEntry(event: "not json", reason: "invalid_event", attemptsJSON: "[]",
                                                                        firstFailureMs: 1, lastFailureMs: 1),
                             record: .init(eventId: nil, keying: .provisional, resultJSON: #"{"outcome":"dead_lettered"}"#), completion: $0)
        }.value()
        XCTAssertEqual(loose?.recorded, true)
        XCTAssertEqual(loose?.acknowledged, false)
        XCTAssertEqual(fields(beta.dead).count, 2)
    }

    func testAnEntryRecordedAgainAfterItsOwnResultGetsNoSecondResult() {
        // A calls entry delivered again after its record ran (claimed back while a hung Redis
        // still had the record to run): its own result is there, so each recording script
        // writes nothing for it and still acknowledges it; another entry with its id is a
        // duplicate.
        let entry = produce(acme, "again")
        _ = read([acme])
        let own = result("delivered_voip", "again", #""entry":"\#(entry)""#)
        let first = complete(loop) { store.finish(acme, entryID: entry, record: .init(eventId: "again", resultJSON: own), completion: $0) }
        XCTAssertEqual(first.value()?.recorded, true)
        let once = complete(loop) {
            store.finish(acme, entryID: entry, record: .init(eventId: "again", resultJSON: result("delivered_alert", "again", #""entry":"\#(entry)""#)),
                         completion: $0)
        }
        XCTAssertEqual(once.value(), RecordReport(recorded: false, firstOutcome: nil, acknowledged: false, deadEntryID: nil),
                       "a record of the same entry: nothing written")
        let duplicate = complete(loop) {
            store.finish(acme, entryID: entry, record: .init(eventId: "again", keying: .duplicate,
                                                           resultJSON: #"{"outcome":"duplicate","first_outcome":"delivered_voip","id":"again","entry":"\#(entry)"}"#),
                         completion: $0)
        }
        XCTAssertEqual(duplicate.value(), RecordReport(recorded: false, firstOutcome: nil, acknowledged: false, deadEntryID: nil),
                       "a duplicate answer to the same entry: nothing written")
        let letter = DeadLetterEntry(event: event("again"), reason: "BadTopic", attemptsJSON: "[]", firstFailureMs: 1, lastFailureMs: 1)
        let dead = complete(loop) {
            store.deadLetter(acme, entryID: entry, deadLetter: letter,
                             record: .init(eventId: "again", resultJSON: result("dead_lettered", "again", #""entry":"\#(entry)""#)), completion: $0)
        }
        XCTAssertEqual(dead.value()?.recorded, false)
        XCTAssertNil(dead.value()?.firstOutcome)
        XCTAssertNil(dead.value()?.deadEntryID, "no second dead letter")
        XCTAssertEqual(fields(acme.results).map { $0["result"] }, [own], "one result for the entry")
        XCTAssertEqual(redis("GET", acme.result("again"))?.string, own)
        // An invalid entry's provisional result, recorded twice: one dead letter, one result.
        let bad = produce(acme, "bad")
        _ = read([acme])
        let invalid = result("dead_lettered", "bad", #""entry":"\#(bad)","reason":"invalid_event: voip_token: not a hex string""#)
        for expected in [true, false] {
            let report = complete(loop) {
                store.deadLetter(acme, entryID: bad, deadLetter: letter, record: .init(eventId: "bad", keying: .provisional, resultJSON: invalid),
                                 completion: $0)
            }
            XCTAssertEqual(report.value()?.recorded, expected)
        }
        XCTAssertEqual(fields(acme.dead).count, 1)
        // Another entry with the id is a duplicate, answered as such.
        let copy = produce(acme, "again")
        _ = read([acme])
        let other = complete(loop) {
            store.finish(acme, entryID: copy, record: .init(eventId: "again", resultJSON: result("delivered_voip", "again", #""entry":"\#(copy)""#)),
                         completion: $0)
        }
        XCTAssertEqual(other.value(), RecordReport(recorded: false, firstOutcome: "delivered_voip", acknowledged: true, deadEntryID: nil))
        XCTAssertEqual(fields(acme.results).count, 3, "the first result, the invalid event's, the copy's duplicate")
    }

    func testAnInvalidEventsResultDoesNotClaimItsIdAndNeverReplacesAnOutcome() {
        let invalid = result("dead_lettered", "c-5", #""reason":"invalid_event: deadline: expected an integer (unix ms), got string""#)
        let letter = DeadLetterEntry(event: "{}", reason: "invalid_event: …", attemptsJSON: "[]", firstFailureMs: 1, lastFailureMs: 1)
        func deadLetterTheInvalidEvent() -> RecordReport? {
            complete(loop) {
                store.deadLetter(acme, entryID: nil, deadLetter: letter,
                                 record: .init(eventId: "c-5", keying: .provisional, resultJSON: invalid), completion: $0)
            }.value()
        }
        let first = deadLetterTheInvalidEvent()
        XCTAssertEqual(first?.recorded, true)
        XCTAssertEqual(redis("GET", acme.result("c-5"))?.string, invalid, "found by id while nothing better is there")
        let lookup = complete(loop) { store.lookup(acme, eventId: "c-5", voipToken: nil, alertToken: nil, completion: $0) }
        XCTAssertNil(lookup.value()?.outcome, "the invalid event's result does not make the id done")
        // The corrected event replaces it.
        let corrected = result("delivered_voip", "c-5")
        let report = complete(loop) { store.finish(acme, entryID: nil, record: .init(eventId: "c-5", resultJSON: corrected), completion: $0) }
        XCTAssertEqual(report.value()?.recorded, true, "the corrected event is recorded, not a duplicate")
        XCTAssertEqual(redis("GET", acme.result("c-5"))?.string, corrected)
        // A later invalid copy is dead-lettered with its result, but the outcome stands.
        let later = deadLetterTheInvalidEvent()
        XCTAssertEqual(later?.recorded, true)
        XCTAssertEqual(redis("GET", acme.result("c-5"))?.string, corrected, "an invalid event never replaces an outcome")
        XCTAssertEqual(fields(acme.dead).count, 2, "every invalid event is dead-lettered")
        XCTAssertEqual(fields(acme.results).count, 3)
        XCTAssertEqual(ResultEntry.claimedOutcome(invalid), nil)
        XCTAssertEqual(ResultEntry.claimedOutcome(corrected), "delivered_voip")
        XCTAssertEqual(ResultEntry.claimedOutcome(result("dead_lettered", "c-6", #""reason":"apns_config: BadTopic""#)), "dead_lettered")
    }

    func testLookupReportsOutcomeCancellationAndKnownInvalidTokensInOneRoundTrip() {
        let empty = complete(loop) { store.lookup(acme, eventId: "call-2", voipToken: "aa01", alertToken: "bb02", completion: $0) }
        XCTAssertEqual(empty.value(), EventLookup(outcome: nil, cancelled: false, voipInvalidSinceMs: nil, alertInvalidSinceMs: nil))

        _ = redis("SET", acme.cancelled("call-2"), "1", "EX", "60")  // as the retry schedule's cancel step marks it
        _ = complete(loop) {
            store.finish(acme, entryID: nil, record: .init(eventId: "call-2", resultJSON: result("cancelled", "call-2")),
                         invalidTokens: [InvalidToken(token: "bb02", channel: .alert, reason: "BadDeviceToken", timestampMs: 42)], completion: $0)
        }
        let full = complete(loop) { store.lookup(acme, eventId: "call-2", voipToken: "aa01", alertToken: "bb02", completion: $0) }
        XCTAssertEqual(full.value(), EventLookup(outcome: "cancelled", cancelled: true, voipInvalidSinceMs: nil, alertInvalidSinceMs: 42))
        let noTokens = complete(loop) { store.lookup(acme, eventId: "call-2", voipToken: nil, alertToken: nil, completion: $0) }
        XCTAssertEqual(noTokens.value(), EventLookup(outcome: "cancelled", cancelled: true, voipInvalidSinceMs: nil, alertInvalidSinceMs: nil))
        XCTAssertNil(complete(loop) { store.lookup(beta, eventId: "call-2", voipToken: nil, alertToken: "bb02", completion: $0) }.value()?.alertInvalidSinceMs,
                     "known-invalid tokens are per app")
    }

    /// The compact idempotency record, read from the real redis-server: the bucket a call's
    /// record lands in (unix s / a quarter of the window), its code, the bucket's expiry (its
    /// start + the window + a quarter) and the detail's shorter TTL; once the detail expired, the
    /// lookup still knows the first outcome and claims nothing, and `calls show`'s and the HTTP
    /// API's reads say `detail_expired` with it. A code not in the table fails the lookup.
    func testACallsCompactRecordLandsInItsBucketAndAnswersForTheWindowOnceItsDetailExpired() throws {
        let windows = RetentionWindows(resultSeconds: 3_600, resultDetailSeconds: 1, compactRecord: true)
        store.updateApps([acme, beta, gamma], windows: ["acme": windows])
        let buckets = windows.buckets
        XCTAssertEqual(buckets.quarterSeconds, 900)
        let before = Clock.unixMs() / 1000
        let recorded = complete(loop) {
            store.finish(acme, entryID: nil, record: .init(eventId: "k-1", resultJSON: result("delivered_alert", "k-1")), completion: $0)
        }
        let after = Clock.unixMs() / 1000
        XCTAssertEqual(recorded.value()?.recorded, true)
        let holding = Set([before, after].map { buckets.bucket(atUnixSeconds: $0) }).filter {
            redis("HGET", acme.outcomes($0), "k-1")?.string == CompactOutcome.code(of: "delivered_alert")
        }
        XCTAssertEqual(holding.count, 1, "the record is in the bucket of its time, with its outcome's code")
        let bucket = try XCTUnwrap(holding.first)
        XCTAssertEqual(redis("EXPIRETIME", acme.outcomes(bucket))?.integer, bucket * 900 + 3_600 + 900,
                       "the bucket expires a window and a quarter after its start")
        XCTAssertEqual(redis("TTL", acme.result("k-1"))?.integer, 1, "the detail lives result_detail_s")
        XCTAssertEqual(redis("HLEN", acme.outcomes(bucket))?.integer, 1)
        XCTAssertNil(redis("HGET", beta.outcomes(bucket), "k-1")?.string, "records are per app")

        for _ in 0..<100 where redis("EXISTS", acme.result("k-1"))?.integer != 0 { pause(loop, ms: 50) }
        XCTAssertEqual(redis("EXISTS", acme.result("k-1"))?.integer, 0, "the detail expired")
        let found = complete(loop) {
            store.lookup(acme, [LookupQuery(eventId: "k-1", voipToken: nil, alertToken: nil, claim: true),
                                LookupQuery(eventId: "k-2", voipToken: nil, alertToken: nil, claim: true)],
                         claimAs: "me", claimTTLMs: 60_000, completion: $0)
        }
        XCTAssertEqual(found.value()?.map(\.outcome), ["delivered_alert", nil], "the first outcome, from the compact record")
        XCTAssertEqual(found.value()?.map(\.claimHolder), [nil, "me"], "a done call is not claimed; a new one is")
        XCTAssertEqual(redis("EXISTS", acme.result("k-1"))?.integer, 0, "no claim was written for the done call")
        // A query that claims nothing (an end of the call) reads the compact record beside the
        // claims; each answer keeps its own marks (the claiming one's result key is not in the MGET).
        _ = redis("SET", acme.cancelled("k-4"), "1", "EX", "60")
        _ = redis("SET", acme.invalidVoipPrefix + "aa07", "77", "EX", "60")
        let mixed = complete(loop) {
            store.lookup(acme, [LookupQuery(eventId: "k-1", voipToken: "aa06", alertToken: nil),
                                LookupQuery(eventId: "k-4", voipToken: "aa07", alertToken: nil, claim: true),
                                LookupQuery(eventId: "k-2", voipToken: "aa07", alertToken: nil)],
                         claimAs: "me", claimTTLMs: 60_000, completion: $0)
        }
        XCTAssertEqual(mixed.value()?.map(\.outcome), ["delivered_alert", nil, nil])
        XCTAssertEqual(mixed.value()?.map(\.claimHolder), [nil, "me", nil], "only the query that asks claims")
        XCTAssertEqual(mixed.value()?.map(\.cancelled), [false, true, false])
        XCTAssertEqual(mixed.value()?.map(\.voipInvalidSinceMs), [nil, 77, 77])
        // A code the lookup cannot read (a newer gateway's, say) while the call's detail is still
        // there: the detail answers, as for a call that claims nothing, and nothing is claimed.
        _ = redis("HSET", acme.outcomes(buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000)), "k-5", "?")
        _ = redis("SET", acme.result("k-5"), result("delivered_voip", "k-5"), "EX", "60")
        let detailed = complete(loop) {
            store.lookup(acme, [LookupQuery(eventId: "k-5", voipToken: nil, alertToken: nil, claim: true)],
                         claimAs: "me", claimTTLMs: 60_000, completion: $0)
        }
        XCTAssertEqual(detailed.value()?.map(\.outcome), ["delivered_voip"])
        XCTAssertEqual(detailed.value()?.map(\.claimHolder), [nil])
        XCTAssertEqual(redis("GET", acme.result("k-5"))?.string, result("delivered_voip", "k-5"))

        let history = complete(loop) { CallHistoryStore(topology: store.topology).read(acme, callID: "k-1", window: windows, completion: $0) }
        XCTAssertEqual(history.value()?.detailExpired, true)
        XCTAssertEqual(history.value()?.compactOutcome, "delivered_alert")
        let stored = complete(loop) { CallIntake(topology: store.topology).result(acme, id: "k-1", namespace: .call, window: windows, completion: $0) }
        XCTAssertEqual(stored.value(), .detailExpired(firstOutcome: "delivered_alert"))
        let unknown = complete(loop) { CallIntake(topology: store.topology).result(acme, id: "k-3", namespace: .call, window: windows, completion: $0) }
        XCTAssertEqual(unknown.value(), CallIntake.StoredResult.none)

        _ = redis("HSET", acme.outcomes(buckets.bucket(atUnixSeconds: Clock.unixMs() / 1000)), "k-9", "?")
        let bad = complete(loop) { store.lookup(acme, [LookupQuery(eventId: "k-9", voipToken: nil, alertToken: nil, claim: true)],
                                               claimAs: "me", claimTTLMs: 60_000, completion: $0) }
        guard case .failure(.unexpectedReply(let why)) = bad else { return XCTFail("an unknown code was read as an outcome: \(bad)") }
        XCTAssertTrue(why.contains("unknown outcome code"), why)
    }

    func testLookupOfSeveralEventsIsOneMGETAnsweredInOrder() {
        _ = complete(loop) {
            store.finish(acme, [FinishRecord(entryID: nil, record: .init(eventId: "x-1", resultJSON: result("delivered_voip", "x-1")),
                                             invalidTokens: [InvalidToken(token: "aa09", channel: .voip, reason: "Unregistered", timestampMs: 99)])],
                         completion: $0)
        }
        _ = redis("SET", acme.cancelled("x-3"), "1", "EX", "60")
        let before = commandCalls("mget")
        let found = complete(loop) {
            store.lookup(acme, [LookupQuery(eventId: "x-1", voipToken: nil, alertToken: nil),
                                LookupQuery(eventId: "x-2", voipToken: "aa09", alertToken: "bb09"),
                                LookupQuery(eventId: "x-3", voipToken: nil, alertToken: "aa09")], completion: $0)
        }
        XCTAssertEqual(found.value(), [
            EventLookup(outcome: "delivered_voip", cancelled: false, voipInvalidSinceMs: nil, alertInvalidSinceMs: nil),
            EventLookup(outcome: nil, cancelled: false, voipInvalidSinceMs: 99, alertInvalidSinceMs: nil),
            EventLookup(outcome: nil, cancelled: true, voipInvalidSinceMs: nil, alertInvalidSinceMs: nil),
        ], "each answer belongs to its query, tokens per channel")
        XCTAssertEqual(commandCalls("mget") - before, 1, "three events, one MGET")
    }

    func testALookupClaimsAFreeCallAndNamesOtherHoldersWhoseLapsedClaimsAreTakenOverInAStepOfTheirOwn() {
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "live-1", ttlMs: 60_000, completion: $0) }.get())
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "dead-1", ttlMs: 1, completion: $0) }.get())
        _ = redis("SET", acme.result("held"), "in_flight:live-1", "PX", "60000")
        _ = redis("SET", acme.result("orphan"), "in_flight:dead-1", "PX", "60000")
        _ = redis("SET", acme.result("done"), result("delivered_voip", "done"), "EX", "60")
        let invalid = #"{"outcome":"dead_lettered","id":"retried","reason":"invalid_event: no to"}"#
        _ = redis("SET", acme.result("retried"), invalid, "EX", "60")
        _ = redis("SET", acme.result("mine"), "in_flight:me", "PX", "60000")
        pause(loop, ms: 20)
        let found = complete(loop) {
            store.lookup(acme, ["free", "held", "orphan", "done", "retried", "mine"].map {
                LookupQuery(eventId: $0, voipToken: nil, alertToken: nil, claim: true)
            }, claimAs: "me", claimTTLMs: 60_000, completion: $0)
        }.value()
        XCTAssertEqual(found?.map(\.claimHolder), ["me", "live-1", "dead-1", nil, "me", "me"],
                       "the free call claimed; the other holders named, none taken over by the lookup; the done call has none; "
                       + "an invalid event's result taken over; this consumer's own claim (a copy it routes) named")
        XCTAssertEqual(found?.map(\.outcome), [nil, nil, nil, "delivered_voip", nil, nil])
        XCTAssertEqual(found?.map(\.claimTakenNow), [true, false, false, false, true, false])
        XCTAssertEqual(redis("GET", acme.result("free"))?.string, "in_flight:me")
        XCTAssertEqual(redis("GET", acme.result("retried"))?.string, "in_flight:me")
        XCTAssertGreaterThan(redis("PTTL", acme.result("retried"))?.integer ?? 0, 59_000, "the claim's TTL, not the result's")
        XCTAssertEqual(redis("GET", acme.result("done"))?.string, result("delivered_voip", "done"), "a result stays")
        XCTAssertEqual(redis("GET", acme.result("orphan"))?.string, "in_flight:dead-1")
        let holders = complete(loop) {
            store.takeOverLapsedClaims(acme, [("held", "live-1"), ("orphan", "dead-1")], claimAs: "me", claimTTLMs: 60_000, completion: $0)
        }.value()
        XCTAssertEqual(holders, ["live-1", "me"], "only the lapsed consumer's claim is taken over")
        XCTAssertEqual(redis("GET", acme.result("orphan"))?.string, "in_flight:me")
        XCTAssertEqual(redis("GET", acme.result("held"))?.string, "in_flight:live-1")
    }

    private func commandCalls(_ command: String) -> Int {
        TestSupport.commandCalls(command, inInfo: redis("INFO", "commandstats")?.string ?? "")
    }

    // MARK: Take-over

    func testClaimAbandonedTakesEntriesOfALapsedConsumerAndNotOfALiveOne() throws {
        for i in 0..<4 { produce(acme, "call-\(i)") }
        let deadOnes = read([acme], consumer: "dead-1", count: 2)[acme]?.map(\.id) ?? []
        let liveOnes = read([acme], consumer: "live-1", count: 2)[acme]?.map(\.id) ?? []
        XCTAssertEqual(deadOnes.count, 2)
        XCTAssertEqual(liveOnes.count, 2)
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "live-1", ttlMs: 60_000, completion: $0) }.get())
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "dead-1", ttlMs: 1, completion: $0) }.get())
        var live: Set<String> = []
        for _ in 0..<100 {
            live = complete(loop) { store.consumerRegistry(completion: $0) }.value()?.live ?? []
            if !live.contains("dead-1") { break }
            pause(loop, ms: 5)
        }
        XCTAssertEqual(live, ["live-1"], "a lapsed heartbeat drops the consumer from the live set")
        live.insert("rescuer")

        let tooFresh = complete(loop) { store.claimAbandoned(acme, consumer: "rescuer", minIdleMs: 600_000, count: 10, liveConsumers: live, completion: $0) }
        XCTAssertEqual(tooFresh.value(), ClaimResult(entries: [], lostIDs: []), "entries idle less than minIdle stay")

        let claimed = complete(loop) { store.claimAbandoned(acme, consumer: "rescuer", minIdleMs: 0, count: 10, liveConsumers: live, completion: $0) }.value()
        XCTAssertEqual(claimed?.entries.map(\.entry.id), deadOnes, "exactly the dead consumer's entries are taken")
        XCTAssertEqual(claimed?.entries.map(\.deliveries), [2, 2], "each was delivered twice now")
        XCTAssertEqual(claimed?.entries.first?.entry.fields["event"], event("call-0"))
        XCTAssertEqual(claimed?.lostIDs, [])

        let owners = try XCTUnwrap(redis("XPENDING", acme.calls, "pushgw", "-", "+", "10")?.array).compactMap { $0.array?[1].string }
        XCTAssertEqual(Dictionary(grouping: owners, by: { $0 }).mapValues(\.count), ["rescuer": 2, "live-1": 2])
        let again = complete(loop) { store.claimAbandoned(acme, consumer: "rescuer", minIdleMs: 0, count: 10, liveConsumers: live, completion: $0) }
        XCTAssertEqual(again.value()?.entries.count, 0, "nothing of live consumers is taken")
    }

    func testAConsumerClaimsBackOnlyItsOwnEntriesIdleLongEnough() {
        for i in 0..<3 { produce(acme, "mine-\(i)") }
        let mine = read([acme], consumer: "me", count: 2)[acme]?.map(\.id) ?? []
        let theirs = read([acme], consumer: "other", count: 1)[acme]?.map(\.id) ?? []
        XCTAssertEqual(mine.count, 2)
        let live: Set<String> = ["me", "other"]
        let none = complete(loop) { store.claimAbandoned(acme, consumer: "me", minIdleMs: 0, count: 10, liveConsumers: live, completion: $0) }
        XCTAssertEqual(none.value()?.entries.count, 0, "without ownIdleMs a live consumer's entries, its own too, stay")
        let tooFresh = complete(loop) {
            store.claimAbandoned(acme, consumer: "me", minIdleMs: 0, count: 10, liveConsumers: live, ownIdleMs: 600_000, completion: $0)
        }
        XCTAssertEqual(tooFresh.value()?.entries.count, 0, "own entries younger than ownIdleMs stay (they may be in flight)")
        pause(loop, ms: 30)
        let back = complete(loop) {
            store.claimAbandoned(acme, consumer: "me", minIdleMs: 0, count: 10, liveConsumers: live, ownIdleMs: 20, completion: $0)
        }.value()
        XCTAssertEqual(back?.entries.map(\.entry.id), mine, "its own idle entries, and not the other live consumer's \(theirs)")
        XCTAssertEqual(back?.entries.map(\.deliveries), [2, 2], "without its run's length, claiming back counts as a delivery")
        pause(loop, ms: 30)
        let withinThisRun = complete(loop) {
            store.claimAbandoned(acme, consumer: "me", minIdleMs: 0, count: 10, liveConsumers: live, ownIdleMs: 20,
                                 thisRunMs: 600_000, completion: $0)
        }.value()
        XCTAssertEqual(withinThisRun?.entries.map(\.deliveries), [2, 2],
                       "entries this live process was given keep their count when it claims them back")
        XCTAssertEqual(pendingDeliveries(mine), [2, 2], "in Redis too")
    }

    /// Claiming back one's own entries after a failed step is not a delivery: Redis refusing
    /// writes for a while must not make calls poison. Only entries delivered before this
    /// process's run (a previous run under the same name, which died) count one more.
    func testClaimingBackOwnEntriesCountsOnlyThoseOfAPreviousRun() {
        for i in 0..<2 { produce(acme, "own-\(i)") }
        let old = read([acme], consumer: "me", count: 1)[acme]?.map(\.id) ?? []
        pause(loop, ms: 50)
        // This run starts now: `old` was given to the previous run, `recent` to this one.
        let runStart = Clock.monotonicMs()
        pause(loop, ms: 5)
        let recent = read([acme], consumer: "me", count: 1)[acme]?.map(\.id) ?? []
        XCTAssertEqual(old.count + recent.count, 2)
        for round in 1...3 {
            let thisRun = Clock.monotonicMs() - runStart
            let back = complete(loop) { store.claimOwn([acme], consumer: "me", count: 10, routing: [:], thisRunMs: thisRun, completion: $0) }
                .value()?[acme]
            let deliveries = Dictionary(uniqueKeysWithValues: (back?.entries ?? []).map { ($0.entry.id, $0.deliveries) })
            XCTAssertEqual(deliveries[recent[0]], 1, "round \(round): this run's entry keeps its one delivery")
            XCTAssertEqual(deliveries[old[0]], 2, "round \(round): the previous run's entry counted once, at the first claim "
                           + "(which made it this run's)")
        }
        XCTAssertEqual(pendingDeliveries(old + recent), [2, 1])
        let skipped = complete(loop) {
            store.claimOwn([acme], consumer: "me", count: 10, routing: [acme: recent], thisRunMs: Clock.monotonicMs() - runStart,
                           completion: $0)
        }.value()?[acme]
        XCTAssertEqual(skipped?.entries.map(\.entry.id), old, "entries it names as being routed are not claimed")
    }

    /// The delivery counts Redis keeps for `ids` (XPENDING), in that order.
    private func pendingDeliveries(_ ids: [String]) -> [Int64] {
        let items = redis("XPENDING", acme.calls, "pushgw", "-", "+", "100")?.array ?? []
        var byID: [String: Int64] = [:]
        for item in items { if let p = item.array, let id = p[0].string, let n = p[3].integer { byID[id] = n } }
        return ids.map { byID[$0] ?? -1 }
    }

    func testTheRegistryTellsLiveFromLapsedAndForgetsOnlyLapsedConsumers() {
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "live-1", ttlMs: 60_000, completion: $0) }.get())
        XCTAssertNoThrow(try complete(loop) { store.heartbeat(consumer: "dead-1", ttlMs: 1, completion: $0) }.get())
        pause(loop, ms: 20)
        let registry = complete(loop) { store.consumerRegistry(completion: $0) }.value()
        XCTAssertEqual(registry, ConsumerRegistry(live: ["live-1"], lapsed: ["dead-1"]))
        let forgotten = complete(loop) { store.forgetLapsed(["dead-1", "live-1", "unknown"], completion: $0) }.value()
        XCTAssertEqual(forgotten, 1, "only a consumer whose lease is still lapsed is forgotten")
        XCTAssertEqual(complete(loop) { store.consumerRegistry(completion: $0) }.value(), ConsumerRegistry(live: ["live-1"], lapsed: []))
    }

    func testClaimAbandonedReportsEntriesDeletedWhilePendingAsLost() {
        produce(acme, "gone")
        produce(acme, "kept")
        let ids = read([acme], consumer: "crashed")[acme]?.map(\.id) ?? []
        XCTAssertEqual(ids.count, 2)
        XCTAssertEqual(redis("XDEL", acme.calls, ids[0])?.integer, 1)
        let result = complete(loop) { store.claimAbandoned(acme, consumer: "rescuer", minIdleMs: 0, count: 10, liveConsumers: ["rescuer"], completion: $0) }.value()
        XCTAssertEqual(result?.entries.map(\.entry.id), [ids[1]])
        XCTAssertEqual(result?.lostIDs, [ids[0]], "Redis 7 drops deleted entries from the PEL on claim: that work is reported lost")
    }

    /// Redis answers `PING` while it refuses writes: the write probe sees the refusal, naming
    /// the node (`primary` on one Redis), and sees writes land again.
    func testTheWriteProbeSeesRedisRefusingWritesThatPINGDoesNot() throws {
        func probe() -> [(node: String, result: Result<Void, RedisError>)] {
            var answers: [(node: String, result: Result<Void, RedisError>)]?
            store.probeWrites { answers = $0 }
            drive(loop, waitingFor: "the write probe", until: { answers != nil })
            return answers ?? []
        }
        XCTAssertEqual(probe().map(\.node), ["primary"])
        XCTAssertNil(probe().first?.result.error)
        _ = try server.cli(["CONFIG", "SET", "min-replicas-to-write", "1"])
        defer { _ = try? server.cli(["CONFIG", "SET", "min-replicas-to-write", "0"]) }
        XCTAssertNotNil(complete(loop) { store.ping(completion: $0) }.value(), "PING is answered")
        XCTAssertEqual(probe().first?.result.error?.writeRefusal, .noReplicas)
        _ = try server.cli(["CONFIG", "SET", "min-replicas-to-write", "0"])
        XCTAssertNil(probe().first?.result.error, "and writes land again")
    }

    func testBacklogCountsUnfinishedAndInFlightEntries() {
        for i in 0..<3 { produce(gamma, "c\(i)") }
        _ = read([gamma], count: 2)
        XCTAssertEqual(complete(loop) { store.backlog(gamma, completion: $0) }.value(), Backlog(length: 3, pending: 2))
    }

    // MARK: Other languages read what pushgw writes

    func testPythonRedisAndRedisCliReadTheContractStreams() throws {
        produce(acme, "py-1")
        guard let entry = read([acme])[acme]?.first else { return XCTFail("no entry read") }
        _ = complete(loop) {
            store.finish(acme, entryID: entry.id, record: .init(eventId: "py-1", resultJSON: result("delivered_alert", "py-1")),
                         invalidTokens: [InvalidToken(token: "aa01", channel: .voip, reason: "ExpiredToken", timestampMs: 5)], completion: $0)
        }
        _ = complete(loop) {
            store.deadLetter(acme, entryID: nil, deadLetter: DeadLetterEntry(event: "{}", reason: "invalid_event", attemptsJSON: "[]", firstFailureMs: 7, lastFailureMs: 8),
                             record: .init(eventId: nil, keying: .provisional, resultJSON: #"{"outcome":"dead_lettered"}"#), completion: $0)
        }
        let script = """
        import json, redis, sys
        r = redis.Redis(port=int(sys.argv[1]), decode_responses=True)
        out = {name: [fields for _, fields in r.xrange('pushgw:{acme}:' + name)] for name in ('results', 'feedback', 'dead')}
        print(json.dumps(out))
        """
        let (status, stdout, stderr) = try runCommand("python3", ["-c", script, String(server.port)])
        XCTAssertEqual(status, 0, stderr)
        let decoded = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: [[String: String]]]
        XCTAssertEqual(decoded?["results"]?.first, ["result": result("delivered_alert", "py-1")])
        XCTAssertEqual(decoded?["feedback"], [["token": "aa01", "channel": "voip", "reason": "ExpiredToken", "timestamp": "5"]],
                       "feedback fields exactly as docs/protocol.md")
        XCTAssertEqual(decoded?["dead"]?.first.map { Set($0.keys) },
                       ["event", "reason", "attempts", "first_failure_ms", "last_failure_ms", "replays", "app"])
        XCTAssertEqual(try server.cli(["XLEN", "pushgw:{acme}:results"]), "2\n")
        XCTAssertEqual(try server.cli(["GET", "pushgw:{acme}:result:py-1"]), result("delivered_alert", "py-1") + "\n",
                       "the result found by id, at the key docs/protocol.md names")
    }
}

/// `CallStoreTests` on a one-node Redis Cluster: every script and command of one app, and every
/// script of the consumer registry, touches one slot (no `CROSSSLOT`).
final class CallStoreOnClusterNodeTests: CallStoreTests {
    override class var onClusterNode: Bool { true }

    /// One `XREADGROUP` over several apps' streams spans slots, so on a cluster pushgw's store
    /// reads each app's stream on its own (`ClusterStreamReads`, through `RedisCluster`): what
    /// the router gets is still every app's entries, `count` at most per app and read.
    override func testReadNewReadsEveryAppInOneCallWithACountPerApp() throws {
        let node = try XCTUnwrap(clusterNode)
        let cluster = RedisCluster(loop: loop, config: .init(seeds: node.seeds, connection: connection))
        let clusterStore = CallStore(config: store.config, apps: [acme, beta, gamma], topology: .cluster(cluster), readBlockMs: 1_000)
        clusterStore.start()
        defer { clusterStore.close() }
        for i in 0..<3 { produce(acme, "a\(i)") }
        produce(beta, "b0")
        for i in 0..<2 { produce(gamma, "g\(i)") }
        // Each app's read answers on its own: a read brings the apps whose entries came first.
        var batches: [AppKeys: [[String?]]] = [:]
        for _ in 0..<10 where batches.values.joined().joined().count < 6 {
            let got = complete(loop) { clusterStore.readNew(apps: [acme, beta, gamma], consumer: "c1", count: 2, blockMs: 1_000, completion: $0) }
            for (app, entries) in try got.get() { batches[app, default: []].append(entries.map { $0.fields["event"] }) }
        }
        XCTAssertEqual(batches[acme], [[event("a0"), event("a1")], [event("a2")]], "COUNT applies per app, in order")
        XCTAssertEqual(batches[beta], [[event("b0")]])
        XCTAssertEqual(batches[gamma], [[event("g0"), event("g1")]])
        let idle = complete(loop) { clusterStore.readNew(apps: [acme, beta, gamma], consumer: "c1", count: 2, blockMs: 50, completion: $0) }
        XCTAssertEqual(try idle.get(), [:], "BLOCK timing out gives no entries")
        XCTAssertFalse(try server.cli(["INFO", "errorstats"]).contains("CROSSSLOT"), "no command of the cluster reads spanned slots")
        // What the single-Redis read would send instead is refused here.
        let oneRead = complete(loop) { store.readNew(apps: [acme, beta, gamma], consumer: "c1", count: 2, blockMs: nil, completion: $0) }
        guard case .failure(let refusal) = oneRead else { return XCTFail("one XREADGROUP over three slots was served") }
        XCTAssertEqual(refusal.serverCode, "CROSSSLOT")
    }
    override func testReadNewSurvivesARestartWithoutNOGROUP() throws { try super.testReadNewSurvivesARestartWithoutNOGROUP() }
    override func testAReadThatBlocksHoldsUpNoOtherCommand() throws { try super.testAReadThatBlocksHoldsUpNoOtherCommand() }
    override func testEntriesWrittenBeforeTheGroupExistedAreDelivered() { super.testEntriesWrittenBeforeTheGroupExistedAreDelivered() }
    override func testFinishRecordsOnceAndAcknowledgesAndDeletesTheEntry() throws { try super.testFinishRecordsOnceAndAcknowledgesAndDeletesTheEntry() }
    override func testFinishOfABatchRecordsEachEventOnceAndAcknowledgesTheirEntriesInOneStep() throws { try super.testFinishOfABatchRecordsEachEventOnceAndAcknowledgesTheirEntriesInOneStep() }
    override func testFinishWritesADevicesDeadLettersWithTheRecordOnlyOnce() throws { try super.testFinishWritesADevicesDeadLettersWithTheRecordOnlyOnce() }
    override func testDeadLetterWritesTheDeadEntryAndTheResultAndAcknowledges() { super.testDeadLetterWritesTheDeadEntryAndTheResultAndAcknowledges() }
    override func testResultsOfAnAppWithWebhooksAreQueuedForDeliveryInTheSameStep() throws {
        try super.testResultsOfAnAppWithWebhooksAreQueuedForDeliveryInTheSameStep()
    }
    override func testAnEntryRecordedAgainAfterItsOwnResultGetsNoSecondResult() { super.testAnEntryRecordedAgainAfterItsOwnResultGetsNoSecondResult() }
    override func testAnInvalidEventsResultDoesNotClaimItsIdAndNeverReplacesAnOutcome() { super.testAnInvalidEventsResultDoesNotClaimItsIdAndNeverReplacesAnOutcome() }
    override func testLookupReportsOutcomeCancellationAndKnownInvalidTokensInOneRoundTrip() { super.testLookupReportsOutcomeCancellationAndKnownInvalidTokensInOneRoundTrip() }
    override func testLookupOfSeveralEventsIsOneMGETAnsweredInOrder() { super.testLookupOfSeveralEventsIsOneMGETAnsweredInOrder() }
    override func testACallsCompactRecordLandsInItsBucketAndAnswersForTheWindowOnceItsDetailExpired() throws {
        try super.testACallsCompactRecordLandsInItsBucketAndAnswersForTheWindowOnceItsDetailExpired()
    }
    override func testALookupClaimsAFreeCallAndNamesOtherHoldersWhoseLapsedClaimsAreTakenOverInAStepOfTheirOwn() {
        super.testALookupClaimsAFreeCallAndNamesOtherHoldersWhoseLapsedClaimsAreTakenOverInAStepOfTheirOwn()
    }
    override func testClaimAbandonedTakesEntriesOfALapsedConsumerAndNotOfALiveOne() throws { try super.testClaimAbandonedTakesEntriesOfALapsedConsumerAndNotOfALiveOne() }
    override func testAConsumerClaimsBackOnlyItsOwnEntriesIdleLongEnough() { super.testAConsumerClaimsBackOnlyItsOwnEntriesIdleLongEnough() }
    override func testClaimingBackOwnEntriesCountsOnlyThoseOfAPreviousRun() { super.testClaimingBackOwnEntriesCountsOnlyThoseOfAPreviousRun() }
    override func testTheRegistryTellsLiveFromLapsedAndForgetsOnlyLapsedConsumers() { super.testTheRegistryTellsLiveFromLapsedAndForgetsOnlyLapsedConsumers() }
    override func testClaimAbandonedReportsEntriesDeletedWhilePendingAsLost() { super.testClaimAbandonedReportsEntriesDeletedWhilePendingAsLost() }
    override func testBacklogCountsUnfinishedAndInFlightEntries() { super.testBacklogCountsUnfinishedAndInFlightEntries() }
    override func testTheWriteProbeSeesRedisRefusingWritesThatPINGDoesNot() throws { try super.testTheWriteProbeSeesRedisRefusingWritesThatPINGDoesNot() }
    override func testPythonRedisAndRedisCliReadTheContractStreams() throws { try super.testPythonRedisAndRedisCliReadTheContractStreams() }

    /// A cluster node answers `PING` while the cluster refuses every keyed command (a slot
    /// without a primary): the probe behind `/readyz` must fail then, on a cluster store.
    func testTheProbeOfAClusterStoreFailsWhileTheClusterIsDown() throws {
        try withClusterStore { clusterStore, _, node in
            XCTAssertNotNil(complete(loop) { clusterStore.ping(completion: $0) }.value())
            XCTAssertNotNil(complete(loop) { store.ping(completion: $0) }.value(), "the single-Redis probe, a PING")
            let slot = String(HashSlot(key: "unowned").value)
            _ = try server.cli(["CLUSTER", "DELSLOTS", slot])
            try waitUntil("the cluster to be down") { try server.cli(["CLUSTER", "INFO"]).contains("cluster_state:fail") }
            XCTAssertEqual(redis("PING"), .status("PONG"), "a PING is answered all the same")
            let down = complete(loop) { clusterStore.ping(completion: $0) }
            guard case .failure(let error) = down else { return XCTFail("the probe succeeded while the cluster refuses commands") }
            XCTAssertEqual(error.serverCode, "CLUSTERDOWN")
            _ = try server.cli(["CLUSTER", "ADDSLOTS", slot])
            try node.waitUntilHealthy()
            XCTAssertNotNil(complete(loop) { clusterStore.ping(completion: $0) }.value(), "up again once every slot is served")
        }
    }

    /// Runs `body` with a started store on this class's cluster node (and the cluster client),
    /// closed afterwards.
    private func withClusterStore(_ body: (CallStore, RedisCluster, LocalRedisCluster) throws -> Void) throws {
        let node = try XCTUnwrap(clusterNode)
        let cluster = RedisCluster(loop: loop, config: .init(seeds: node.seeds, connection: connection))
        let clusterStore = CallStore(config: store.config, apps: [acme], topology: .cluster(cluster))
        clusterStore.start()
        defer { clusterStore.close() }
        try body(clusterStore, cluster, node)
    }

    /// On a cluster the write probe goes to every primary, each named by its address, with a
    /// key in a slot it owns (a one-node cluster here: one primary with every slot).
    func testTheWriteProbeOfAClusterStoreNamesEachPrimary() throws {
        try withClusterStore { clusterStore, cluster, _ in
            XCTAssertNotNil(complete(loop) { clusterStore.ping(completion: $0) }.value(), "the slot map is read")
            var answers: [(node: String, result: Result<Void, RedisError>)]?
            clusterStore.probeWrites { answers = $0 }
            drive(loop, waitingFor: "the write probe", until: { answers != nil })
            XCTAssertEqual(answers?.map(\.node), cluster.map.primaries.map(\.description))
            XCTAssertNil(answers?.first?.result.error)
            _ = try server.cli(["CONFIG", "SET", "maxmemory", "1"])
            defer { _ = try? server.cli(["CONFIG", "SET", "maxmemory", "0"]) }
            answers = nil
            clusterStore.probeWrites { answers = $0 }
            drive(loop, waitingFor: "the write probe", until: { answers != nil })
            XCTAssertEqual(answers?.first?.result.error?.writeRefusal, .outOfMemory)
        }
    }

    func testEveryTestRunsOnTheClusterNode() throws {
        XCTAssertEqual(try testsMissingFromVariants(of: "CallStoreTests", ["CallStoreOnClusterNodeTests"], in: "Tests/CallStorageTests/CallStoreTests.swift"), [])
    }
}
