/// What an `incoming_call` entry does once its lookup answered, when another entry of the same
/// call may be routing at the same time (a producer's resend, a retry and a resend, a
/// take-over): docs/protocol.md promises that a duplicate id is not delivered again, so two
/// copies must never push at once. Pure: the runner gives what it knows and performs the answer.
///
/// - A copy whose call is already done, or cancelled, or that is not an `incoming_call`, goes
///   to its router, which acknowledges it as a duplicate, finishes it cancelled, or records the
///   cancellation.
/// - A copy whose in-flight claim (taken in the lookup) is held by another live consumer waits
///   for that consumer's outcome, looking the call up again now and then.
/// - A copy of a call another entry routes in this same process waits for that entry to leave
///   the process: then it is acknowledged as a duplicate (an outcome was recorded) or looked up
///   again (the call went to the retry schedule, or a Redis step failed).
/// - Otherwise it is routed.
public enum CallCopies {
    public enum Decision: Equatable, Sendable {
        case route
        case waitForCopyHere
        case waitForCopyElsewhere(holder: String)
    }

    /// - Parameters:
    ///   - claimHolder: who holds the call's in-flight claim after the lookup (nil: not asked).
    ///   - consumer: this process's consumer name.
    ///   - copyRoutingHere: another entry of the call has started routing in this process.
    public static func decide(kind: CallEvent.Kind, alreadyDone: Bool, cancelled: Bool, claimHolder: String?,
                              consumer: String, copyRoutingHere: Bool) -> Decision {
        guard kind == .incomingCall, !alreadyDone, !cancelled else { return .route }
        if let claimHolder, claimHolder != consumer { return .waitForCopyElsewhere(holder: claimHolder) }
        return copyRoutingHere ? .waitForCopyHere : .route
    }
}
