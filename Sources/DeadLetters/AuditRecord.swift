/// What an operator did to dead letters, for the logs and the audit stream
/// (`GatewayKeys.audit`): when, which verb, who, which entries or how many, with which filters.
/// Plain data; the CLI writes it.
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
    public var options: [(String, JSONValue)]

    /// At most this many ids go into the stream's `ids` field (the count is always exact).
    public static let maxIDs = 100

    public init(timeMs: Int64, verb: String, user: String, sudoUser: String? = nil, ids: [String], requested: Int,
                done: Int, filter: DeadLetterFilter?, options: [(String, JSONValue)] = []) {
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

    private var shownIDs: JSONValue {
        var list = ids.prefix(AuditRecord.maxIDs).map { JSONValue.string($0) }
        if ids.count > AuditRecord.maxIDs { list.append(.string("… \(ids.count - AuditRecord.maxIDs) more")) }
        return .array(list)
    }

    /// The record as one JSON object (the log line's fields).
    public var json: JSONValue {
        var fields: [(String, JSONValue)] = [("time_ms", .int(timeMs)), ("verb", .string(verb)), ("user", .string(user))]
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
                   ("filters", (filter?.json ?? .null).text), ("options", JSONValue.object(options).text)]
        return fields
    }
}
