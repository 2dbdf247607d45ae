import Foundation
import CallStorage
import JSONOutput
import RedisClient

/// What an operator did to dead letters, for the logs and the audit stream
/// (`GatewayKeys.audit`): when, which verb, who, which entries or how many, with which filters.
/// Plain data; `DeadLetterOperations.audit` writes it for the command line and the console.
public struct AuditRecord: Sendable {
    /// Unix ms of the action's end.
    public var timeMs: Int64
    /// The verb: `replay` or `purge`.
    public var verb: String
    /// Who: `$USER` (and `$SUDO_USER` when set, as `sudo_user`).
    public var user: String
    public var sudoUser: String?
    /// The entries acted on, as `app/id`.
    public var ids: [String]
    /// How many entries were asked for, and how many the action changed.
    public var requested: Int
    public var done: Int
    /// The filters of a bulk action (`--all`); nil when ids were named.
    public var filter: DeadLetterFilter?
    /// Other options worth keeping (`rate`, …), in order.
    public var options: [(String, OrderedJSON)]

    /// At most this many ids go into the stream's `ids` field (the count is always exact).
    public static let maxIDs = 100

    public init(timeMs: Int64, verb: String, user: String, sudoUser: String? = nil, ids: [String], requested: Int,
                done: Int, filter: DeadLetterFilter?, options: [(String, OrderedJSON)] = []) {
        self.timeMs = timeMs
        self.verb = verb
        self.user = user
        self.sudoUser = sudoUser
        self.ids = ids
        self.requested = requested
        self.done = done
        self.filter = filter
        self.options = options
    }

    private var shownIDs: OrderedJSON {
        var list = ids.prefix(AuditRecord.maxIDs).map { OrderedJSON.string($0) }
        if ids.count > AuditRecord.maxIDs { list.append(.string("… \(ids.count - AuditRecord.maxIDs) more")) }
        return .array(list)
    }

    /// The record as one JSON object (the log line's fields).
    public var json: OrderedJSON {
        var fields: [(String, OrderedJSON)] = [("time_ms", .int(timeMs)), ("verb", .string(verb)), ("user", .string(user))]
        if let sudoUser { fields.append(("sudo_user", .string(sudoUser))) }
        fields += [("requested", .int(requested)), ("done", .int(done)), ("ids", shownIDs),
                   ("filters", filter?.json ?? .null), ("options", .object(options))]
        return .object(fields)
    }

    /// The audit stream entry's fields, in order.
    public var streamFields: [(String, String)] {
        var fields = [("time_ms", String(timeMs)), ("verb", verb), ("user", user)]
        if let sudoUser { fields.append(("sudo_user", sudoUser)) }
        fields += [("requested", String(requested)), ("done", String(done)), ("ids", shownIDs.text),
                   ("filters", (filter?.json ?? .null).text), ("options", OrderedJSON.object(options).text)]
        return fields
    }
}

/// One record of the audit stream read back (`DeadLetterOperations.auditTrail`): the fields
/// `AuditRecord.streamFields` wrote, as text. Plain data.
public struct AuditEntry: Equatable, Sendable {
    /// The stream entry id.
    public let id: String
    /// Unix ms of the action's end (the `time_ms` field; else the entry id's time).
    public let timeMs: Int64
    public let verb: String
    public let user: String
    public let sudoUser: String?
    public let requested: Int
    public let done: Int
    /// The `app/id` list as written (at most `AuditRecord.maxIDs`, then a "… N more" item).
    public let ids: [String]
    /// The filters and options as their JSON text (`null` / `{}` when absent).
    public let filters: String
    public let options: String

    public init(entry: StreamEntry) {
        let f = entry.fields
        id = entry.id
        timeMs = f["time_ms"].flatMap { Int64($0) } ?? entry.timeMs ?? 0
        verb = f["verb"] ?? "?"
        user = f["user"] ?? "?"
        sudoUser = f["sudo_user"]
        requested = f["requested"].flatMap { Int($0) } ?? 0
        done = f["done"].flatMap { Int($0) } ?? 0
        let list = f["ids"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) } as? [Any] ?? []
        ids = list.compactMap { $0 as? String }
        filters = f["filters"] ?? "null"
        options = f["options"] ?? "{}"
    }
}
