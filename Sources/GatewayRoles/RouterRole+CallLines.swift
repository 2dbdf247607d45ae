import EventLoop
import Routing

// The `call finished` line (docs/operations.md, Logs): one info line per recorded result, at
// most `log.calls_per_second` of them a second; the calls over it are counted, and one line a
// second says how many were not logged. A call not logged costs a comparison, a clock read and
// an addition: no fields are built and nothing is allocated.
extension RouterRole {
    /// Logs the result `record` of `app` (of event `callID`) once Redis acknowledged it, or counts it.
    func logFinished(_ record: OutcomeRecord, app: String, callID: String) {
        guard callLines.perSecond > 0, log.minimum <= .info else { return }
        switch callLines.admit(nowMs: Clock.monotonicMs()) {
        case let .log(notLoggedBefore):
            if notLoggedBefore > 0 { logCallsNotLogged(notLoggedBefore) }
            log.info("call finished", record.finishedLineFields(app: app, callID: callID))
        case let .count(armSummaryAfterMs):
            if let armSummaryAfterMs { callLinesTimer.schedule(afterMs: armSummaryAfterMs) }
        }
    }

    /// A reloaded `log.calls_per_second`, from the next call on.
    package func updateCallLinesPerSecond(_ perSecond: Int) {
        callLines.perSecond = perSecond
    }

    /// The second's count of calls not logged, written when the second is over (`callLinesTimer`)
    /// and when the role retires.
    func logCallsNotLoggedSoFar() {
        let count = callLines.takeNotLogged()
        if count > 0 { logCallsNotLogged(count) }
    }

    private func logCallsNotLogged(_ count: Int) {
        log.info("calls finished and not logged", ["count": count, "calls_per_second": callLines.perSecond])
    }
}

/// How many `call finished` lines a second may hold (`log.calls_per_second`, above 0): the
/// first `perSecond` calls of a second are logged, the others counted. A second starts with
/// the first call after the previous one ended. Pure: the caller passes the time.
struct CallLineCap {
    enum Verdict: Equatable {
        /// Log it; first say how many calls of the second before were not logged, when any are
        /// still untold (the summary's timer had not fired yet).
        case log(notLoggedBefore: Int)
        /// Count it; with the delay after which the second is over, for its first call counted
        /// (arm the summary's timer then).
        case count(armSummaryAfterMs: Int64?)
    }

    static let secondMs: Int64 = 1_000

    /// Lines a second at most; 0: none.
    var perSecond: Int
    /// When the current second started, monotonic ms.
    private var secondStartMs: Int64 = .min
    /// Calls logged in the current second.
    private var logged = 0
    /// Calls counted and not logged since the last summary.
    private var notLogged = 0

    init(perSecond: Int) {
        precondition(perSecond >= 0, "a line rate is not negative")
        self.perSecond = perSecond
    }

    mutating func admit(nowMs: Int64) -> Verdict {
        if secondStartMs == .min || nowMs - secondStartMs >= Self.secondMs {
            secondStartMs = nowMs
            logged = 1
            return .log(notLoggedBefore: takeNotLogged())
        }
        if logged < perSecond {
            logged += 1
            return .log(notLoggedBefore: 0)
        }
        notLogged += 1
        return .count(armSummaryAfterMs: notLogged == 1 ? max(0, secondStartMs + Self.secondMs - nowMs) : nil)
    }

    /// The calls counted since the last summary, now told.
    mutating func takeNotLogged() -> Int {
        defer { notLogged = 0 }
        return notLogged
    }
}

extension OutcomeRecord {
    /// The fields of its `call finished` line: what happened to the call and why (a fallback's
    /// `cause`, a dead letter's reason as the line's `error`), the last push's answer
    /// (`status`, `provider`), `latency_ms`, how many pushes it took, and the calls entry the
    /// result names (for a call that waited for retries, its first entry).
    func finishedLineFields(app: String, callID: String) -> [String: Any] {
        var fields: [String: Any] = ["app": app, "event": callID, "outcome": outcome.rawValue, "attempts": attempts.count]
        if let type, type != .incomingCall { fields["type"] = type.rawValue }
        if let entry { fields["entry"] = entry }
        if let cause { fields["cause"] = cause.rawValue }
        if outcome == .deadLettered, let reason { fields["error"] = reason }
        if let latencyMs { fields["latency_ms"] = latencyMs }
        // The call's last push, not the background push that ends it on the other devices.
        if let last = attempts.last(where: { $0.kind != .ended }) ?? attempts.last, let status = last.status {
            fields["status"] = status
            fields["provider"] = (last.provider ?? .apns).rawValue
        }
        return fields
    }
}
