/// What a caller should do about an APNs answer. Each reason is classified exactly once, in
/// `ApnsReason.table`; retry workers and the router read this, never the reason strings.
public enum ReasonClass: String, Sendable, CaseIterable {
    /// The device token is gone or wrong: never retry it; report it as feedback.
    case tokenInvalid
    /// The token is not valid in the environment it was sent to: it is wrong, or it belongs to
    /// the other environment (a development build's token sent to production, or the
    /// reverse: Apple answers both with `BadDeviceToken`). Try it once in the other
    /// environment before calling it invalid.
    case tokenInvalidHere
    /// Try again later (with backoff): throttling, server trouble, shutdown.
    case retryable
    /// The credential or the app's configuration is wrong; a human must fix it, and other
    /// pushes of the same app will fail the same way.
    case credentialOrConfig
    /// This request is malformed for APNs; sending it again as is cannot succeed.
    case requestError
}

/// Apple's `reason` string of a rejected push, with its HTTP status and class.
///
/// Every reason string of Apple's response table appears once, in `table`;
/// an unknown string keeps its text and is classified by its HTTP status.
public enum ApnsReason: ReasonTable {
    case badCollapseId, badDeviceToken, badExpirationDate, badMessageId, badPriority, badTopic
    case deviceTokenNotForTopic, duplicateHeaders, idleTimeout, invalidPushType, missingDeviceToken
    case missingTopic, payloadEmpty, topicDisallowed
    case badCertificate, badCertificateEnvironment, expiredProviderToken, forbidden
    case invalidProviderToken, missingProviderToken, unrelatedKeyIdInToken
    case badEnvironmentKeyIdInToken, badEnvironmentKeyInToken
    case badPath, methodNotAllowed
    case expiredToken, unregistered
    case payloadTooLarge
    case tooManyProviderTokenUpdates, tooManyRequests
    case internalServerError, serviceUnavailable, shutdown
    /// A reason not in Apple's table as known to pushgw; `status` is the HTTP status it came with.
    case unknown(String, status: Int)

    /// The one table: reason, Apple's string, the HTTP status Apple pairs it with, its class.
    public static let table: [(reason: ApnsReason, text: String, status: Int, kind: ReasonClass)] = [
        (.badCollapseId, "BadCollapseId", 400, .requestError),
        // Also a token of the other environment (Apple's response table): see `tokenInvalidHere`.
        (.badDeviceToken, "BadDeviceToken", 400, .tokenInvalidHere),
        (.badExpirationDate, "BadExpirationDate", 400, .requestError),
        (.badMessageId, "BadMessageId", 400, .requestError),
        (.badPriority, "BadPriority", 400, .requestError),
        (.badTopic, "BadTopic", 400, .credentialOrConfig),
        (.deviceTokenNotForTopic, "DeviceTokenNotForTopic", 400, .tokenInvalid),
        (.duplicateHeaders, "DuplicateHeaders", 400, .requestError),
        (.idleTimeout, "IdleTimeout", 400, .retryable),
        (.invalidPushType, "InvalidPushType", 400, .requestError),
        (.missingDeviceToken, "MissingDeviceToken", 400, .requestError),
        (.missingTopic, "MissingTopic", 400, .credentialOrConfig),
        (.payloadEmpty, "PayloadEmpty", 400, .requestError),
        (.topicDisallowed, "TopicDisallowed", 400, .credentialOrConfig),
        (.badCertificate, "BadCertificate", 403, .credentialOrConfig),
        (.badCertificateEnvironment, "BadCertificateEnvironment", 403, .credentialOrConfig),
        // Renewed and resent by the client itself; reaches callers only if renewal keeps failing.
        (.expiredProviderToken, "ExpiredProviderToken", 403, .retryable),
        (.forbidden, "Forbidden", 403, .credentialOrConfig),
        (.invalidProviderToken, "InvalidProviderToken", 403, .credentialOrConfig),
        (.missingProviderToken, "MissingProviderToken", 403, .credentialOrConfig),
        (.unrelatedKeyIdInToken, "UnrelatedKeyIdInToken", 403, .credentialOrConfig),
        (.badEnvironmentKeyIdInToken, "BadEnvironmentKeyIdInToken", 403, .credentialOrConfig),
        // Seen from APNs in 2025 but not in Apple's table; status unverified.
        (.badEnvironmentKeyInToken, "BadEnvironmentKeyInToken", 403, .credentialOrConfig),
        (.badPath, "BadPath", 404, .requestError),
        (.methodNotAllowed, "MethodNotAllowed", 405, .requestError),
        (.expiredToken, "ExpiredToken", 410, .tokenInvalid),
        (.unregistered, "Unregistered", 410, .tokenInvalid),
        (.payloadTooLarge, "PayloadTooLarge", 413, .requestError),
        (.tooManyProviderTokenUpdates, "TooManyProviderTokenUpdates", 429, .retryable),
        (.tooManyRequests, "TooManyRequests", 429, .retryable),
        (.internalServerError, "InternalServerError", 500, .retryable),
        (.serviceUnavailable, "ServiceUnavailable", 503, .retryable),
        (.shutdown, "Shutdown", 503, .retryable),
    ]

    public static let rowsByText = index(of: table)

    public static func unlisted(text: String, status: Int) -> ApnsReason { .unknown(text, status: status) }

    public var unlistedSpelling: (text: String, status: Int)? {
        if case let .unknown(text, status) = self { return (text, status) }
        return nil
    }

    /// Unknown reasons go by status: 410 token, 403 credential, 429 and 5xx retryable,
    /// anything else a request error.
    public static func kind(ofStatus status: Int) -> ReasonClass {
        switch status {
        case 410: return .tokenInvalid
        case 403: return .credentialOrConfig
        case 429, 500...599: return .retryable
        default: return .requestError
        }
    }
}
