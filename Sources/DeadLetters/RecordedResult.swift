import Foundation
import JSONOutput

/// A call's result as the router stored it under its result key (docs/protocol.md, *Results*),
/// read back for operators (`pushgw calls show`). Built from untrusted text: a field of the
/// wrong type reads as absent, and what is not a JSON object is no result.
public struct RecordedResult: Sendable {
    /// `delivered_voip`, `delivered_alert`, `undeliverable`, `expired`, `cancelled`, `dead_lettered`.
    public let outcome: String
    /// Why the alert fallback was sent (`delivered_alert`).
    public let cause: String?
    /// Why it was dead-lettered (`dead_lettered`).
    public let reason: String?
    /// What delivered, and APNs' id of that push.
    public let channel: String?
    public let apnsID: String?
    /// The calls entry the result answers (the producer's XADD reply).
    public let entry: String?
    /// From the entry's time to APNs' last answer, ms.
    public let latencyMs: Int64?
    /// The environment that delivered when it was not the call's.
    public let environmentMismatch: String?
    /// For a cancel's own result: the call's outcome when the cancel came too late.
    public let cancelledAfter: String?
    /// Every push sent, in order (round 1; tokens as the attempts carry them, last 8 characters).
    public let attempts: [DeadLetterAttempt]
    /// The text as stored.
    public let json: String

    /// Nil when `json` is not a JSON object with a string `outcome`.
    public init?(json: String) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [String: Any],
              let outcome = JSONRead.string(object["outcome"]) else { return nil }
        self.outcome = outcome
        cause = JSONRead.string(object["cause"])
        reason = JSONRead.string(object["reason"])
        channel = JSONRead.string(object["channel"])
        apnsID = JSONRead.string(object["apns_id"])
        entry = JSONRead.string(object["entry"])
        latencyMs = JSONRead.int(object["latency_ms"])
        environmentMismatch = JSONRead.string(object["environment_mismatch"])
        cancelledAfter = JSONRead.string(object["cancelled_after"])
        attempts = DeadLetterAttempt.list(object["attempts"] as? [Any] ?? [], voipToken: nil, alertToken: nil, round: 1)
        self.json = json
    }
}

extension DeadLetterAttempt {
    /// The attempts of a record's `attempts` array (`t, channel, token, status, reason, error,
    /// apns_id`); an attempt without its own token gets the event's token of its channel.
    /// Tokens are kept as their last 8 characters. Items that are not objects are skipped.
    static func list(_ items: [Any], voipToken: String?, alertToken: String?, round: Int) -> [DeadLetterAttempt] {
        items.compactMap { item -> DeadLetterAttempt? in
            guard let a = item as? [String: Any] else { return nil }
            let channel = JSONRead.string(a["channel"])
            let token = JSONRead.string(a["token"]) ?? (channel == "voip" ? voipToken : channel == "alert" ? alertToken : nil)
            return DeadLetterAttempt(timeMs: JSONRead.int(a["t"]), channel: channel, token: token.map { String($0.suffix(8)) },
                                     status: JSONRead.int(a["status"]).map { Int($0) }, reason: JSONRead.string(a["reason"]),
                                     error: JSONRead.string(a["error"]), apnsID: JSONRead.string(a["apns_id"]), round: round)
        }
    }

    /// `{"t","channel","token","status","reason","error","apns_id"}`, as `dead show --json` writes each.
    public var json: OrderedJSON { json(withRound: false) }
}
