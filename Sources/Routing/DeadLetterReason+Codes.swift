extension DeadLetterReason {
    /// Every `code`, in the order of the cases: the values a dead-letter counter's `reason`
    /// label takes (the metrics show each at 0 from the start). `DeadLetterReasonCodesTests`
    /// checks it against a reason of each case.
    public static let codes = ["invalid_event", "apns_credentials", "apns_config", "apns_request", "fcm_credentials",
                               "retries_exhausted",
                               "payload_too_large", "invalid_push", "redelivery_limit"]
}
