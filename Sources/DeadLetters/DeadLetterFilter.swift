import JSONOutput
import RedisClient

/// Which dead letters an operator's command applies to. Bulk actions (`replay --all`,
/// `purge --all`) take exactly the entries `list` shows with the same filters (the lesson of
/// sidekiq#3243: a bulk action must honour the filter on screen).
public struct DeadLetterFilter: Equatable, Sendable {
    /// Apps to look at; nil for every configured app.
    public var apps: [String]?
    /// Matches a reason equal to it or starting with it (`apns_credentials` matches
    /// `apns_credentials: InvalidProviderToken`).
    public var reason: String?
    /// The call id (`id` of the event), exactly.
    public var callID: String?
    /// Only entries dead at or after this unix ms.
    public var sinceMs: Int64?
    /// Only entries dead before this unix ms.
    public var beforeMs: Int64?

    public init(apps: [String]? = nil, reason: String? = nil, callID: String? = nil, sinceMs: Int64? = nil,
                beforeMs: Int64? = nil) {
        self.apps = apps
        self.reason = reason
        self.callID = callID
        self.sinceMs = sinceMs
        self.beforeMs = beforeMs
    }

    /// The XRANGE bounds the time filters give (`-`/`+` when unbounded).
    public var rangeStart: String { sinceMs.map { String(max(0, $0)) + "-0" } ?? "-" }
    public var rangeEnd: String {
        guard let beforeMs else { return "+" }
        return beforeMs <= 0 ? "0-0" : "(" + String(beforeMs) + "-0"
    }

    /// Whether the time filters leave nothing to find.
    public var isEmptyRange: Bool {
        if let beforeMs, beforeMs <= 0 { return true }
        if let sinceMs, let beforeMs, sinceMs >= beforeMs { return true }
        return false
    }

    /// Whether `record` passes every filter.
    public func matches(_ record: DeadLetterRecord) -> Bool {
        matches(app: record.app, deadAtMs: record.deadAtMs, reason: record.reason, callID: record.callID)
    }

    /// Whether a dead letter with these facts passes every filter.
    public func matches(app: String, deadAtMs: Int64, reason recordReason: String, callID recordCallID: String?) -> Bool {
        if let apps, !apps.contains(app) { return false }
        if let reason, !(recordReason == reason || recordReason.hasPrefix(reason)) { return false }
        if let callID, recordCallID != callID { return false }
        if let sinceMs, deadAtMs < sinceMs { return false }
        if let beforeMs, deadAtMs >= beforeMs { return false }
        return true
    }

    /// Whether dead entry `entry` of `app` passes, reading the event only when it must (a call-id
    /// filter, or an entry without its own `reason` field): the console filters a page of
    /// entries without parsing the events it does not show.
    public func matches(_ entry: StreamEntry, app: String) -> Bool {
        let fields = entry.fields
        guard callID == nil, let reason = fields["reason"] else {
            return matches(DeadLetterRecord(entry: entry, app: app, ledger: nil))
        }
        return matches(app: fields["app"] ?? app, deadAtMs: DeadLetterRecord.timeMs(ofID: entry.id) ?? 0, reason: reason, callID: nil)
    }

    /// The filters as an ordered JSON object (for audit records), absent ones left out.
    public var json: OrderedJSON {
        var fields: [(String, OrderedJSON)] = []
        if let apps { fields.append(("app", .array(apps.map { .string($0) }))) }
        if let reason { fields.append(("reason", .string(reason))) }
        if let callID { fields.append(("call", .string(callID))) }
        if let sinceMs { fields.append(("since_ms", .int(sinceMs))) }
        if let beforeMs { fields.append(("before_ms", .int(beforeMs))) }
        return .object(fields)
    }
}
