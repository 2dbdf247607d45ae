import APNs
import Retry

/// How Routing treats the calls of one app: the bundle id its pushes go to, how long a call
/// rings, how patient each channel is, and the "missed call" alert used when an event brings
/// none. A plain value built by `AppRuntime` from the app's config entry (config/README.md); all
/// durations are milliseconds.
public struct AppRoutingPolicy: Equatable, Sendable {
    /// The app id (the `{APP}` of the Redis keys); written as `app` in outcome records.
    public var appID: String
    /// Bundle id without suffix: alert pushes use it as `apns-topic`, VoIP pushes add `.voip`.
    public let bundleID: String
    /// `apns-topic` of the app's VoIP pushes, built once rather than per push.
    public let voipTopic: String
    /// The environment of tokens whose event does not say `sandbox`.
    public var environment: ApnsEnvironment
    /// The app's credential can push to both APNs environments (token auth; a universal
    /// certificate): a `BadDeviceToken` is then tried once in the other environment before
    /// the token is called invalid (docs/protocol.md, *Feedback*).
    public var reachesBothEnvironments: Bool
    /// How long a call rings when its event has no `deadline`, counted from the stream entry.
    public var ringTimeoutMs: Int64
    /// VoIP retries; also bounded by the call's deadline.
    public var voipRetry: RetryPolicy
    /// Alert retries; also bounded by `alertTTLMs`.
    public var alertRetry: RetryPolicy
    /// How long a fallback alert stays deliverable, counted from the moment the fallback starts:
    /// it is the alert's `apns-expiration` and the end of its retry window.
    public var alertTTLMs: Int64
    /// The alert sent when an event carries no `alert` object, and the sound of every alert.
    public var fallbackAlert: FallbackTemplate
    /// Which devices of a call get the missed-call alert (config `missed_call_alert`,
    /// docs/protocol.md, *Devices*).
    public var missedCallAlert: MissedCallAlert
    /// With ring receipts on (config `ring_receipt_timeout_ms`, docs/protocol.md, *Ring
    /// receipts*): how long after APNs accepted a device's VoIP push its `call_ringing` is
    /// expected before the device is escalated (one more VoIP push, then its alert). Nil: off,
    /// the default; nothing waits for receipts.
    public var ringReceiptTimeoutMs: Int64?
    /// With ring receipts on (config `voip_suspected_after_silent_rings`, docs/protocol.md,
    /// *The guard against the silent VoIP ban*): after this many silent rings in a row (a VoIP
    /// push accepted, no receipt) a VoIP token is suspected of iOS's silent ban and its calls go
    /// straight to the alert; and when this many calls in a row of the app heard no receipt
    /// from any device, the app's receipts are missing (its backend stopped sending them) and
    /// no token is suspected. Meaningless with receipts off.
    public var voipSuspectedAfterSilentRings: Int
    /// The app's FCM credential (config `fcm_credential`); nil: the app has no Android devices,
    /// and an event carrying an `fcm_token` is refused naming the fix.
    public var fcmCredential: String?

    public init(appID: String, bundleID: String, environment: ApnsEnvironment = .production,
                reachesBothEnvironments: Bool = true, ringTimeoutMs: Int64 = 30_000,
                voipRetry: RetryPolicy = RetryPolicy(maxAttempts: 4, baseMs: 100, capMs: 2_000),
                alertRetry: RetryPolicy = RetryPolicy(maxAttempts: 8, baseMs: 500, capMs: 60_000),
                alertTTLMs: Int64 = 86_400_000, fallbackAlert: FallbackTemplate = FallbackTemplate(),
                missedCallAlert: MissedCallAlert = .undelivered, ringReceiptTimeoutMs: Int64? = nil,
                voipSuspectedAfterSilentRings: Int = 3, fcmCredential: String? = nil) {
        self.fcmCredential = fcmCredential
        self.appID = appID
        self.bundleID = bundleID
        self.voipTopic = PushType.voip.topic(bundleID: bundleID)
        self.environment = environment
        self.reachesBothEnvironments = reachesBothEnvironments
        self.ringTimeoutMs = ringTimeoutMs
        self.voipRetry = voipRetry
        self.alertRetry = alertRetry
        self.alertTTLMs = alertTTLMs
        self.fallbackAlert = fallbackAlert
        self.missedCallAlert = missedCallAlert
        self.ringReceiptTimeoutMs = ringReceiptTimeoutMs
        self.voipSuspectedAfterSilentRings = voipSuspectedAfterSilentRings
    }
}

/// When a device of a call gets the missed-call alert (the app's `missed_call_alert`).
public enum MissedCallAlert: String, Equatable, Sendable, CaseIterable {
    /// The default, and the only behaviour before devices: a device whose VoIP push could not
    /// be delivered (token gone, retries out, deadline) gets the alert as its fallback.
    case undelivered
    /// For producers that send `call_answered`: when the deadline passes and no device
    /// answered (nor declined, nor the caller cancelled), each device with a usable alert
    /// token gets one missed-call alert; a VoIP failure alone sends none.
    case unanswered
}

/// The app's "missed call" alert. `{callerName}` and `{caller}` in title and body are filled
/// from the event's `voip` dictionary (string values, or a number's JSON text). A missing
/// `callerName` falls back to `caller` and the other way round; with neither, `unknownCaller`
/// is used. Each filled value is cut to `maxFilledCharacters`; an alert still over APNs'
/// 4096-byte limit (256 emoji of 25 bytes each) is fitted by `CallEvent.decode`, which renders
/// it again with the name shortened further (`render(callerName:caller:keeping:)`).
public struct FallbackTemplate: Equatable, Sendable {
    public var title: String
    public var body: String
    /// `aps.sound` of every fallback alert (event-supplied ones too); nil sends a silent alert.
    public var sound: String?
    /// What `{callerName}` and `{caller}` become when the event names nobody.
    public var unknownCaller: String

    public static let maxFilledCharacters = 256
    /// The longest title or body a config may give the template, and the longest sound name,
    /// in bytes: with the call id they leave room in a 4096-byte alert.
    public static let maxTextBytes = 1024
    public static let maxSoundBytes = 256

    public init(title: String = "Missed call", body: String = "{callerName} tried to call you",
                sound: String? = "default", unknownCaller: String = "Someone") {
        self.title = title
        self.body = body
        self.sound = sound
        self.unknownCaller = unknownCaller
    }

    /// Title and body with the placeholders filled from `callerName` and `caller`.
    ///
    /// `keeping` below `maxFilledCharacters` shortens each filled value to that many characters
    /// followed by `…` (to fit the alert in its byte limit).
    public func render(callerName: String?, caller: String?,
                       keeping: Int = FallbackTemplate.maxFilledCharacters) -> (title: String, body: String) {
        func usable(_ s: String?) -> String? {
            guard let s, !s.isEmpty else { return nil }
            // No more bytes than the limit: no more characters either, nothing to cut.
            if s.utf8.count <= keeping { return s }
            if keeping >= FallbackTemplate.maxFilledCharacters { return String(s.prefix(FallbackTemplate.maxFilledCharacters)) }
            return FallbackTemplate.shortened(s, to: keeping)
        }
        let name = usable(callerName) ?? usable(caller) ?? unknownCaller
        let number = usable(caller) ?? usable(callerName) ?? unknownCaller
        return (FallbackTemplate.fill(title, name: name, number: number),
                FallbackTemplate.fill(body, name: name, number: number))
    }

    /// `s` cut to its first `characters` characters followed by `…`, or `s` when it is no longer.
    public static func shortened(_ s: String, to characters: Int) -> String {
        guard let end = s.index(s.startIndex, offsetBy: characters, limitedBy: s.endIndex), end != s.endIndex else { return s }
        return s[..<end] + "…"
    }

    /// One pass over `s`, so a caller name that itself contains `{caller}` is left as it is.
    private static func fill(_ s: String, name: String, number: String) -> String {
        if let filled = fillASCII(s, name: name, number: number) { return filled }
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

    /// `fill` on the bytes of an ASCII template (nil for any other): there every character is
    /// one byte, or CR LF, which holds no brace, so the byte scan finds what the character
    /// scan above finds, at a fraction of the cost. A template without `{` is returned as is.
    private static func fillASCII(_ template: String, name: String, number: String) -> String? {
        var template = template, name = name, number = number
        var ascii = true, braces = 0
        let filled: String? = template.withUTF8 { t in
            for c in t {
                if c >= 0x80 { ascii = false }
                if c == UInt8(ascii: "{") { braces += 1 }
            }
            guard ascii && braces > 0 else { return nil }
            return name.withUTF8 { n in
                number.withUTF8 { m in
                    // Every placeholder starts with a brace.
                    let capacity = t.count + braces * max(n.count, m.count)
                    return String(unsafeUninitializedCapacity: capacity) { out in
                        var o = 0
                        func put(_ bytes: UnsafeBufferPointer<UInt8>) {
                            for b in bytes {
                                out[o] = b
                                o += 1
                            }
                        }
                        var k = 0
                        while k < t.count {
                            if t[k] == UInt8(ascii: "{") && at(t, k, "{callerName}") {
                                put(n)
                                k += "{callerName}".utf8.count
                            } else if t[k] == UInt8(ascii: "{") && at(t, k, "{caller}") {
                                put(m)
                                k += "{caller}".utf8.count
                            } else {
                                out[o] = t[k]
                                o += 1
                                k += 1
                            }
                        }
                        return o
                    }
                }
            }
        }
        guard ascii else { return nil }
        return filled ?? template
    }

    /// True when `word` is at `k` in `t`.
    private static func at(_ t: UnsafeBufferPointer<UInt8>, _ k: Int, _ word: StaticString) -> Bool {
        let n = word.utf8CodeUnitCount
        guard t.count - k >= n else { return false }
        for j in 0..<n where t[k + j] != word.utf8Start[j] { return false }
        return true
    }
}

/// An app's policy held by reference: the call's machine and each of its devices' routers
/// follow one copy, and copying a machine or a router (every step of a call does) moves one
/// reference, not the policy's ~230 bytes and their strings.
public final class SharedRoutingPolicy: Sendable {
    public let value: AppRoutingPolicy

    public init(_ value: AppRoutingPolicy) { self.value = value }
}
