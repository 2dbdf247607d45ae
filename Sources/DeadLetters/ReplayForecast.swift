/// What a replay of a dead letter will do, as far as the dead letter tells (the router decides
/// when it reads the replay, by the same rules: docs/protocol.md). The command line's dry run
/// and the console's preview show it for each dead letter, so an operator knows before
/// confirming which replays will ring a phone and which only send the missed-call alert.
/// Pure.
public enum ReplayForecast: Equatable, Sendable {
    /// A VoIP push: the call's deadline (unix ms) is still ahead.
    case rings(deadlineMs: Int64)
    /// The call's deadline passed: the missed-call alert only, never a VoIP push.
    case alertOnly(deadlineMs: Int64)
    /// No VoIP token: the alert is the only push the event can have.
    case alertWithoutVoip
    /// The deadline passed and there is no alert token: nothing is sent (`expired`).
    case expires(deadlineMs: Int64)
    /// A `call_cancelled`: recorded, nothing is sent.
    case cancel
    /// The event is refused again unchanged (`invalid_event: …`).
    case refusedAgain
    /// Only the start of the event was kept (it was refused for its size): not replayable.
    case notReplayable(keptBytes: Int, eventBytes: Int)

    /// The forecast for `record` at `nowMs`, with its app's ring timeout.
    public init(_ record: DeadLetterRecord, ringTimeoutMs: Int64, nowMs: Int64) {
        guard record.isEventWhole else {
            self = .notReplayable(keptBytes: record.event.count, eventBytes: record.eventBytes)
            return
        }
        if record.reason.hasPrefix("invalid_event") {
            self = .refusedAgain
            return
        }
        if record.eventType == "call_cancelled" {
            self = .cancel
            return
        }
        let deadline = record.callDeadlineMs(ringTimeoutMs: ringTimeoutMs)
        let passed = deadline <= nowMs
        switch (record.voipToken != nil, record.alertToken != nil) {
        case (true, _) where !passed: self = .rings(deadlineMs: deadline)
        case (_, true): self = passed ? .alertOnly(deadlineMs: deadline) : .alertWithoutVoip
        default: self = .expires(deadlineMs: deadline)
        }
    }

    /// Whether the replay is put back at all (`notReplayable` is skipped).
    public var replays: Bool {
        if case .notReplayable = self { return false }
        return true
    }

    /// A short word for tables and tests: `rings`, `alert-only`, `alert`, `nothing-sent`,
    /// `cancel`, `refused-again`, `not-replayable`.
    public var word: String {
        switch self {
        case .rings: return "rings"
        case .alertOnly: return "alert-only"
        case .alertWithoutVoip: return "alert"
        case .expires: return "nothing-sent"
        case .cancel: return "cancel"
        case .refusedAgain: return "refused-again"
        case .notReplayable: return "not-replayable"
        }
    }

    /// One line for people, ages counted at `nowMs`.
    public func text(nowMs: Int64) -> String {
        switch self {
        case let .rings(deadline):
            return "rings: VoIP push (deadline in \(DeadFormat.age(deadline - nowMs)))"
        case let .alertOnly(deadline):
            return "missed-call alert only: the call's deadline passed \(DeadFormat.age(nowMs - deadline)) ago, no VoIP push"
        case .alertWithoutVoip:
            return "alert push (no VoIP token)"
        case let .expires(deadline):
            return "nothing sent: the deadline passed \(DeadFormat.age(nowMs - deadline)) ago and there is no alert token"
        case .cancel:
            return "a cancel: recorded, nothing sent"
        case .refusedAgain:
            return "refused again: the event is replayed unchanged"
        case let .notReplayable(kept, bytes):
            return "cannot replay: only the first \(kept) of the event's \(bytes) bytes were kept"
        }
    }
}
