import FCM

/// The FCM messages pushgw sends an Android phone (docs/protocol.md, "Android devices"), written
/// with the router's JSON writer like every APNs payload:
///
/// | message | kind | `android` | data |
/// |---|---|---|---|
/// | a ring | data only (the app's `FirebaseMessagingService` shows the call) | `priority: HIGH`, `ttl` the whole seconds left to the deadline, `collapse_key` the call id | the event's `voip` fields as strings, `type: incoming_call`, `id`, `deadline` |
/// | a missed call | notification, shown by Android | `priority: NORMAL`, `notification.tag` the call id (a repeat replaces it) | `type: missed_call`, `id` |
/// | the ring ended elsewhere | data only | `priority: HIGH`, `ttl` to the deadline, `collapse_key` the call id | `type: call_ended`, `id`, `ended` |
///
/// FCM's data values are strings: a string field is sent as it is, any other value as its JSON
/// text. Keys FCM reserves (`from`, `message_type`, and any starting with `google` or `gcm`) are
/// left out, as FCM would refuse the whole message for them.
enum FcmMessages {
    /// The ring of `event`'s Android device (`event.fcmToken`), as `ring(token:…)`.
    static func ring(_ event: CallEvent, nowMs: Int64, deadlineMs: Int64) -> FcmMessage? {
        guard let token = event.fcmToken, let android = event.android else { return nil }
        return ring(token: token, callID: event.id, deadlineMs: deadlineMs, nowMs: nowMs, fields: android.ringFields)
    }

    /// The missed-call notification of `event`'s Android device, kept by FCM until `windowEndMs`.
    static func missedCall(_ event: CallEvent, nowMs: Int64, windowEndMs: Int64) -> FcmMessage? {
        guard let token = event.fcmToken, let android = event.android else { return nil }
        return missedCall(token: token, callID: event.id, title: android.missedCallTitle, body: android.missedCallBody,
                          ttlSeconds: max(0, windowEndMs - nowMs) / 1000)
    }

    /// A ring of `callID` to `token` that lives no longer than the call: nil once `deadlineMs`
    /// is reached (a ring is never sent past its deadline). `fields` are the `voip` object's members.
    static func ring(token: String, callID: String, deadlineMs: Int64, nowMs: Int64, fields: [JSONMember]) -> FcmMessage? {
        guard let ttl = ttlSeconds(deadlineMs: deadlineMs, nowMs: nowMs) else { return nil }
        var data = fields.filter { !isReserved($0.key) && $0.key != "type" && $0.key != "id" && $0.key != "deadline" }
            .map { JSONMember(key: $0.key, value: .string(JSONFields.text($0.value) ?? jsonText($0.value))) }
        data.append(JSONMember(key: "type", value: .string("incoming_call")))
        data.append(JSONMember(key: "id", value: .string(callID)))
        data.append(JSONMember(key: "deadline", value: .string(String(deadlineMs))))
        return message(token: token) { m in
            m.object("android") { a in
                a.string("priority", "HIGH")
                a.string("ttl", "\(ttl)s")
                a.string("collapse_key", callID)
            }
            m.sorted("data", data)
        }
    }

    /// The missed-call notification: Android shows it (title, body), a later one for the same
    /// call replaces it (`tag`); it may wait on FCM up to `ttlSeconds` (the app's alert TTL).
    static func missedCall(token: String, callID: String, title: String, body: String, ttlSeconds: Int64) -> FcmMessage? {
        message(token: token) { m in
            m.object("notification") { n in
                n.string("title", title)
                n.string("body", body)
            }
            m.object("android") { a in
                a.string("priority", "NORMAL")
                a.string("ttl", "\(max(0, ttlSeconds))s")
                a.object("notification") { n in n.string("tag", callID) }
            }
            m.sorted("data", [JSONMember(key: "id", value: .string(callID)), JSONMember(key: "type", value: .string("missed_call"))])
        }
    }

    /// Tells a rung phone the call was answered, declined or cancelled elsewhere (`ended`):
    /// nil once the deadline is reached (the phone stopped ringing by itself then).
    static func callEnded(token: String, callID: String, ended: String, deadlineMs: Int64, nowMs: Int64) -> FcmMessage? {
        guard let ttl = ttlSeconds(deadlineMs: deadlineMs, nowMs: nowMs) else { return nil }
        return message(token: token) { m in
            m.object("android") { a in
                a.string("priority", "HIGH")
                a.string("ttl", "\(ttl)s")
                a.string("collapse_key", callID)
            }
            m.sorted("data", [JSONMember(key: "ended", value: .string(ended)), JSONMember(key: "id", value: .string(callID)),
                              JSONMember(key: "type", value: .string("call_ended"))])
        }
    }

    /// The whole seconds left until `deadlineMs`, rounded down so FCM never keeps a ring past
    /// it (0: "now or never"); nil when it has come.
    static func ttlSeconds(deadlineMs: Int64, nowMs: Int64) -> Int64? {
        deadlineMs > nowMs ? (deadlineMs - nowMs) / 1000 : nil
    }

    static func isReserved(_ key: String) -> Bool {
        key == "from" || key == "message_type" || key.hasPrefix("google") || key.hasPrefix("gcm")
    }

    private static func jsonText(_ value: JSONValue) -> String {
        var w = JSONWriter()
        w.value(value)
        return String(decoding: w.finish(), as: UTF8.self)
    }

    /// `{"message":{"token":…, …}}`; nil when FCM's client refuses the token or the size.
    private static func message(token: String, _ body: (inout ObjectWriter) -> Void) -> FcmMessage? {
        var w = JSONWriter(capacity: 512)
        w.object { root in
            root.object("message") { m in
                m.string("token", token)
                body(&m)
            }
        }
        return FcmMessage(token: token, body: w.finish())
    }
}

/// What a call's Android devices are sent besides their tokens, worked out once when the event
/// is decoded (`CallEvent.android`): the ring's data fields (the event's `voip` members, as the
/// VoIP payload has them) and the missed-call notification's title and body (the event's
/// `alert`, else the app's template, as for the iPhone's alert). Immutable.
public final class AndroidCall: Equatable, Sendable {
    let ringFields: [JSONMember]
    let missedCallTitle: String
    let missedCallBody: String

    init(voip: JSONObject, id: String, deadlineMs: Int64, title: String?, body: String?, policy: AppRoutingPolicy) {
        ringFields = voip.unique
        let callerName = JSONFields.text(voip.last("callerName")), caller = JSONFields.text(voip.last("caller"))
        let template = policy.fallbackAlert.render(callerName: callerName, caller: caller)
        missedCallTitle = title ?? template.title
        missedCallBody = body ?? template.body
    }

    public static func == (a: AndroidCall, b: AndroidCall) -> Bool {
        a === b || (a.ringFields == b.ringFields && a.missedCallTitle == b.missedCallTitle && a.missedCallBody == b.missedCallBody)
    }
}
