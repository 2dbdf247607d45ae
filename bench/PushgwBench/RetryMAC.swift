import EventLoop
import Foundation
import CallStorage
import Routing

/// `pushgw-bench retry-mac`: what signing and checking the internal `retry` field costs
/// (`RetrySigner`, HMAC-SHA256 through OpenSSL's EVP_MAC), beside decoding the snapshot it
/// protects (`WaitingCall.decode`), per retry, in a loop with no I/O. A retry pays one signature
/// when it is scheduled and one check when it comes back; a call's first push pays neither.
enum RetryMACBench {
    static func run(_ o: Options) {
        let retries = o.int("retries", 200_000)
        let event = Array(DecodeBench.designEvent.utf8)
        let t: Int64 = 1_764_412_345_000
        let snapshot = WaitingCall(callID: "call-7f3a9c", stage: .voip(attemptsMade: 1), dueAtMs: t + 800, deadlineMs: t + 30_000,
                                   entryTimeMs: t, entryID: "1764412345000-0", alertUsable: true,
                                   attempts: [AttemptRecord(sentAtMs: t + 10, channel: .voip, status: 503, reason: "ServiceUnavailable",
                                                            error: nil, apnsID: "8A6B4C2D-1E0F-4A3B-9C8D-7E6F5A4B3C2D")],
                                   lastAnswerAtMs: t + 40, firstFailureAtMs: t + 40)
        let state = Array(snapshot.json().utf8)
        let signer = RetrySigner()
        var checksum = 0
        var mac = Array(signer.sign(app: "bench0", event: event, state: state).utf8)
        let signStart = Clock.monotonicUs()
        for i in 0..<retries {
            mac = Array(signer.sign(app: i & 1 == 0 ? "bench0" : "bench1", event: event, state: state).utf8)
            checksum &+= Int(mac[0])
        }
        let signUs = Clock.monotonicUs() - signStart
        mac = Array(signer.sign(app: "bench0", event: event, state: state).utf8)
        let verifyStart = Clock.monotonicUs()
        for _ in 0..<retries where signer.verifies(mac, app: "bench0", event: event, state: state) { checksum &+= 1 }
        let verifyUs = Clock.monotonicUs() - verifyStart
        let decodeStart = Clock.monotonicUs()
        for _ in 0..<retries {
            if let back = try? WaitingCall.decode(state) { checksum &+= back.attempts.count }
        }
        let decodeUs = Clock.monotonicUs() - decodeStart
        func ns(_ us: Int64) -> String { String(format: "%.0f", Double(us) * 1000 / Double(max(retries, 1))) }
        print(#"{"retries":\#(retries),"event_bytes":\#(event.count),"state_bytes":\#(state.count),"sign_ns":\#(ns(signUs)),"verify_ns":\#(ns(verifyUs)),"decode_ns":\#(ns(decodeUs)),"checksum":\#(checksum)}"#)
    }
}
