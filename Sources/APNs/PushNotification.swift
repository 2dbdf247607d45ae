import EventLoop
import Foundation

/// One push to send: the device token, the headers and the payload, checked at creation so a
/// push that APNs would refuse for its form never leaves the process.
///
/// A value type: build it, hand it to `ApnsClient.send`, and read the answer from the
/// `PushNotificationResponse`.
public struct PushNotification: Sendable, Equatable {
    /// The device token in hex, lower-cased, at most `maxTokenHexDigits` digits.
    public var deviceToken: String { fields.deviceToken }
    /// `apns-topic`: the bundle id plus the push type's suffix; visible ASCII, at most
    /// `maxTopicBytes` bytes.
    public var topic: String { fields.topic }
    /// `apns-push-type`.
    public var pushType: PushType { fields.pushType }
    /// The JSON body, sent as is.
    public var payload: [UInt8] { fields.payload }
    /// `apns-priority`.
    public var priority: Priority { fields.priority }
    /// `apns-expiration` in unix seconds; 0 = deliver once or never; nil = Apple's storage policy.
    public var expiration: Int64? { fields.expiration }
    /// `apns-id` (lower-case canonical UUID); nil lets APNs generate one.
    public var apnsID: String? { fields.apnsID }
    /// `apns-collapse-id`, at most 64 bytes of UTF-8.
    public var collapseID: String? { fields.collapseID }

    /// Every field in one immutable object: a push is copied into its plan, its call's action,
    /// the client's queue and its in-flight table, and a copy is then one retain, not one per
    /// token, topic, payload and id.
    private final class Fields: Sendable {
        let deviceToken: String
        let topic: String
        let pushType: PushType
        let payload: [UInt8]
        let priority: Priority
        let expiration: Int64?
        let apnsID: String?
        let collapseID: String?

        init(deviceToken: String, topic: String, pushType: PushType, payload: [UInt8], priority: Priority, expiration: Int64?,
             apnsID: String?, collapseID: String?) {
            self.deviceToken = deviceToken
            self.topic = topic
            self.pushType = pushType
            self.payload = payload
            self.priority = priority
            self.expiration = expiration
            self.apnsID = apnsID
            self.collapseID = collapseID
        }
    }

    private let fields: Fields

    public static func == (a: PushNotification, b: PushNotification) -> Bool {
        a.fields === b.fields
            || (a.deviceToken == b.deviceToken && a.topic == b.topic && a.pushType == b.pushType && a.payload == b.payload
                && a.priority == b.priority && a.expiration == b.expiration && a.apnsID == b.apnsID && a.collapseID == b.collapseID)
    }

    /// The longest device token accepted, in hex digits (200 bytes). Apple fixes no length
    /// ("don't make assumptions about device token size"): today's tokens are 32 bytes (64
    /// digits) and Live Activity tokens have been seen at 80 bytes (160 digits). 400 leaves
    /// 2.5 times the longest seen, and keeps a hostile token from growing the request headers
    /// (the token is part of `:path`) without bound.
    public static let maxTokenHexDigits = 400
    /// The longest `apns-topic` accepted, in bytes: a bundle id (at most 255 characters, the
    /// config's limit) plus the longest push-type suffix, with room to spare.
    public static let maxTopicBytes = 320

    /// Builds a push for `bundleID`, deriving the topic from the push type. Throws
    /// `PushNotificationError` for anything APNs would refuse for its form (token not hex,
    /// payload over the type's limit, collapse id over 64 bytes, a priority the type forbids).
    public init(deviceToken: String, bundleID: String, pushType: PushType, payload: [UInt8],
                priority: Priority? = nil, expiration: Int64? = nil, apnsID: String? = nil,
                collapseID: String? = nil) throws(PushNotificationError) {
        try self.init(deviceToken: deviceToken, topic: pushType.topic(bundleID: bundleID), pushType: pushType,
                      payload: payload, priority: priority, expiration: expiration, apnsID: apnsID,
                      collapseID: collapseID)
    }

    /// Builds a push with an explicit topic (for MDM, or to test what APNs says to a wrong one).
    public init(deviceToken: String, topic: String, pushType: PushType, payload: [UInt8],
                priority: Priority? = nil, expiration: Int64? = nil, apnsID: String? = nil,
                collapseID: String? = nil) throws(PushNotificationError) {
        let digits = deviceToken.utf8.count
        guard digits <= PushNotification.maxTokenHexDigits else {
            throw .deviceTokenTooLong(digits: digits, limit: PushNotification.maxTokenHexDigits)
        }
        guard let token = PushNotification.lowerCaseHexToken(deviceToken) else { throw .invalidDeviceToken }
        guard PushNotification.isTopic(topic) else { throw .invalidTopic(bytes: topic.utf8.count) }
        guard !payload.isEmpty else { throw .emptyPayload }
        guard payload.count <= pushType.maxPayloadBytes else {
            throw .payloadTooLarge(size: payload.count, limit: pushType.maxPayloadBytes)
        }
        let priority = priority ?? pushType.defaultPriority
        guard pushType.allows(priority) else { throw .priorityNotAllowed(priority, pushType) }
        if let collapseID, collapseID.utf8.count > 64 { throw .collapseIDTooLong(bytes: collapseID.utf8.count) }
        if let apnsID, !PushNotification.isCanonicalUUID(apnsID) { throw .invalidApnsID(apnsID) }
        if let expiration, expiration < 0 { throw .invalidExpiration(expiration) }
        fields = Fields(deviceToken: token, topic: topic, pushType: pushType, payload: payload, priority: priority,
                        expiration: expiration, apnsID: apnsID, collapseID: collapseID)
    }

    /// True for a non-empty, even-length string of hex digits.
    public static func isHexToken(_ token: String) -> Bool {
        hexShape(token).valid
    }

    /// The lower-case spelling of a hex token (hex is case-insensitive: one token has one
    /// spelling), or nil when `token` is not a non-empty, even-length string of hex digits. A
    /// token in lower case already is returned as it is, without a copy.
    public static func lowerCaseHexToken(_ token: String) -> String? {
        let shape = hexShape(token)
        guard shape.valid else { return nil }
        return shape.upperCase ? token.lowercased() : token
    }

    /// One pass over the bytes: whether `token` is a valid hex token, and whether it has
    /// upper-case digits.
    private static func hexShape(_ token: String) -> (valid: Bool, upperCase: Bool) {
        return token.withUTF8Bytes { utf8 in
            guard !utf8.isEmpty && utf8.count % 2 == 0 else { return (false, false) }
            var upperCase = false
            // Eight bytes at a time (every call's token is checked twice, ~1,400 instructions
            // byte by byte for 64 digits): `range` marks, in each byte's top bit, the bytes
            // within lo...hi. It holds for bytes below 0x80 only, so a word with a byte above
            // that goes to the byte loop, which refuses it.
            let base = UnsafeRawPointer(utf8.baseAddress!)
            var k = 0
            while utf8.count - k >= 8 {
                let w = base.loadUnaligned(fromByteOffset: k, as: UInt64.self)
                guard w & Self.topBits == 0 else { break }
                let upper = Self.range(w, 0x41, 0x46)
                guard Self.range(w, 0x30, 0x39) | Self.range(w, 0x61, 0x66) | upper == Self.topBits else { break }
                if upper != 0 { upperCase = true }
                k += 8
            }
            for c in UnsafeBufferPointer(rebasing: utf8[k...]) {
                // 0-9 or a-f, the common case, first; then A-F.
                if isLowerCaseHexDigit(c) { continue }
                guard isUpperCaseHexLetter(c) else { return (false, false) }
                upperCase = true
            }
            return (true, upperCase)
        }
    }

    /// True for a non-empty topic of visible ASCII (no space, no control character) of at most
    /// `maxTopicBytes` bytes: what a header value may carry and a bundle id can be.
    public static func isTopic(_ topic: String) -> Bool {
        // Over the contiguous bytes, as `hexShape`: every push checks its topic, and walking
        // the `UTF8View` cost ~30 instructions a byte.
        return topic.withUTF8Bytes { utf8 in
            guard !utf8.isEmpty && utf8.count <= maxTopicBytes else { return false }
            for c in utf8 where c &- 0x21 >= 0x5E { return false }
            return true
        }
    }

    /// True for a lower-case 8-4-4-4-12 hex UUID, the only form `apns-id` accepts.
    public static func isCanonicalUUID(_ s: String) -> Bool {
        let u = Array(s.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !isLowerCaseHexDigit(c) {
                return false
            }
        }
        return true
    }

    /// 0-9 or a-f. `c &- x < n` is `x <= c < x + n` in one comparison: below `x` the
    /// subtraction wraps around to 256 - something, far above `n`.
    @inline(__always)
    private static func isLowerCaseHexDigit(_ c: UInt8) -> Bool {
        c &- UInt8(ascii: "0") < 10 || c &- UInt8(ascii: "a") < 6
    }

    /// A-F.
    @inline(__always)
    private static func isUpperCaseHexLetter(_ c: UInt8) -> Bool {
        c &- UInt8(ascii: "A") < 6
    }

    private static let topBits: UInt64 = 0x8080_8080_8080_8080

    /// For a word of bytes below 0x80: the top bit of each byte set when the byte is within
    /// lo...hi, the other bits clear. Adding 0x80 - lo sets a byte's top bit when it is at
    /// least lo, adding 0x7F - hi when it is above hi; neither carries into the next byte.
    @inline(__always)
    private static func range(_ w: UInt64, _ lo: UInt8, _ hi: UInt8) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let atLeastLo = (w &+ ones &* UInt64(0x80 - lo)) & topBits
        let aboveHi = (w &+ ones &* UInt64(0x7F - hi)) & topBits
        return atLeastLo & ~aboveHi
    }
}

/// Why a push could not be built: each case is something APNs would refuse, caught before sending.
public enum PushNotificationError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidDeviceToken
    case deviceTokenTooLong(digits: Int, limit: Int)
    case invalidTopic(bytes: Int)
    case emptyPayload
    case payloadTooLarge(size: Int, limit: Int)
    case priorityNotAllowed(Priority, PushType)
    case collapseIDTooLong(bytes: Int)
    case invalidApnsID(String)
    case invalidExpiration(Int64)

    public var description: String {
        switch self {
        case .invalidDeviceToken: return "device token is not an even-length hex string"
        case let .deviceTokenTooLong(digits, limit): return "device token is \(digits) hex digits, over the \(limit)-digit limit"
        case let .invalidTopic(bytes):
            return "apns-topic (\(bytes) bytes) is not 1-\(PushNotification.maxTopicBytes) bytes of visible ASCII"
        case .emptyPayload: return "payload is empty"
        case let .payloadTooLarge(size, limit): return "payload is \(size) bytes, over the \(limit)-byte limit"
        case let .priorityNotAllowed(p, t): return "priority \(p.rawValue) is not allowed for \(t.rawValue) pushes"
        case let .collapseIDTooLong(bytes): return "apns-collapse-id is \(bytes) bytes, over 64"
        case let .invalidApnsID(id): return "apns-id \(id) is not a lower-case canonical UUID"
        case let .invalidExpiration(e): return "apns-expiration \(e) is negative"
        }
    }
}
