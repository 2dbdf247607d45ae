import APNs

/// What one APNs answer (or transport failure) means for a call, read only through the APNs
/// reason table (`PushNotificationResponse.rejectionKind`) and the HTTP status, never through
/// reason strings.
enum ApnsVerdict: Equatable {
    case accepted(apnsID: String?)
    /// The token is gone: feedback, never retry it. `timestampMs` is APNs' 410 timestamp.
    /// `otherEnvironmentMayAccept`: Apple's answer also means "a token of the other
    /// environment" (`ReasonClass.tokenInvalidHere`).
    case tokenInvalid(reason: String, timestampMs: Int64?, otherEnvironmentMayAccept: Bool)
    /// Try again later; `throttled` (429, or the client's queue full) backs off longer.
    case transient(throttled: Bool)
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
