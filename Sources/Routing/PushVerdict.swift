import APNs
import FCM

/// What one provider answer (or transport failure) means for a call: one verdict for both
/// providers, each read only through its own table (APNs: `PushNotificationResponse.
/// rejectionKind`; FCM: `FcmResponse.kind`, from `FcmErrorCode.table`) and the HTTP status,
/// never through reason strings. The call's machine decides on the verdict alone, so a device
/// rung through FCM follows the same rules as one rung through APNs.
enum PushVerdict: Equatable {
    /// `apnsID`: APNs' `apns-id`, or FCM's message name.
    case accepted(apnsID: String?)
    /// The token is gone: feedback, never retry it. `timestampMs` is APNs' 410 timestamp.
    /// `otherEnvironmentMayAccept`: Apple's answer also means "a token of the other
    /// environment" (`ReasonClass.tokenInvalidHere`).
    case tokenInvalid(reason: String, timestampMs: Int64?, otherEnvironmentMayAccept: Bool)
    /// Try again later; `throttled` (429, or the client's queue full) backs off longer, and
    /// not sooner than `retryAfterMs` when the provider said so (FCM's `Retry-After`).
    case transient(throttled: Bool, retryAfterMs: Int64? = nil)
    /// 413: this payload can never go as is.
    case payloadTooLarge
    /// A human must fix something; `appUnhealthy` for credential and config errors.
    case deadLetter(DeadLetterReason, appUnhealthy: Bool)
    /// The push was taken back unsent after a cancel (`CallAction.Step.withdrawPush`).
    case withdrawn

    init(_ response: PushNotificationResponse) {
        guard let kind = response.rejectionKind else {
            self = .accepted(apnsID: response.apnsID)
            return
        }
        // APNs' reason is quoted in the dead letter: a short prefix at most, whatever came back.
        let text = InvalidEvent.quote(response.reason?.text ?? "HTTP \(response.status)")
        switch kind {
        case .tokenInvalid:
            self = .tokenInvalid(reason: text, timestampMs: response.invalidationTimestampMs, otherEnvironmentMayAccept: false)
        case .tokenInvalidHere:
            self = .tokenInvalid(reason: text, timestampMs: response.invalidationTimestampMs, otherEnvironmentMayAccept: true)
        case .retryable:
            self = .transient(throttled: response.status == 429)
        case .credentialOrConfig:
            // Apple's status table: 403 is "a problem with the certificate or the provider token";
            // the other statuses of this class (400 BadTopic, TopicDisallowed, MissingTopic) are config.
            let reason: DeadLetterReason = response.status == 403 ? .apnsCredentials(text) : .apnsConfig(text)
            self = .deadLetter(reason, appUnhealthy: true)
        case .requestError:
            if response.reason == .payloadTooLarge || response.status == 413 {
                self = .payloadTooLarge
            } else {
                self = .deadLetter(.apnsRequest(text), appUnhealthy: false)
            }
        }
    }

    /// Transport failures may all be retried (the push may or may not have arrived), except an
    /// unusable signing key, which is the app's credential and needs a human, and a push that
    /// cannot be written at all (refused before sending: a dead letter).
    init(_ error: ApnsClientError) {
        switch error {
        case .timeout, .connectionLost, .connectionFailed, .clientClosed:
            self = .transient(throttled: false)
        case .queueFull:
            self = .transient(throttled: true)
        case .credentialUnusable:
            self = .deadLetter(.apnsCredentials(error.description), appUnhealthy: true)
        case let .unsendable(why):
            self = .deadLetter(.invalidPush(why), appUnhealthy: false)
        case .withdrawn:
            self = .withdrawn
        }
    }
}

extension PushVerdict {
    /// FCM's answer, through its table (`FcmResponse.kind`). A refusal of the credential
    /// (`credential`, or `UNAUTHENTICATED` again after the client renewed its access token) is
    /// a dead letter naming the credential; it does not mark the app unhealthy, whose health
    /// is its APNs credential's (`AppCredentialHealth`): its iPhones keep ringing.
    init(_ response: FcmResponse, credential: String) {
        guard let kind = response.kind else {
            self = .accepted(apnsID: response.messageName)
            return
        }
        let text = InvalidEvent.quote(response.reasonText)
        switch kind {
        case .tokenInvalid:
            self = .tokenInvalid(reason: text, timestampMs: nil, otherEnvironmentMayAccept: false)
        case .retryable:
            self = .transient(throttled: response.status == 429, retryAfterMs: response.retryAfterSeconds.map { $0 * 1000 })
        case .renewAccessToken, .credential:
            self = .deadLetter(.fcmCredentials("credentials.\(credential): FCM refused it (\(text))"), appUnhealthy: false)
        case .requestError:
            let message = response.message.map { ": " + InvalidEvent.quote($0) } ?? ""
            self = .deadLetter(.invalidPush("FCM refused the message (\(text)\(message))"), appUnhealthy: false)
        }
    }

    /// No answer from FCM: the pool's failures as for APNs; no access token is a credential
    /// problem, unless the token endpoint was only not reached (then try again).
    init(_ error: FcmClientError, credential: String) {
        switch error {
        case let .transport(failure):
            self.init(failure)
        case let .accessToken(problem) where problem.isTransient:
            self = .transient(throttled: false)
        case let .accessToken(problem):
            self = .deadLetter(.fcmCredentials("credentials.\(credential): \(problem.description)"), appUnhealthy: false)
        case let .clientUnusable(problem):
            self = .deadLetter(.fcmCredentials("credentials.\(credential): \(problem)"), appUnhealthy: false)
        }
    }
}
