import APNs
import FCM

/// What the runner (`RouterRole`) must do after one event of a `CallRouter`: an optional token
/// feedback, then one step. The runner performs it and reports back (`apnsAnswered`,
/// `apnsFailed`, `cancelReceived`; a retry comes back through `resume`); it decides nothing
/// itself.
public struct CallAction: Equatable, Sendable {
    /// Write this to the feedback stream and remember the token as invalid since its timestamp;
    /// done before `step`.
    public var feedback: TokenFeedback?
    /// The one thing to do next.
    public var step: Step

    /// What the runner does next for the call. The pushes are inline (a plan is ~50 bytes; a
    /// box would cost an allocation for every push of every call); the records, once per
    /// call and ~250 bytes, are indirect, so an action stays small as it is returned.
    public enum Step: Equatable, Sendable {
        /// Nothing (a dropped retry coming due, a cancel that waits for the push in flight, …).
        case none
        /// Send this VoIP push, then call `apnsAnswered` or `apnsFailed`.
        case sendVoip(PushPlan)
        /// Send this alert push (the fallback, for `cause`), then call `apnsAnswered` or `apnsFailed`.
        case sendAlert(PushPlan, cause: FallbackCause)
        /// The call was cancelled while its push is with the APNs client: take the push back
        /// if it is not written yet (`ApnsClient.withdraw`; it then fails with `.withdrawn`,
        /// which is not an attempt). A push already written is left to its answer.
        case withdrawPush
        /// Keep the router's `waiting` snapshot in the durable retry schedule (which
        /// acknowledges the entry); at `RetryPlan.atMs` a fresh router, in any process, continues
        /// from it with `resume`.
        case scheduleRetry(RetryPlan)
        /// Write the record to the results stream, then acknowledge the entry. Final.
        indirect case finish(OutcomeRecord)
        /// Write the dead letter (the event, the record's attempts, the reason) and its record
        /// to the results stream, mark the app unhealthy if asked, then acknowledge. Final.
        indirect case deadLetter(DeadLetter)
        /// A `call_cancelled` (or `call_answered`, `call_declined`) event: record that call `record.id` is cancelled (so its pending
        /// retries and any later `incoming_call` for it stop, and a live router of that call gets
        /// `cancelReceived`), write the record for the cancel event, acknowledge. Final.
        indirect case cancelCall(OutcomeRecord)
        /// The event's id was already finished (a producer's re-send, a redelivery, a second
        /// cancel): write this record (outcome `duplicate`, `firstOutcome` = the recorded one) to
        /// the results stream without touching the recorded outcome, and acknowledge. Nothing
        /// is sent. Final.
        indirect case acknowledgeDuplicate(OutcomeRecord)
    }

    public init(feedback: TokenFeedback? = nil, step: Step) {
        self.feedback = feedback
        self.step = step
    }

    /// No feedback, nothing to do.
    public static let none = CallAction(step: .none)
}

/// One push to send for a call: which channel, which attempt, and the provider's message.
public struct PushPlan: Equatable, Sendable {
    public let channel: PushChannel
    /// 1 for the first attempt on this channel.
    public let attempt: Int
    /// What goes to the provider.
    public let message: ProviderMessage
    /// Unix ms at and after which the push must not be written (the call's deadline, for a
    /// ring: one waiting in the provider client's queue past it is never sent).
    public var writeByUnixMs: Int64? = nil

    /// A push for APNs.
    public init(channel: PushChannel, attempt: Int, environment: ApnsEnvironment, notification: PushNotification,
                writeByUnixMs: Int64? = nil) {
        self.channel = channel
        self.attempt = attempt
        self.message = .apns(notification, environment: environment)
        self.writeByUnixMs = writeByUnixMs
    }

    /// A message for FCM.
    public init(channel: PushChannel, attempt: Int, fcm message: FcmMessage, writeByUnixMs: Int64? = nil) {
        self.channel = channel
        self.attempt = attempt
        self.message = .fcm(message)
        self.writeByUnixMs = writeByUnixMs
    }

    /// The APNs push; nil for an FCM message.
    public var notification: PushNotification? {
        guard case let .apns(notification, _) = message else { return nil }
        return notification
    }

    /// The APNs environment the push goes to; nil for an FCM message.
    public var environment: ApnsEnvironment? {
        guard case let .apns(_, environment) = message else { return nil }
        return environment
    }

    public var provider: PushProvider {
        switch message {
        case .apns: return .apns
        case .fcm: return .fcm
        }
    }
}

/// A push as its provider takes it.
public enum ProviderMessage: Equatable, Sendable {
    /// To APNs, in `environment` (the event's `sandbox`, else the app's). VoIP: topic
    /// `<bundle>.voip`, type voip, priority 10, `apns-expiration` = the deadline in unix
    /// seconds, rounded down (so APNs never holds it past the deadline), no collapse id, no
    /// `apns-id` (APNs generates one). Alert: topic = bundle id, type alert, priority 10,
    /// `apns-expiration` = the fallback's start + the alert TTL, rounded down.
    case apns(PushNotification, environment: ApnsEnvironment)
    /// To FCM (`FcmMessages`: the ring, the missed-call notification, `call_ended`).
    case fcm(FcmMessage)
}

/// A retry to fire later: `CallRouter.resume` from the router's `waiting` snapshot at `atMs`.
public struct RetryPlan: Equatable, Sendable {
    public let channel: PushChannel
    /// The number the retried attempt will have on its channel (2 for the first retry).
    public let attempt: Int
    /// When to retry, unix ms.
    public let atMs: Int64
    /// The backoff that produced `atMs` (for logs and metrics).
    public let delayMs: Int64
}

/// What APNs said about a token: one entry of the feedback stream (docs/protocol.md). A token
/// APNs declared invalid is also remembered as invalid since `timestampMs`, so later events
/// skip it unless re-registered after; a token of the other environment (`environment` set) is not.
public struct TokenFeedback: Equatable, Sendable {
    public let token: String
    public let channel: PushChannel
    /// Apple's reason text (`Unregistered`, `BadDeviceToken`, …), FCM's code (`UNREGISTERED`,
    /// `SENDER_ID_MISMATCH`, `INVALID_ARGUMENT`), or `environment_mismatch`.
    public let reason: String
    /// APNs' 410 timestamp (unix ms) where given, else the time of the answer.
    public let timestampMs: Int64
    /// True when `timestampMs` is APNs' own.
    public let timestampFromAPNs: Bool
    /// For `environment_mismatch`: the environment that accepted the token (refused with
    /// `BadDeviceToken` in the call's own). Nil for a token that is invalid.
    public let environment: ApnsEnvironment?
    /// An FCM registration token (`UNREGISTERED`, …) or an APNs token.
    public let provider: PushProvider

    /// The reason of a token that works, but in the other environment.
    public static let environmentMismatch = "environment_mismatch"

    public init(token: String, channel: PushChannel, reason: String, timestampMs: Int64, timestampFromAPNs: Bool,
                environment: ApnsEnvironment? = nil, provider: PushProvider = .apns) {
        self.provider = provider
        self.token = token
        self.channel = channel
        self.reason = reason
        self.timestampMs = timestampMs
        self.timestampFromAPNs = timestampFromAPNs
        self.environment = environment
    }

    /// True when the token is to be skipped from now on (not for an environment mismatch).
    public var tokenIsInvalid: Bool { environment == nil }
}

/// Why an event went to the dead-letter stream: the reason strings, all in one place. `text` is
/// what the record's `reason` holds: `code` alone or `code: detail`.
public enum DeadLetterReason: Equatable, Sendable {
    /// The producer's event is invalid; detail = `InvalidEvent.description`.
    case invalidEvent(String)
    /// APNs refused the credential (403 class credentialOrConfig; detail = Apple's reason), or
    /// the client could not sign a provider token. The app is unhealthy.
    case apnsCredentials(String)
    /// APNs refused the app's configuration (a credentialOrConfig reason without 403:
    /// BadTopic, TopicDisallowed, MissingTopic). The app is unhealthy.
    case apnsConfig(String)
    /// APNs refused the request's form (any other requestError; detail = Apple's reason).
    case apnsRequest(String)
    /// FCM refused the app's service account or project (a `credential` answer, a second
    /// `UNAUTHENTICATED`), or no access token could be had for it (detail: FCM's code or
    /// Google's reason, or the service-account file's problem, naming the credential).
    case fcmCredentials(String)
    /// Transient failures outlasted the channel's policy (or, for alerts, its TTL).
    case retriesExhausted(PushChannel)
    /// APNs refused the payload as too large, with nothing left to fall back to.
    case payloadTooLarge(PushChannel)
    /// The push could not be built or its request headers could not be laid out (should not
    /// happen: events are validated), or FCM refused the message's form (`INVALID_ARGUMENT`
    /// not naming the token, …); the error.
    case invalidPush(String)
    /// The entry was delivered this many times without reaching an outcome (a poison message
    /// that keeps killing or stalling gateways); detail = the delivery count.
    case redeliveryLimit(Int64)

    /// The stable machine-readable part.
    public var code: String {
        switch self {
        case .invalidEvent: return "invalid_event"
        case .apnsCredentials: return "apns_credentials"
        case .apnsConfig: return "apns_config"
        case .apnsRequest: return "apns_request"
        case .fcmCredentials: return "fcm_credentials"
        case .retriesExhausted: return "retries_exhausted"
        case .payloadTooLarge: return "payload_too_large"
        case .invalidPush: return "invalid_push"
        case .redeliveryLimit: return "redelivery_limit"
        }
    }

    /// `code: detail`, e.g. `apns_credentials: InvalidProviderToken`, `retries_exhausted: alert`.
    public var text: String {
        switch self {
        case let .invalidEvent(d), let .apnsCredentials(d), let .apnsConfig(d), let .apnsRequest(d),
             let .fcmCredentials(d), let .invalidPush(d):
            return "\(code): \(d)"
        case let .retriesExhausted(channel), let .payloadTooLarge(channel):
            return "\(code): \(channel.rawValue)"
        case let .redeliveryLimit(count):
            return "\(code): delivered \(count) times"
        }
    }
}

/// A dead letter to write: the reason, whether the app must be marked unhealthy (a credential
/// or config error: its other calls will fail the same way), and the outcome record, whose
/// `attempts` are the whole history.
public struct DeadLetter: Equatable, Sendable {
    public let reason: DeadLetterReason
    public let appUnhealthy: Bool
    public let record: OutcomeRecord
    /// The device of a call with devices whose ring alone was the dead letter (its id in
    /// `CallEvent.devices`; `record` is then that device's ring, its attempts its own): nil for
    /// a dead letter of the whole event.
    public let device: String?

    public init(reason: DeadLetterReason, appUnhealthy: Bool, record: OutcomeRecord, device: String? = nil) {
        self.reason = reason
        self.appUnhealthy = appUnhealthy
        self.record = record
        self.device = device
    }

    /// The dead letter of calls entry `entry`, delivered `deliveries` times without an outcome;
    /// `callID` and `type` as far as the event could be read.
    public static func redeliveryLimit(_ deliveries: Int64, callID: String?, type: CallEvent.Kind?, app: String,
                                       entry: String) -> DeadLetter {
        let reason = DeadLetterReason.redeliveryLimit(deliveries)
        let record = OutcomeRecord(outcome: .deadLettered, id: callID, type: type, app: app, entry: entry,
                                   reason: reason.text)
        return DeadLetter(reason: reason, appUnhealthy: false, record: record)
    }

    /// The dead letter of calls entry `entry`, whose event failed `CallEvent.decode`: the record
    /// carries the id and type the error could still read, so the producer can match it.
    public static func invalidEvent(_ error: InvalidEvent, app: String, entry: String) -> DeadLetter {
        let reason = DeadLetterReason.invalidEvent(error.description)
        let record = OutcomeRecord(outcome: .deadLettered, id: error.callID, type: error.kind, app: app, entry: entry,
                                   reason: reason.text)
        return DeadLetter(reason: reason, appUnhealthy: false, record: record)
    }

    /// True for the dead letter of an invalid event: its record does not claim the event's id
    /// (a corrected event re-sent with the same id is routed, docs/protocol.md).
    public var isInvalidEvent: Bool {
        if case .invalidEvent = reason { return true }
        return false
    }
}
