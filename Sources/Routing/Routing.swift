// Routing: event decoding and validation, the per-call state machine (VoIP first, alert
// fallback), outcomes and token feedback.
// Owns: every routing decision. Must not open sockets itself: it returns actions that the
// Gateway's runner performs.
// Status: not built yet (issue 3).

/// The final outcome of a call event, as written to the results stream (DESIGN.md §2).
public enum CallOutcome: String, Sendable, CaseIterable {
    case deliveredVoip = "delivered_voip"
    case deliveredAlert = "delivered_alert"
    case undeliverable
    case expired
    case cancelled
    case deadLettered = "dead_lettered"
}
