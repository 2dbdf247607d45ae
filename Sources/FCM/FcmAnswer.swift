import APNs
import Foundation

/// What a caller should do about an FCM answer. Each error code is classified exactly once, in
/// `FcmErrorCode.table`; the router reads this, never the code strings.
public enum FcmAnswerClass: String, Sendable, CaseIterable {
    /// The registration token is gone or belongs to another project: never retry it; feedback.
    case tokenInvalid
    /// Try again later, after `Retry-After` when FCM sent one: quota, server trouble.
    case retryable
    /// The access token was refused: renew it and send once more (the client does), then a
    /// credential problem.
    case renewAccessToken
    /// The service account or the project is wrong (or, for iOS through FCM, its APNs
    /// credential); a human must fix it, and every message of the credential fails alike.
    case credential
    /// This message is malformed for FCM; sending it again as is cannot succeed.
    case requestError
}

/// FCM's reason for a refused message: `error.details[].errorCode` of the `FcmError` detail,
/// else `error.status` (the Google API status, as for a refused access token).
///
/// Every code appears once, in `table`; an unknown code keeps its text and goes by HTTP status.
public enum FcmErrorCode: ReasonTable {
    case unspecified, invalidArgument, unregistered, senderIDMismatch, quotaExceeded, unavailable, internalError
    case thirdPartyAuthError, unauthenticated, permissionDenied, notFound, resourceExhausted
    case unknown(String, status: Int)

    /// The one table: code, FCM's string, the HTTP status FCM pairs it with, its class.
    public static let table: [(reason: FcmErrorCode, text: String, status: Int, kind: FcmAnswerClass)] = [
        (.unspecified, "UNSPECIFIED_ERROR", 400, .requestError),
        // Also a malformed message; `FcmResponse.kind` makes it `tokenInvalid` when it names the token.
        (.invalidArgument, "INVALID_ARGUMENT", 400, .requestError),
        (.unregistered, "UNREGISTERED", 404, .tokenInvalid),
        (.senderIDMismatch, "SENDER_ID_MISMATCH", 403, .tokenInvalid),
        (.quotaExceeded, "QUOTA_EXCEEDED", 429, .retryable),
        (.unavailable, "UNAVAILABLE", 503, .retryable),
        (.internalError, "INTERNAL", 500, .retryable),
        (.thirdPartyAuthError, "THIRD_PARTY_AUTH_ERROR", 401, .credential),
        // Google API statuses without an FcmError detail.
        (.unauthenticated, "UNAUTHENTICATED", 401, .renewAccessToken),
        (.permissionDenied, "PERMISSION_DENIED", 403, .credential),
        (.notFound, "NOT_FOUND", 404, .credential),
        (.resourceExhausted, "RESOURCE_EXHAUSTED", 429, .retryable),
    ]

    public static let rowsByText = index(of: table)

    public static func unlisted(text: String, status: Int) -> FcmErrorCode { .unknown(text, status: status) }

    public var unlistedSpelling: (text: String, status: Int)? {
        if case let .unknown(text, status) = self { return (text, status) }
        return nil
    }

    /// An unknown code by its status: 401 and 403 credential, 429 and 5xx retryable, anything
    /// else a request error.
    public static func kind(ofStatus status: Int) -> FcmAnswerClass {
        switch status {
        case 401, 403: return .credential
        case 429, 500...599: return .retryable
        default: return .requestError
        }
    }
}

/// FCM's answer to one message. A refusal is an answer, not an error.
public struct FcmResponse: Sendable, Equatable {
    public let status: Int
    /// Nil when accepted, or when the body named no code (the status then classifies).
    public let code: FcmErrorCode?
    /// `error.message`, its first 200 characters, for dead letters and logs (FCM's text, never a token).
    public let message: String?
    /// True when an `INVALID_ARGUMENT` names the registration token (`message.token` in the
    /// `BadRequest` field violations, or a message about the registration token).
    public let namesToken: Bool
    /// `Retry-After` in seconds, when FCM sent one (429, 503).
    public let retryAfterSeconds: Int64?
    /// The accepted message's name, `projects/P/messages/ID`.
    public let messageName: String?

    public init(status: Int, code: FcmErrorCode? = nil, message: String? = nil, namesToken: Bool = false,
                retryAfterSeconds: Int64? = nil, messageName: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.namesToken = namesToken
        self.retryAfterSeconds = retryAfterSeconds
        self.messageName = messageName
    }

    public var isAccepted: Bool { status == 200 }

    /// nil when accepted; otherwise the class of the code (or of the status when there is none),
    /// with an `INVALID_ARGUMENT` that names the token an invalid token.
    public var kind: FcmAnswerClass? {
        if isAccepted { return nil }
        if code == .invalidArgument, namesToken { return .tokenInvalid }
        return code?.kind ?? FcmErrorCode.kind(ofStatus: status)
    }

    /// The reason's text for records: the code, or the status.
    public var reasonText: String { code?.text ?? "HTTP \(status)" }

    /// Reads FCM's answer: `{"name": …}` on 200; on a refusal
    /// `{"error": {"code", "message", "status", "details": [{"@type": "…FcmError", "errorCode"}, {"@type": "…BadRequest", "fieldViolations": [{"field"}]}]}}`.
    /// Parsed with Foundation: refusals are rare, and a 200's body is read for its name only.
    public init(_ answer: ProviderPostAnswer) {
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body))) as? [String: Any]
        guard answer.status != 200 else {
            self.init(status: 200, messageName: object?["name"] as? String)
            return
        }
        let error = object?["error"] as? [String: Any]
        let details = error?["details"] as? [[String: Any]] ?? []
        let text = details.lazy.compactMap { $0["errorCode"] as? String }.first ?? error?["status"] as? String
        let message = (error?["message"] as? String).map { String($0.prefix(200)) }
        let violations = details.flatMap { $0["fieldViolations"] as? [[String: Any]] ?? [] }
        let namesToken = violations.contains { ($0["field"] as? String) == "message.token" }
            || (message?.lowercased().contains("registration token") ?? false)
        self.init(status: answer.status, code: text.map { FcmErrorCode(text: $0, status: answer.status) }, message: message,
                  namesToken: namesToken, retryAfterSeconds: answer.retryAfterSeconds)
    }
}
