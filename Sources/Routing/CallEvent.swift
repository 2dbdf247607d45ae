import APNs
import FCM

/// One producer event (the `event` field of a `pushgw:{APP}:calls` entry, docs/protocol.md),
/// validated and prepared: tokens checked, the deadline resolved, and both payloads serialized,
/// so the router never touches JSON and a push built from it cannot be refused for its form.
///
/// Build it with `CallEvent.decode(_:entryTimeMs:policy:)`.
public struct CallEvent: Equatable, Sendable {
    /// The `type` of an event.
    public enum Kind: String, Sendable, CaseIterable {
        case incomingCall = "incoming_call"
        case callCancelled = "call_cancelled"
        /// One of the call's devices (`device`) answered: the ring ends on every other device.
        case callAnswered = "call_answered"
        /// One of the call's devices (`device`) declined: the ring ends on every other device.
        case callDeclined = "call_declined"
        /// One of the call's devices (`device`; absent for the single-device form) reported
        /// the call to CallKit: its ring receipt (docs/protocol.md, *Ring receipts*).
        case callRinging = "call_ringing"

        /// A `call_cancelled`, `call_answered` or `call_declined`: it ends its call's ring
        /// (`CallEnd`), rings nothing itself, and has its own result in the cancels' id
        /// namespace (docs/protocol.md).
        public var endsRing: Bool { self != .incomingCall && self != .callRinging }
    }

    /// What an event that ends its call's ring says ended it; nil for an `incoming_call`.
    public var end: CallEnd? {
        switch kind {
        case .incomingCall: return nil
        case .callCancelled: return .cancelled
        case .callAnswered: return .answered(device: device ?? "")
        case .callDeclined: return .declined(device: device ?? "")
        case .callRinging: return nil
        }
    }

    /// Every field in one shared, immutable box: an event is copied into its call's machines and
    /// their states at every step (about 16 copies a call), and a copy is then one retain, not one
    /// per token, payload and list; a field is read with a plain load (an immutable field needs
    /// no exclusivity check). The decoder gives every field to `init`.
    private struct Fields: Equatable, Sendable {
        var id: String
        var kind: Kind
        var voipToken: String?
        var alertToken: String?
        var fcmToken: String? = nil
        var android: AndroidCall? = nil
        var fcmMissedCall = true
        var sandbox: Bool?
        var deadlineMs: Int64
        var deadlineFromEvent: Bool
        var entryTimeMs: Int64
        var voipPayload: [UInt8]
        var alertPayload: [UInt8]
        var alertFromTemplate: Bool
        var voipTokenRegisteredAtMs: Int64?
        var alertTokenRegisteredAtMs: Int64?
        var listedDevices: [CallDevice] = []
        var device: String? = nil
    }

    private final class Box: Sendable {
        let value: Fields
        init(_ value: Fields) { self.value = value }
    }

    private var box: Box

    public static func == (a: CallEvent, b: CallEvent) -> Bool { a.box === b.box || a.box.value == b.box.value }

    init(id: String, kind: Kind, voipToken: String?, alertToken: String?, fcmToken: String? = nil, android: AndroidCall? = nil, fcmMissedCall: Bool = true, sandbox: Bool?, deadlineMs: Int64, deadlineFromEvent: Bool, entryTimeMs: Int64, voipPayload: [UInt8], alertPayload: [UInt8], alertFromTemplate: Bool, voipTokenRegisteredAtMs: Int64?, alertTokenRegisteredAtMs: Int64?, listedDevices: [CallDevice] = [], device: String? = nil) {
        box = Box(Fields(id: id, kind: kind, voipToken: voipToken, alertToken: alertToken, fcmToken: fcmToken, android: android, fcmMissedCall: fcmMissedCall, sandbox: sandbox, deadlineMs: deadlineMs, deadlineFromEvent: deadlineFromEvent, entryTimeMs: entryTimeMs, voipPayload: voipPayload, alertPayload: alertPayload, alertFromTemplate: alertFromTemplate, voipTokenRegisteredAtMs: voipTokenRegisteredAtMs, alertTokenRegisteredAtMs: alertTokenRegisteredAtMs, listedDevices: listedDevices, device: device))
    }

    /// The call id: 1…128 characters, the idempotency key, carried in both pushes.
    public var id: String { box.value.id }
    public var kind: Kind { box.value.kind }
    /// PushKit token, hex, lower case (hex is case-insensitive: an upper-case copy of a token
    /// is the same token, for the known-invalid tokens and the feedback too); nil when absent.
    public var voipToken: String? { box.value.voipToken }
    /// Alert (UIApplication) token, hex, lower case; nil when absent.
    public var alertToken: String? { box.value.alertToken }
    /// FCM registration token of an Android device, as the producer wrote it (FCM's tokens are
    /// case-sensitive); nil when absent. Never with `voipToken` or `alertToken`: a device is an
    /// iPhone or an Android phone.
    public var fcmToken: String? { box.value.fcmToken }
    /// What the call's Android devices are sent besides their tokens (the ring's data, the
    /// missed-call notification's text), worked out once at decoding; nil when no device has
    /// an `fcm_token`. A reference: the event is copied at every step of its call.
    public var android: AndroidCall? { box.value.android }
    /// For one Android device's event (`event(of:alert:)`): its router may send the missed-call
    /// notification (its fallback); false under `missed_call_alert: unanswered`, where the
    /// call's machine sends it.
    public var fcmMissedCall: Bool { box.value.fcmMissedCall }
    /// The event's `sandbox`; nil when absent (the app's environment applies).
    public var sandbox: Bool? { box.value.sandbox }
    /// After this time (unix ms) no VoIP push is sent: the event's `deadline`, or the stream
    /// entry's time plus the app's ring timeout (for a replay, no later than the original
    /// call's deadline, its entry's `call_deadline`).
    public var deadlineMs: Int64 { box.value.deadlineMs }
    /// True when `deadlineMs` came from the event rather than the ring timeout.
    public var deadlineFromEvent: Bool { box.value.deadlineFromEvent }
    /// When the producer wrote the entry (unix ms, from its stream id); `latency_ms` counts from it.
    public var entryTimeMs: Int64 { box.value.entryTimeMs }
    /// The VoIP payload as sent: the producer's `voip` dictionary, keys sorted, plus `id` and
    /// `deadline` when the producer did not set them. Empty for `call_cancelled`.
    public var voipPayload: [UInt8] { box.value.voipPayload }
    /// The fallback alert's payload as sent, at most 4096 bytes (shortened to fit). Empty for
    /// `call_cancelled` and for an event without `alert_token` (no alert can be sent; the
    /// router never builds it then).
    public var alertPayload: [UInt8] { box.value.alertPayload }
    /// True when the alert text came from the app's template rather than the event's `alert`.
    public var alertFromTemplate: Bool { box.value.alertFromTemplate }
    /// When the producer last saw the VoIP token registered (unix ms); a token APNs declared
    /// invalid at T is used again only if this is after T.
    public var voipTokenRegisteredAtMs: Int64? { box.value.voipTokenRegisteredAtMs }
    /// The same for the alert token.
    public var alertTokenRegisteredAtMs: Int64? { box.value.alertTokenRegisteredAtMs }
    /// The devices of an `incoming_call` written with `devices` (1 ... `maxDevices`, ids
    /// unique), in the producer's order; empty for the single-device form, whose one device is
    /// the top-level tokens (`devices` gives both forms as one list).
    public var listedDevices: [CallDevice] { box.value.listedDevices }
    /// For `call_answered` and `call_declined`: the id of the device that answered or declined;
    /// for `call_ringing`, the device that rang (nil for the single-device form).
    public var device: String? { box.value.device }

    /// Events larger than this are refused before parsing: the VoIP and alert payloads are
    /// bounded by 5120 and 4096 bytes, and parsing runs on the loop thread.
    public static let maxEventBytes = 65_536
    /// Longest call id, in characters (a device id's limit too).
    public static let maxIDCharacters = 128
    /// Most devices one `incoming_call` rings.
    public static let maxDevices = 16

    /// The devices the call rings: the listed ones, or the one of the single-device form
    /// (no id, the top-level tokens). Empty for the other event types.
    public var devices: [CallDevice] {
        guard listedDevices.isEmpty else { return listedDevices }
        guard kind == .incomingCall else { return [] }
        return [CallDevice(id: nil, voipToken: voipToken, alertToken: alertToken, sandbox: sandbox,
                           voipTokenRegisteredAtMs: voipTokenRegisteredAtMs, alertTokenRegisteredAtMs: alertTokenRegisteredAtMs,
                           fcmToken: fcmToken)]
    }

    /// The token of the device's ring: its VoIP token, or an Android device's FCM token.
    public var ringToken: String? { voipToken ?? fcmToken }

    /// Who delivers the pushes of this one device's event.
    public var provider: PushProvider { fcmToken == nil ? .apns : .fcm }

    /// True when the call rings an Android device (an `fcm_token`, top-level or in `devices`).
    public var ringsAndroid: Bool {
        fcmToken != nil || listedDevices.contains { $0.fcmToken != nil }
    }

    /// This event as the single-device event of `device`: its tokens, its environment, the
    /// call's id, deadline and payloads. What one device's `CallRouter` routes; `alert: false`
    /// leaves its alert token out (the router then has no fallback).
    public func event(of device: CallDevice, alert: Bool = true) -> CallEvent {
        CallEvent(id: id, kind: kind, voipToken: device.voipToken, alertToken: alert ? device.alertToken : nil,
                  fcmToken: device.fcmToken, android: android, fcmMissedCall: alert, sandbox: device.sandbox,
                  deadlineMs: deadlineMs, deadlineFromEvent: deadlineFromEvent, entryTimeMs: entryTimeMs,
                  voipPayload: voipPayload,
                  alertPayload: alert && device.alertToken != nil ? alertPayload : [], alertFromTemplate: alertFromTemplate,
                  voipTokenRegisteredAtMs: device.voipTokenRegisteredAtMs, alertTokenRegisteredAtMs: device.alertTokenRegisteredAtMs,
                  listedDevices: [], device: nil)
    }

    /// True for a usable call id: 1 ... `maxIDCharacters` characters.
    public static func isCallID(_ id: String) -> Bool {
        // A character has one UTF-8 byte or more: only a long id needs its characters counted.
        !id.isEmpty && (id.utf8.count <= maxIDCharacters || id.count <= maxIDCharacters)
    }
    /// The only contract version this gateway reads.
    public static let version: Int64 = 1
    /// Unix-ms values below this (1973-03-03) are taken for a unit mistake (seconds) and refused.
    public static let smallestUnixMs: Int64 = 100_000_000_000
    /// Unix-ms values more than this after the entry's time are refused: no ringing call has a
    /// deadline a day away, and no token was registered in the future. Catches microseconds
    /// and nanoseconds, which would otherwise pass as dates centuries ahead.
    public static let largestAheadMs: Int64 = 86_400_000

    /// Decodes and validates the producer's JSON.
    ///
    /// - Parameters:
    ///   - bytes: the `event` field of the stream entry.
    ///   - entryTimeMs: the entry's time (the milliseconds of its stream id). The default
    ///     deadline counts from it, so an event that waited in a backlog past its ring time
    ///     goes straight to the missed-call alert.
    ///   - policy: the app's policy (ring timeout, fallback template, alert sound).
    /// - Throws: `InvalidEvent`, whose message names the offending field.
    ///
    /// Rules beyond docs/protocol.md, each a decision: bytes that are not UTF-8 make the event
    /// invalid (`event: not valid UTF-8 at byte N`); `null` for an optional field means absent;
    /// a `deadline` written as a float is accepted when it is a whole number; unix-ms fields
    /// below `smallestUnixMs` are refused as probable seconds, and more than `largestAheadMs`
    /// after the entry's time as probable microseconds or nanoseconds (the reason names the
    /// field and the likely unit); hex tokens are lower-cased; the VoIP payload's size is
    /// checked for `incoming_call` only (a cancel sends nothing), only with a VoIP token, after
    /// `id` and `deadline` were added; an alert too large for APNs is shortened to fit
    /// (`fittedAlertPayload`), never a reason to refuse the event; an `alert` object may
    /// omit `title` or `body`, which then come from the template; JSON nested deeper than
    /// `JSONParser.maxDepth` (64) levels is not read. Otherwise the JSON is read as
    /// `JSONSerialization` read it (see `JSONParser`).
    ///   - callDeadline: the entry's `call_deadline` field, which a replay from the dead
    ///     letters carries (docs/protocol.md): the original call's deadline, unix ms. An event
    ///     without its own `deadline` rings no later than it (never later than the ring timeout
    ///     from the entry either); a value that is not 1 to 16 digits counts as passed, so an
    ///     unreadable one never makes an old call ring.
    ///   - replayedDevice: the entry's `replayed_device` field, which a replay of one device's dead
    ///     letter carries (docs/protocol.md): the call rings that device of its `devices` alone,
    ///     so the replay does not ring (or tell of a missed call) the devices whose ring ended
    ///     well; an event that does not list it is invalid.
    public static func decode(_ bytes: [UInt8], entryTimeMs: Int64, policy: AppRoutingPolicy,
                              callDeadline: [UInt8]? = nil, replayedDevice: [UInt8]? = nil) throws(InvalidEvent) -> CallEvent {
        guard bytes.count <= maxEventBytes else {
            throw InvalidEvent(field: "event", problem: "\(bytes.count) bytes, over the \(maxEventBytes)-byte limit")
        }
        // JSON is UTF-8 (or UTF-16/32, told by a byte order mark or zero bytes): a byte that is
        // not UTF-8 makes the event invalid, rather than being read as U+FFFD (which could join
        // two ids, or hide a key such as `voip_token`).
        if JSONParser.otherEncoding(bytes) == nil, let offset = JSONParser.firstInvalidUTF8Byte(bytes) {
            throw InvalidEvent(field: "event", problem: "not valid UTF-8 at byte \(offset)")
        }
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(bytes)
        } catch {
            // A problem inside a member (a number out of range) names the member.
            throw InvalidEvent(field: error.field, problem: "not JSON: \(bytes.isEmpty ? "empty" : error.description)")
        }
        guard case let .object(root) = parsed else {
            throw InvalidEvent(field: "event", problem: "expected a JSON object, got \(parsed.kind)")
        }
        var fields = JSONFields(root: root)
        do {
            return try fields.event(entryTimeMs: entryTimeMs, policy: policy, callDeadlineMs: callDeadline.map(CallEvent.callDeadlineMs),
                                    onlyDevice: replayedDevice.map { String(decoding: $0, as: UTF8.self) })
        } catch {
            // Whatever else is wrong, the producer matches results on id and type: read them
            // if they are readable at all, even when the problem was found before them.
            var error = error
            if error.callID == nil { error.callID = JSONFields.readableID(root) }
            if error.kind == nil, case let .string(type)? = root.last("type") { error.kind = Kind(rawValue: type) }
            throw error
        }
    }

    /// A `call_deadline` field's unix ms: 1 to 16 ASCII digits, else 0 (passed).
    static func callDeadlineMs(_ bytes: [UInt8]) -> Int64 {
        guard (1...16).contains(bytes.count) else { return 0 }
        var ms: Int64 = 0
        for b in bytes {
            guard b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") else { return 0 }
            ms = ms * 10 + Int64(b - UInt8(ascii: "0"))
        }
        return ms
    }

    /// The id and type of an event as far as they can be read (for the dead letter of an entry
    /// that is refused for another reason, such as too many deliveries).
    public static func identity(_ bytes: [UInt8], entryTimeMs: Int64,
                                policy: AppRoutingPolicy) -> (id: String?, kind: Kind?) {
        do {
            let event = try decode(bytes, entryTimeMs: entryTimeMs, policy: policy)
            return (event.id, event.kind)
        } catch {
            return (error.callID, error.kind)
        }
    }
}

/// One device a call rings (an entry of the event's `devices`, or the single-device form's
/// top-level tokens): tokens checked and lower-cased as the event's are.
public struct CallDevice: Equatable, Sendable {
    /// The producer's name for the device, unique in its call (1 ... 128 characters); nil for
    /// the device of the single-device form, which has none.
    public let id: String?
    public let voipToken: String?
    public let alertToken: String?
    /// The device's `sandbox`, else the event's; nil: the app's environment.
    public let sandbox: Bool?
    public let voipTokenRegisteredAtMs: Int64?
    public let alertTokenRegisteredAtMs: Int64?
    /// The FCM registration token of an Android device (then no iOS token); nil for an iPhone.
    public let fcmToken: String?

    public init(id: String?, voipToken: String?, alertToken: String?, sandbox: Bool? = nil,
                voipTokenRegisteredAtMs: Int64? = nil, alertTokenRegisteredAtMs: Int64? = nil, fcmToken: String? = nil) {
        self.fcmToken = fcmToken
        self.id = id
        self.voipToken = voipToken
        self.alertToken = alertToken
        self.sandbox = sandbox
        self.voipTokenRegisteredAtMs = voipTokenRegisteredAtMs
        self.alertTokenRegisteredAtMs = alertTokenRegisteredAtMs
    }
}

/// Why an event was refused. `description` is `"<field>: <problem>"` (or `"not JSON: …"`),
/// the text written to the dead-letter stream as `invalid_event: …`.
public struct InvalidEvent: Error, Equatable, Sendable, CustomStringConvertible {
    /// The JSON field at fault (`alert.title` for a nested one); nil when the bytes are not JSON.
    public let field: String?
    /// What is wrong with it.
    public let problem: String
    /// The event's id, when it could be read (a non-empty string of at most 128 characters),
    /// whatever the problem: the dead letter's result carries it.
    public var callID: String?
    /// The event's type, when it is one of the known ones.
    public var kind: CallEvent.Kind?

    public init(field: String?, problem: String, callID: String? = nil, kind: CallEvent.Kind? = nil) {
        self.field = field
        self.problem = problem
        self.callID = callID
        self.kind = kind
    }

    public var description: String {
        guard let field else { return problem }
        return "\(field): \(problem)"
    }

    /// The most characters of input a reason quotes.
    public static let quoteLimit = 64

    /// `text` as a reason may quote it: its first `quoteLimit` characters, then `…` when it is
    /// longer (a 60,000-digit number must not make a 60 KB reason). Escaping for terminals is
    /// the output's job.
    public static func quote(_ text: String) -> String {
        // A character has one UTF-8 byte or more: a short text needs no counting.
        guard text.utf8.count > quoteLimit else { return text }
        let end = text.index(text.startIndex, offsetBy: quoteLimit, limitedBy: text.endIndex) ?? text.endIndex
        return end == text.endIndex ? text : text[..<end] + "…"
    }
}

/// The field-by-field reading of one JSON object (an event, or a saved retry): the first
/// problem found is thrown, naming the field.
struct JSONFields {
    let root: JSONObject
    var callID: String?

    init(root: JSONObject) { self.root = root }

    func invalid(_ field: StaticString, _ problem: String) -> InvalidEvent {
        InvalidEvent(field: "\(field)", problem: problem, callID: callID)
    }

    /// The value of `key`, nil when absent or JSON null.
    func value(_ key: StaticString) -> JSONValue? {
        guard let v = root.last(key) else { return nil }
        if case .null = v { return nil }
        return v
    }

    func string(_ key: StaticString) throws(InvalidEvent) -> String? {
        guard let v = value(key) else { return nil }
        guard case let .string(s) = v else { throw invalid(key, "expected a string, got \(v.kind)") }
        return s
    }

    /// `read`'s value, or a "required" problem naming `key` when absent.
    func required<T>(_ key: StaticString, _ read: @autoclosure () throws(InvalidEvent) -> T?) throws(InvalidEvent) -> T {
        guard let v = try read() else { throw invalid(key, "required") }
        return v
    }

    func bool(_ key: StaticString) throws(InvalidEvent) -> Bool? {
        guard let v = value(key) else { return nil }
        guard case let .bool(b) = v else { throw invalid(key, "expected a boolean, got \(v.kind)") }
        return b
    }

    func integer(_ key: StaticString, what: String) throws(InvalidEvent) -> Int64? {
        guard let v = value(key) else { return nil }
        switch v {
        case let .int(i):
            return i
        case let .uint(u):
            throw invalid(key, "\(u) is out of range")
        case let .double(d):
            // 2^53: past it a double no longer holds every integer.
            guard d.rounded(.towardZero) == d, abs(d) <= 9_007_199_254_740_992 else {
                throw invalid(key, "expected an integer\(what), got \(d)")
            }
            return Int64(d)
        default:
            throw invalid(key, "expected an integer\(what), got \(v.kind)")
        }
    }

    func unixMs(_ key: StaticString, entryTimeMs: Int64) throws(InvalidEvent) -> Int64? {
        guard let ms = try integer(key, what: " (unix ms)") else { return nil }
        guard ms >= CallEvent.smallestUnixMs else {
            throw invalid(key, "\(ms) is not a unix time in milliseconds (seconds?)")
        }
        guard ms.clampedDifference(entryTimeMs) <= CallEvent.largestAheadMs else {
            // A thousand times the present is microseconds; a million times, nanoseconds.
            let ratio = ms / max(entryTimeMs, CallEvent.smallestUnixMs)
            let unit = ratio >= 500_000 ? "nanoseconds?" : ratio >= 500 ? "microseconds?" : "a date, not a ringing call's time?"
            throw invalid(key, "\(ms) is more than a day after the event was written (\(entryTimeMs)): "
                               + "not unix milliseconds of a ringing call (\(unit))")
        }
        return ms
    }

    /// The id if it is usable as one (what `event` requires of it), else nil.
    static func readableID(_ root: JSONObject) -> String? {
        guard case let .string(id)? = root.last("id"), CallEvent.isCallID(id) else { return nil }
        return id
    }

    /// A device token: even-length hex of at most `PushNotification.maxTokenHexDigits`
    /// digits, in lower case: what `PushNotification` accepts (docs/protocol.md gives the
    /// limit's reason).
    func token(_ key: StaticString) throws(InvalidEvent) -> String? {
        guard let t = try string(key) else { return nil }
        guard !t.isEmpty else { throw invalid(key, "empty") }
        // Even-length hex is what PushNotification accepts, in lower case: hex is
        // case-insensitive, and one spelling per token lets an upper-case copy of a token APNs
        // declared invalid be recognised (known-invalid keys, feedback). Appending a digit
        // tells an odd-length hex string from one with a non-hex character.
        guard let token = PushNotification.lowerCaseHexToken(t) else {
            if t.utf8.count % 2 == 1 && PushNotification.isHexToken(t + "0") {
                throw invalid(key, "odd length (\(t.utf8.count) hex digits)")
            }
            throw invalid(key, "not a hex string")
        }
        guard t.utf8.count <= PushNotification.maxTokenHexDigits else {
            throw invalid(key, "\(t.utf8.count) hex digits, over the \(PushNotification.maxTokenHexDigits)-digit limit")
        }
        return token
    }

    /// An FCM registration token: 1 ... `FcmMessage.maxTokenBytes` bytes of visible ASCII
    /// (FCM's tokens are base64url with `:` and `-`), kept as written (they are case-sensitive).
    /// Nil when absent; else only for an app that names an `fcm_credential`, and never beside
    /// an iOS token of the same device (`iosTokenPresent`).
    func fcmToken(policy: AppRoutingPolicy, iosTokenPresent: Bool) throws(InvalidEvent) -> String? {
        guard let t = try string("fcm_token") else { return nil }
        guard !t.isEmpty else { throw invalid("fcm_token", "empty") }
        guard t.utf8.count <= FcmMessage.maxTokenBytes else {
            throw invalid("fcm_token", "\(t.utf8.count) bytes, over the \(FcmMessage.maxTokenBytes)-byte limit")
        }
        if let offset = t.utf8.firstIndex(where: { $0 <= 0x20 || $0 >= 0x7F }) {
            throw invalid("fcm_token", "not visible ASCII at byte \(t.utf8.distance(from: t.utf8.startIndex, to: offset)) "
                                       + "(an FCM registration token is base64url with : and -)")
        }
        guard !iosTokenPresent else {
            throw invalid("fcm_token", "not with voip_token or alert_token (a device is an iPhone or an Android phone: "
                                       + "list them as two devices)")
        }
        guard policy.fcmCredential != nil else {
            throw invalid("fcm_token", "app \(policy.appID) has no fcm_credential, so it cannot ring Android devices "
                                       + "(name an FCM service account of credentials in the app's fcm_credential, config/README.md)")
        }
        return t
    }

    mutating func event(entryTimeMs: Int64, policy: AppRoutingPolicy, callDeadlineMs: Int64?,
                        onlyDevice: String? = nil) throws(InvalidEvent) -> CallEvent {
        if let v = try integer("v", what: "") {
            guard v == CallEvent.version else {
                throw invalid("v", "unsupported version \(v) (this gateway reads version \(CallEvent.version))")
            }
        }
        guard let id = try string("id") else { throw invalid("id", "required") }
        guard !id.isEmpty else { throw invalid("id", "empty") }
        guard CallEvent.isCallID(id) else { throw invalid("id", "\(id.count) characters, over \(CallEvent.maxIDCharacters)") }
        callID = id
        guard let typeText = try string("type") else { throw invalid("type", "required") }
        guard let kind = CallEvent.Kind(rawValue: typeText) else {
            throw invalid("type", "unknown event type \"\(InvalidEvent.quote(typeText))\" "
                                  + "(expected incoming_call, call_cancelled, call_answered, call_declined or call_ringing)")
        }
        let voipToken = try token("voip_token")
        let alertToken = try token("alert_token")
        let fcmToken = try self.fcmToken(policy: policy, iosTokenPresent: voipToken != nil || alertToken != nil)
        let sandbox = try bool("sandbox")
        var listed = kind == .incomingCall ? try devices(sandbox: sandbox, entryTimeMs: entryTimeMs, policy: policy) : []
        if let onlyDevice, kind == .incomingCall {
            listed = listed.filter { $0.id == onlyDevice }
            guard !listed.isEmpty else {
                throw invalid("devices", "the replayed dead letter is device \"\(InvalidEvent.quote(onlyDevice))\"'s, "
                                         + "which the event does not list")
            }
        }
        if !listed.isEmpty, voipToken != nil || alertToken != nil || fcmToken != nil {
            throw invalid(voipToken != nil ? "voip_token" : alertToken != nil ? "alert_token" : "fcm_token",
                          "not with devices (each device carries its own tokens)")
        }
        var device: String?
        if kind == .callAnswered || kind == .callDeclined {
            let named = try required("device", string("device"))
            guard CallEvent.isCallID(named) else {
                throw invalid("device", named.isEmpty ? "empty" : "\(named.count) characters, over \(CallEvent.maxIDCharacters)")
            }
            device = named
        }
        if kind == .callRinging, let named = try string("device") {
            guard CallEvent.isCallID(named) else {
                throw invalid("device", named.isEmpty ? "empty" : "\(named.count) characters, over \(CallEvent.maxIDCharacters)")
            }
            device = named
        }
        let deadline = try unixMs("deadline", entryTimeMs: entryTimeMs)
        let voipRegistered = try unixMs("voip_token_registered_at", entryTimeMs: entryTimeMs)
        let alertRegistered = try unixMs("alert_token_registered_at", entryTimeMs: entryTimeMs)
        let voip: JSONObject
        if let v = value("voip") {
            guard case let .object(o) = v else { throw invalid("voip", "expected an object, got \(v.kind)") }
            voip = o
        } else {
            voip = JSONObject(members: [])
        }
        var alertTitle: String?
        var alertBody: String?
        if let a = value("alert") {
            guard case let .object(o) = a else { throw invalid("alert", "expected an object, got \(a.kind)") }
            let alert = JSONFields(root: o, callID: id)
            do {
                alertTitle = try alert.string("title")
                alertBody = try alert.string("body")
            } catch {
                throw InvalidEvent(field: "alert." + (error.field ?? ""), problem: error.problem, callID: id)
            }
        }
        if kind == .incomingCall && voipToken == nil && alertToken == nil && fcmToken == nil && listed.isEmpty {
            throw invalid("voip_token", "required when alert_token is absent (an incoming_call needs at least one token)")
        }
        let anyVoip = voipToken != nil || listed.contains { $0.voipToken != nil }
        let anyAlert = alertToken != nil || listed.contains { $0.alertToken != nil }
        let ringEnd = entryTimeMs.clampedSum(policy.ringTimeoutMs)
        let deadlineMs = deadline ?? callDeadlineMs.map { min($0, ringEnd) } ?? ringEnd

        var voipPayload: [UInt8] = []
        var alertPayload: [UInt8] = []
        let fromTemplate = alertTitle == nil || alertBody == nil
        if kind == .incomingCall {
            voipPayload = JSONFields.voipPayload(voip, id: id, deadlineMs: deadlineMs)
            if anyVoip && voipPayload.count > PushType.voip.maxPayloadBytes {
                throw invalid("voip", "payload is \(voipPayload.count) bytes, over the \(PushType.voip.maxPayloadBytes)-byte VoIP limit")
            }
        }
        if kind == .incomingCall, anyAlert {
            alertPayload = JSONFields.fittedAlertPayload(title: alertTitle, body: alertBody, voip: voip, policy: policy, id: id)
        }
        let android = kind == .incomingCall && (fcmToken != nil || listed.contains(where: { $0.fcmToken != nil }))
            ? AndroidCall(voip: voip, id: id, deadlineMs: deadlineMs, title: alertTitle, body: alertBody, policy: policy) : nil
        return CallEvent(id: id, kind: kind, voipToken: voipToken, alertToken: alertToken, fcmToken: fcmToken, android: android,
                         sandbox: sandbox, deadlineMs: deadlineMs, deadlineFromEvent: deadline != nil, entryTimeMs: entryTimeMs,
                         voipPayload: voipPayload, alertPayload: alertPayload, alertFromTemplate: fromTemplate,
                         voipTokenRegisteredAtMs: voipRegistered, alertTokenRegisteredAtMs: alertRegistered,
                         listedDevices: listed, device: device)
    }

    /// The `devices` list of an `incoming_call`: absent (empty), or 1 ... `CallEvent.maxDevices`
    /// objects, each with an `id` unique in the call and at least one token (iOS tokens, or an
    /// `fcm_token` alone); a device without `sandbox` takes the event's. Problems name the
    /// device by its index (`devices[2].voip_token`).
    mutating func devices(sandbox: Bool?, entryTimeMs: Int64, policy: AppRoutingPolicy) throws(InvalidEvent) -> [CallDevice] {
        guard let list = value("devices") else { return [] }
        guard case let .array(items) = list else { throw invalid("devices", "expected an array, got \(list.kind)") }
        guard !items.isEmpty else { throw invalid("devices", "empty (an incoming_call rings 1 to \(CallEvent.maxDevices) devices)") }
        guard items.count <= CallEvent.maxDevices else {
            throw invalid("devices", "\(items.count) devices, over the \(CallEvent.maxDevices) a call rings")
        }
        var out: [CallDevice] = []
        out.reserveCapacity(items.count)
        for (i, item) in items.enumerated() {
            let at = "devices[\(i)]"
            guard case let .object(o) = item else {
                throw InvalidEvent(field: at, problem: "expected an object, got \(item.kind)", callID: callID)
            }
            let f = JSONFields(root: o, callID: callID ?? "")
            do throws(InvalidEvent) {
                let id = try f.required("id", f.string("id"))
                guard CallEvent.isCallID(id) else {
                    throw f.invalid("id", id.isEmpty ? "empty" : "\(id.count) characters, over \(CallEvent.maxIDCharacters)")
                }
                if out.contains(where: { $0.id == id }) {
                    throw f.invalid("id", "\"\(InvalidEvent.quote(id))\" names two devices (a device id is unique in its call)")
                }
                let voip = try f.token("voip_token"), alert = try f.token("alert_token")
                let fcm = try f.fcmToken(policy: policy, iosTokenPresent: voip != nil || alert != nil)
                guard voip != nil || alert != nil || fcm != nil else {
                    throw f.invalid("voip_token", "required when alert_token is absent (a device needs at least one token)")
                }
                out.append(CallDevice(id: id, voipToken: voip, alertToken: alert, sandbox: try f.bool("sandbox") ?? sandbox,
                                      voipTokenRegisteredAtMs: try f.unixMs("voip_token_registered_at", entryTimeMs: entryTimeMs),
                                      alertTokenRegisteredAtMs: try f.unixMs("alert_token_registered_at", entryTimeMs: entryTimeMs),
                                      fcmToken: fcm))
            } catch {
                throw InvalidEvent(field: at + "." + (error.field ?? ""), problem: error.problem, callID: callID)
            }
        }
        return out
    }

    private init(root: JSONObject, callID: String) {
        self.root = root
        self.callID = callID
    }

    /// A string value, or a number's (or boolean's) JSON text, for the template placeholders.
    static func text(_ v: JSONValue?) -> String? {
        switch v {
        case let .string(s)?: return s
        case .bool?, .int?, .uint?, .double?:
            var w = JSONWriter()
            w.value(v!)
            return String(decoding: w.finish(), as: UTF8.self)
        default: return nil
        }
    }

    /// The producer's `voip` dictionary, keys sorted by UTF-8 bytes, with `id` (the call id)
    /// and `deadline` (unix ms) added when absent so the app can de-duplicate and drop stale calls.
    static func voipPayload(_ voip: JSONObject, id: String, deadlineMs: Int64) -> [UInt8] {
        var members = voip.unique
        members.reserveCapacity(members.count + 2)
        if voip.last("id") == nil { members.append(JSONMember(key: "id", value: .string(id))) }
        if voip.last("deadline") == nil {
            members.append(JSONMember(key: "deadline", value: .int(deadlineMs)))
        }
        var w = JSONWriter()
        w.sortedObject(members)
        return w.finish()
    }

    /// The fallback alert's payload, made to fit APNs' 4096-byte limit: an alert never makes
    /// an event invalid (its VoIP push must not be refused because of its fallback). As is when
    /// it fits; else with the caller's name in the template shortened (at a character
    /// boundary, ending with `…`) to the longest that fits; else with the event's own title and
    /// body shortened the same way. Sizes are counted in bytes of the serialized payload, so
    /// multi-byte characters and JSON escapes count as what they cost.
    static func fittedAlertPayload(title: String?, body: String?, voip: JSONObject, policy: AppRoutingPolicy,
                                   id: String) -> [UInt8] {
        let limit = PushType.alert.maxPayloadBytes
        let callerName = text(voip.last("callerName")), caller = text(voip.last("caller"))
        func payload(nameCharacters: Int, textCharacters: Int?) -> [UInt8] {
            var (t, b) = (title, body)
            if t == nil || b == nil {
                let template = policy.fallbackAlert.render(callerName: callerName, caller: caller, keeping: nameCharacters)
                (t, b) = (t ?? template.title, b ?? template.body)
            }
            if let textCharacters {
                (t, b) = (FallbackTemplate.shortened(t!, to: textCharacters), FallbackTemplate.shortened(b!, to: textCharacters))
            }
            return alertPayload(title: t!, body: b!, sound: policy.fallbackAlert.sound, id: id)
        }
        let whole = payload(nameCharacters: FallbackTemplate.maxFilledCharacters, textCharacters: nil)
        if whole.count <= limit { return whole }
        if title == nil || body == nil,
           let k = largest(upTo: FallbackTemplate.maxFilledCharacters - 1, where: { payload(nameCharacters: $0, textCharacters: nil).count <= limit }) {
            return payload(nameCharacters: k, textCharacters: nil)
        }
        let longest = max(title?.count ?? 0, body?.count ?? 0)
        let k = largest(upTo: longest, where: { payload(nameCharacters: 0, textCharacters: $0).count <= limit }) ?? 0
        // The id (128 characters) and the sound (256 bytes) always leave room: this fits. Were
        // it ever over, the alert's push would refuse it and the call end without a fallback.
        return payload(nameCharacters: 0, textCharacters: k)
    }

    /// The largest `k` in `0 ... upper` for which `fits(k)` holds, by bisection (`fits` holds up
    /// to some `k` and not beyond); nil when not even `fits(0)` holds.
    private static func largest(upTo upper: Int, where fits: (Int) -> Bool) -> Int? {
        guard fits(0) else { return nil }
        var (low, high) = (0, upper)
        while low < high {
            let middle = low + (high - low + 1) / 2
            if fits(middle) { low = middle } else { high = middle - 1 }
        }
        return low
    }

    /// `{"aps":{"alert":{"title":…,"body":…},"sound":…},"id":…,"call_id":…}`; `sound` omitted
    /// when nil. `id` is the call id under the name the VoIP payload gives it (docs/app.md);
    /// `call_id`, the same id, is the name earlier versions used alone, kept for apps that read it.
    static func alertPayload(title: String, body: String, sound: String?, id: String) -> [UInt8] {
        var w = JSONWriter()
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
        return w.finish()
    }
}
