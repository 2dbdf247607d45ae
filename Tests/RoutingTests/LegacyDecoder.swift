import APNs
import Foundation
@testable import Routing

// FROZEN: this file must not change, not even to follow a new rule. An oracle edited
// together with the code it checks can no longer catch a change to that code. When a decoding
// rule changes on purpose, JSONEquivalenceTests names the rule and leaves it out of the
// comparison (`underTheCurrentRules`), and a direct test in CallEventTests checks the new rule.
//
// The decoding and JSON writing of Routing as they were before the JSONSerialization-free
// rewrite (commit ba913d6), kept verbatim (names prefixed Legacy) as the oracle of the
// differential tests in JSONEquivalenceTests: same events, same CallEvent or same error.

enum LegacyDecoder {
    static func decode(_ bytes: [UInt8], entryTimeMs: Int64,
                       policy: AppRoutingPolicy) throws(InvalidEvent) -> CallEvent {
        guard bytes.count <= CallEvent.maxEventBytes else {
            throw InvalidEvent(field: "event", problem: "\(bytes.count) bytes, over the \(CallEvent.maxEventBytes)-byte limit")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        } catch {
            let ns = error as NSError
            let detail = (ns.userInfo[NSDebugDescriptionErrorKey] as? String) ?? ns.localizedDescription
            throw InvalidEvent(field: nil, problem: "not JSON: \(bytes.isEmpty ? "empty" : detail)")
        }
        guard let root = parsed as? [String: Any] else {
            throw InvalidEvent(field: "event", problem: "expected a JSON object, got \(LegacyJSONKind.of(parsed))")
        }
        var fields = LegacyFields(root: root)
        return try fields.event(entryTimeMs: entryTimeMs, policy: policy)
    }

    /// The record as compact JSON, the same bytes for the same record.
    static func json(_ record: OutcomeRecord) -> [UInt8] {
        var w = LegacyJSONWriter()
        w.object { o in
            o.string("outcome", record.outcome.rawValue)
            o.string("id", record.id)
            o.string("type", record.type?.rawValue)
            o.string("app", record.app)
            o.string("channel", record.channel?.rawValue)
            o.string("apns_id", record.apnsID)
            o.string("cause", record.cause?.rawValue)
            o.string("reason", record.reason)
            o.int("latency_ms", record.latencyMs)
            o.array("attempts", record.attempts) { w, a in
                w.object { e in
                    e.int("t", a.sentAtMs)
                    e.string("channel", a.channel.rawValue)
                    e.int("status", a.status.map(Int64.init))
                    e.string("reason", a.reason)
                    e.string("error", a.error)
                    e.string("apns_id", a.apnsID)
                }
            }
        }
        return w.bytes
    }

    /// Title and body with the placeholders filled from `callerName` and `caller`.
    static func render(_ t: FallbackTemplate, callerName: String?, caller: String?) -> (title: String, body: String) {
        func usable(_ s: String?) -> String? {
            guard let s, !s.isEmpty else { return nil }
            return String(s.prefix(FallbackTemplate.maxFilledCharacters))
        }
        let name = usable(callerName) ?? usable(caller) ?? t.unknownCaller
        let number = usable(caller) ?? usable(callerName) ?? t.unknownCaller
        return (LegacyDecoder.fill(t.title, name: name, number: number),
                LegacyDecoder.fill(t.body, name: name, number: number))
    }

    /// One pass over `s`, so a caller name that itself contains `{caller}` is left as it is.
    private static func fill(_ s: String, name: String, number: String) -> String {
        var out = ""
        var rest = Substring(s)
        while let brace = rest.firstIndex(of: "{") {
            out += rest[..<brace]
            let tail = rest[brace...]
            if tail.hasPrefix("{callerName}") {
                out += name
                rest = tail.dropFirst("{callerName}".count)
            } else if tail.hasPrefix("{caller}") {
                out += number
                rest = tail.dropFirst("{caller}".count)
            } else {
                out += "{"
                rest = tail.dropFirst()
            }
        }
        return out + rest
    }
}

/// The JSON type of a parsed value, for messages ("expected a string, got number").
enum LegacyJSONKind: String {
    case string, boolean, number, object, array, null

    static func of(_ v: Any) -> LegacyJSONKind {
        switch v {
        case is String: return .string
        case let n as NSNumber:
            if case .boolean = LegacyJSONNumber(n) { return .boolean }
            return .number
        case is [String: Any]: return .object
        case is [Any]: return .array
        default: return .null
        }
    }
}

/// The field-by-field reading of one event object; the first problem found is thrown.
private struct LegacyFields {
    let root: [String: Any]
    var callID: String?

    init(root: [String: Any]) { self.root = root }

    func invalid(_ field: String, _ problem: String) -> InvalidEvent {
        InvalidEvent(field: field, problem: problem, callID: callID)
    }

    /// The value of `key`, nil when absent or JSON null.
    func value(_ key: String) -> Any? {
        guard let v = root[key], !(v is NSNull) else { return nil }
        return v
    }

    func string(_ key: String) throws(InvalidEvent) -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v as? String else { throw invalid(key, "expected a string, got \(LegacyJSONKind.of(v))") }
        return s
    }

    func bool(_ key: String) throws(InvalidEvent) -> Bool? {
        guard let v = value(key) else { return nil }
        guard let n = v as? NSNumber, case let .boolean(b) = LegacyJSONNumber(n) else {
            throw invalid(key, "expected a boolean, got \(LegacyJSONKind.of(v))")
        }
        return b
    }

    func integer(_ key: String, what: String) throws(InvalidEvent) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let n = v as? NSNumber else {
            throw invalid(key, "expected an integer\(what), got \(LegacyJSONKind.of(v))")
        }
        switch LegacyJSONNumber(n) {
        case .boolean:
            throw invalid(key, "expected an integer\(what), got boolean")
        case let .integer(i):
            return i
        case let .unsigned(u):
            throw invalid(key, "\(u) is out of range")
        case let .floating(d):
            // 2^53: past it a double no longer holds every integer.
            guard d.rounded(.towardZero) == d, abs(d) <= 9_007_199_254_740_992 else {
                throw invalid(key, "expected an integer\(what), got \(d)")
            }
            return Int64(d)
        }
    }

    func unixMs(_ key: String) throws(InvalidEvent) -> Int64? {
        guard let ms = try integer(key, what: " (unix ms)") else { return nil }
        guard ms >= CallEvent.smallestUnixMs else {
            throw invalid(key, "\(ms) is not a unix time in milliseconds (seconds?)")
        }
        return ms
    }

    func token(_ key: String) throws(InvalidEvent) -> String? {
        guard let t = try string(key) else { return nil }
        guard !t.isEmpty else { throw invalid(key, "empty") }
        // Even-length hex is what PushNotification accepts; appending a digit tells an
        // odd-length hex string from one with a non-hex character.
        guard PushNotification.isHexToken(t) else {
            if t.utf8.count % 2 == 1 && PushNotification.isHexToken(t + "0") {
                throw invalid(key, "odd length (\(t.utf8.count) hex digits)")
            }
            throw invalid(key, "not a hex string")
        }
        return t
    }

    mutating func event(entryTimeMs: Int64, policy: AppRoutingPolicy) throws(InvalidEvent) -> CallEvent {
        if let v = try integer("v", what: "") {
            guard v == CallEvent.version else {
                throw invalid("v", "unsupported version \(v) (this gateway reads version \(CallEvent.version))")
            }
        }
        guard let id = try string("id") else { throw invalid("id", "required") }
        guard !id.isEmpty else { throw invalid("id", "empty") }
        guard id.count <= CallEvent.maxIDCharacters else {
            throw invalid("id", "\(id.count) characters, over \(CallEvent.maxIDCharacters)")
        }
        callID = id
        guard let typeText = try string("type") else { throw invalid("type", "required") }
        guard let kind = CallEvent.Kind(rawValue: typeText) else {
            throw invalid("type", "unknown event type \"\(typeText)\" (expected incoming_call, call_cancelled, call_answered, call_declined or call_ringing)")
        }
        let voipToken = try token("voip_token")
        let alertToken = try token("alert_token")
        let sandbox = try bool("sandbox")
        let deadline = try unixMs("deadline")
        let voipRegistered = try unixMs("voip_token_registered_at")
        let alertRegistered = try unixMs("alert_token_registered_at")
        let voip: [String: Any]
        if let v = value("voip") {
            guard let d = v as? [String: Any] else { throw invalid("voip", "expected an object, got \(LegacyJSONKind.of(v))") }
            voip = d
        } else {
            voip = [:]
        }
        var alertTitle: String?
        var alertBody: String?
        if let a = value("alert") {
            guard let d = a as? [String: Any] else { throw invalid("alert", "expected an object, got \(LegacyJSONKind.of(a))") }
            let alert = LegacyFields(root: d, callID: id)
            do {
                alertTitle = try alert.string("title")
                alertBody = try alert.string("body")
            } catch {
                throw InvalidEvent(field: "alert." + (error.field ?? ""), problem: error.problem, callID: id)
            }
        }
        if kind == .incomingCall && voipToken == nil && alertToken == nil {
            throw invalid("voip_token", "required when alert_token is absent (an incoming_call needs at least one token)")
        }
        let deadlineMs = deadline ?? entryTimeMs + policy.ringTimeoutMs

        var voipPayload: [UInt8] = []
        var alertPayload: [UInt8] = []
        let fromTemplate = alertTitle == nil || alertBody == nil
        if kind == .incomingCall {
            voipPayload = LegacyFields.voipPayload(voip, id: id, deadlineMs: deadlineMs)
            if voipToken != nil && voipPayload.count > PushType.voip.maxPayloadBytes {
                throw invalid("voip", "payload is \(voipPayload.count) bytes, over the \(PushType.voip.maxPayloadBytes)-byte VoIP limit")
            }
            let template = LegacyDecoder.render(policy.fallbackAlert, callerName: LegacyFields.text(voip["callerName"]),
                                                caller: LegacyFields.text(voip["caller"]))
            alertPayload = LegacyFields.alertPayload(title: alertTitle ?? template.title, body: alertBody ?? template.body,
                                                     sound: policy.fallbackAlert.sound, id: id)
            if alertToken != nil && alertPayload.count > PushType.alert.maxPayloadBytes {
                throw invalid("alert", "payload is \(alertPayload.count) bytes, over the \(PushType.alert.maxPayloadBytes)-byte alert limit"
                              + (fromTemplate ? " (with the app's template)" : ""))
            }
        }
        return CallEvent(id: id, kind: kind, voipToken: voipToken, alertToken: alertToken, sandbox: sandbox,
                         deadlineMs: deadlineMs, deadlineFromEvent: deadline != nil, entryTimeMs: entryTimeMs,
                         voipPayload: voipPayload, alertPayload: alertPayload, alertFromTemplate: fromTemplate,
                         voipTokenRegisteredAtMs: voipRegistered, alertTokenRegisteredAtMs: alertRegistered)
    }

    private init(root: [String: Any], callID: String) {
        self.root = root
        self.callID = callID
    }

    /// A string value, or a number's JSON text, for the template placeholders.
    static func text(_ v: Any?) -> String? {
        switch v {
        case let s as String: return s
        case let n as NSNumber:
            var w = LegacyJSONWriter()
            w.any(n)
            return String(decoding: w.bytes, as: UTF8.self)
        default: return nil
        }
    }

    /// The producer's `voip` dictionary, keys sorted by UTF-8 bytes, with `id` (the call id)
    /// and `deadline` (unix ms) added when absent so the app can de-duplicate and drop stale calls.
    static func voipPayload(_ voip: [String: Any], id: String, deadlineMs: Int64) -> [UInt8] {
        var d = voip
        if d["id"] == nil { d["id"] = id }
        if d["deadline"] == nil { d["deadline"] = NSNumber(value: deadlineMs) }
        var w = LegacyJSONWriter()
        w.any(d)
        return w.bytes
    }

    /// `{"aps":{"alert":{"title":…,"body":…},"sound":…},"id":…,"call_id":…}`; `sound` omitted when nil.
    static func alertPayload(title: String, body: String, sound: String?, id: String) -> [UInt8] {
        var w = LegacyJSONWriter()
        w.object { o in
            o.object("aps") { aps in
                aps.object("alert") { alert in
                    alert.string("title", title)
                    alert.string("body", body)
                }
                aps.string("sound", sound)
            }
            o.string("id", id)
            o.string("call_id", id)
        }
        return w.bytes
    }
}


/// Deterministic JSON output for everything Routing writes (VoIP and alert payloads, outcome
/// records): keys in the order the caller appends them (or sorted by UTF-8 bytes for the
/// producer's dictionaries), no whitespace, `/` and non-ASCII left as they are, control
/// characters escaped. The same value always gives the same bytes, on every platform.
struct LegacyJSONWriter {
    private(set) var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(256) }

    mutating func raw(_ s: String) { bytes.append(contentsOf: s.utf8) }

    mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0x08: raw("\\b")
            case 0x0C: raw("\\f")
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                raw("\\u00")
                bytes.append(hex[Int(c >> 4)])
                bytes.append(hex[Int(c & 0xF)])
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    mutating func int(_ v: Int64) { raw(String(v)) }

    /// An object whose members are written by `body` through `LegacyObjectWriter`.
    mutating func object(_ body: (inout LegacyObjectWriter) -> Void) {
        var o = LegacyObjectWriter(writer: self)
        bytes = []
        o.writer.bytes.append(UInt8(ascii: "{"))
        body(&o)
        o.writer.bytes.append(UInt8(ascii: "}"))
        self = o.writer
    }

    /// A value parsed by `JSONSerialization` (dictionaries with keys sorted by UTF-8 bytes).
    mutating func any(_ value: Any) {
        switch value {
        case let s as String:
            string(s)
        case let n as NSNumber:
            number(n)
        case let d as [String: Any]:
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in d.keys.sorted(by: LegacyJSONWriter.utf8Less).enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                any(d[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        case let a as [Any]:
            bytes.append(UInt8(ascii: "["))
            for (i, element) in a.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                any(element)
            }
            bytes.append(UInt8(ascii: "]"))
        default:
            // NSNull, the only other thing JSONSerialization produces.
            raw("null")
        }
    }

    private mutating func number(_ n: NSNumber) {
        switch LegacyJSONNumber(n) {
        case let .boolean(b): raw(b ? "true" : "false")
        case let .integer(i): int(i)
        case let .unsigned(u): raw(String(u))
        case let .floating(d):
            // Swift's shortest round-trip form ("1.5", "1e-07", "1e+300") is valid JSON.
            raw(d.isFinite ? String(d) : "null")
        }
    }

    static func utf8Less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }
}

/// Writes the members of one JSON object; `LegacyJSONWriter.object` adds the braces.
struct LegacyObjectWriter {
    var writer: LegacyJSONWriter
    private var count = 0

    init(writer: LegacyJSONWriter) { self.writer = writer }

    private mutating func key(_ k: String) {
        if count > 0 { writer.raw(",") }
        count += 1
        writer.string(k)
        writer.raw(":")
    }

    mutating func string(_ k: String, _ v: String?) {
        guard let v else { return }
        key(k); writer.string(v)
    }

    mutating func int(_ k: String, _ v: Int64?) {
        guard let v else { return }
        key(k); writer.int(v)
    }

    mutating func object(_ k: String, _ body: (inout LegacyObjectWriter) -> Void) {
        key(k); writer.object(body)
    }

    mutating func array<T>(_ k: String, _ elements: [T], _ body: (inout LegacyJSONWriter, T) -> Void) {
        key(k)
        writer.raw("[")
        for (i, e) in elements.enumerated() {
            if i > 0 { writer.raw(",") }
            body(&writer, e)
        }
        writer.raw("]")
    }

    mutating func any(_ k: String, _ v: Any) {
        key(k); writer.any(v)
    }
}

/// What a number parsed by `JSONSerialization` really is. On Linux `true` arrives as an
/// `NSNumber` (`__NSCFBoolean`, objCType "c") that also casts to `Int` and `Double`, and `1`
/// casts to `Bool`; the objCType tells them apart: "c"/"B" boolean, "d"/"f" floating,
/// "Q" unsigned above `Int64.max`, anything else a signed integer.
enum LegacyJSONNumber: Equatable {
    case boolean(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case floating(Double)

    init(_ n: NSNumber) {
        switch String(cString: n.objCType) {
        case "c", "B": self = .boolean(n.boolValue)
        case "d", "f": self = .floating(n.doubleValue)
        case "Q", "L":
            let u = n.uint64Value
            self = u <= UInt64(Int64.max) ? .integer(Int64(u)) : .unsigned(u)
        default: self = .integer(n.int64Value)
        }
    }
}
