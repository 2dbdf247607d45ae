import EventLoop
import Foundation
import Routing

/// `pushgw-bench decode`: the router's per-event CPU outside the network, in a loop with no I/O.
/// For `--events` iterations it decodes a call event (`CallEvent.decode`, which also serializes
/// both payloads) and writes the outcome record the router stores for it (`jsonString`), and
/// prints nanoseconds per event for each half. Two event shapes: `e2e` (the event of
/// `pushgw-bench e2e`) and `design` (docs/protocol.md's example: both tokens, deadline, sandbox).
/// Run it under `valgrind --tool=callgrind` for instruction counts.
enum DecodeBench {
    static let e2eEvent = #"{"v":1,"id":"call-000123","type":"incoming_call","voip_token":"\#(String(repeating: "ab", count: 32))","voip":{"caller":"+15551234567","callerName":"Alice Johnson","sessionId":"abc-123-def","hasVideo":false}}"#
    static let designEvent = #"{ "v": 1, "id": "call-7f3a9c", "type": "incoming_call", "voip_token": "\#(String(repeating: "ab", count: 32))", "alert_token": "\#(String(repeating: "cd", count: 32))", "sandbox": false, "deadline": 1764412345000, "voip": { "caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": false }, "alert": { "title": "Missed call", "body": "Alice Johnson tried to call you" } }"#

    static func run(_ o: Options) {
        let events = o.int("events", 100_000)
        let shape = o.string("shape", "e2e")
        let text: String
        switch shape {
        case "e2e": text = e2eEvent
        case "design": text = designEvent
        default: BenchCommand.usage()
        }
        let bytes = Array(text.utf8)
        let policy = AppRoutingPolicy(appID: "bench0", bundleID: "com.example.app")
        let entry: Int64 = 1_764_412_300_000
        var checksum = 0
        // Warm-up, and the decoded event the record half uses.
        var event: CallEvent
        do {
            event = try CallEvent.decode(bytes, entryTimeMs: entry, policy: policy)
        } catch {
            FileHandle.standardError.write(Data("pushgw-bench: the bench event is invalid: \(error)\n".utf8))
            exit(1)
        }
        let decodeStart = Clock.monotonicUs()
        for i in 0..<events {
            do {
                event = try CallEvent.decode(bytes, entryTimeMs: entry + Int64(i & 1), policy: policy)
                checksum &+= event.voipPayload.count &+ event.alertPayload.count
            } catch {
                checksum &+= 1
            }
        }
        let decodeUs = Clock.monotonicUs() - decodeStart
        let recordStart = Clock.monotonicUs()
        for i in 0..<events {
            let attempt = AttemptRecord(sentAtMs: entry + 12, channel: .voip, status: 200, reason: nil, error: nil,
                                        apnsID: "8A6B4C2D-1E0F-4A3B-9C8D-7E6F5A4B3C2D")
            let record = OutcomeRecord(outcome: .deliveredVoip, id: event.id, type: event.kind, app: policy.appID,
                                       channel: .voip, apnsID: attempt.apnsID, latencyMs: Int64(i & 63),
                                       attempts: [attempt])
            checksum &+= record.jsonString.utf8.count
        }
        let recordUs = Clock.monotonicUs() - recordStart
        func ns(_ us: Int64) -> String { String(format: "%.0f", Double(us) * 1000 / Double(max(events, 1))) }
        print(#"{"shape":"\#(shape)","events":\#(events),"decode_ns":\#(ns(decodeUs)),"record_ns":\#(ns(recordUs)),"total_ns":\#(ns(decodeUs + recordUs)),"checksum":\#(checksum)}"#)
    }
}
