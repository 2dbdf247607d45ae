import CallStorage
import Routing

// The guard against iOS's silent VoIP ban (docs/protocol.md, *The guard against the silent
// VoIP ban*), with ring receipts on: each record tells the recording script what its call's
// rings said (`RingTally`), the script counts and marks in the same step, and its answer says
// which tokens it marked and whether the app's receipts are missing as a whole (its backend
// stopped sending them), which the router reports here.
extension RouterRole {
    /// What `record` of `call` tells the guard: a call's rings (`CallStateMachine.ringTally`),
    /// a receipt's own record; nil with receipts off, the common case, which costs nothing more.
    func ringTally(of record: borrowing OutcomeRecord, for call: LiveCall) -> RingTally? {
        let policy = call.app.policy
        guard policy.ringReceiptTimeoutMs != nil else { return nil }
        if record.type == .callRinging { return .receipt(ringingID: ResultEntry.ringingID(call.callID, device: record.device)) }
        guard record.outcome != .duplicate, let tally = call.machine.ringTally else { return nil }
        return .call(rings: tally.devices.map {
            RingTally.Ring(voipToken: $0.voipToken, silent: !$0.rang, ringingID: ResultEntry.ringingID(call.callID, device: $0.id))
        }, suspectAfter: policy.voipSuspectedAfterSilentRings)
    }

    /// What a recording script of `app` answered for the guard: tokens it marked suspected
    /// (counted, logged; each has its feedback entry), the app's calls without any receipt
    /// (its receipts missing, or back), tokens a late receipt found (their count and mark cleared).
    func heardGuard(_ report: FinishReport, app: AppRuntime) {
        if !report.suspected.isEmpty {
            observations?.voipSuspected(app: app.id, count: report.suspected.count)
            log.warn("VoIP tokens suspected of iOS's silent VoIP ban (their last VoIP rings were accepted and none rang): their calls skip VoIP and go straight to the alert until a receipt of the token or for a day; see the feedback stream, pushgw tokens show",
                     ["app": app.id, "count": report.suspected.count, "after_silent_rings": app.policy.voipSuspectedAfterSilentRings],
                     limited: true)
        }
        if let without = report.callsWithoutReceipt { heardCallsWithoutReceipt(without, app: app) }
        guard !report.rangLate.isEmpty else { return }
        store.clearVoipSuspicion(app.keys, voipTokens: report.rangLate) { [unowned self] result in
            if case let .failure(error) = result {
                self.stats.redisErrors += 1
                self.log.warn("clearing the silent-ring counts of tokens a late receipt heard failed; the next receipt of each clears them",
                              ["app": app.id, "count": report.rangLate.count, "error": "\(error)"], limited: true)
            }
        }
    }

    /// The app's calls in a row without a receipt from any device, as its last record left
    /// them: at `voip_suspected_after_silent_rings` its receipts are missing (its backend
    /// stopped sending them, not a ban: no token is suspected meanwhile), said once as it
    /// starts and once as it ends.
    private func heardCallsWithoutReceipt(_ count: Int64, app: AppRuntime) {
        let threshold = Int64(app.policy.voipSuspectedAfterSilentRings)
        let wasMissing = (callsWithoutReceipt[app.id] ?? 0) >= threshold
        callsWithoutReceipt[app.id] = count
        let missing = count >= threshold
        guard missing != wasMissing else { return }
        if missing {
            log.warn("the app's ring receipts are missing: no device sent a receipt for its last calls, so its backend is not adding call_ringing (docs/app.md); its calls are escalated for want of receipts, and no VoIP token is suspected of iOS's silent ban meanwhile",
                     ["app": app.id, "calls_without_receipt": count])
        } else {
            log.info("the app's ring receipts are back", ["app": app.id])
        }
    }

    /// Apps whose ring receipts are missing (`heardCallsWithoutReceipt`), with their calls in
    /// a row without one: reported per app (`/status`, `pushgw_app_receipts_missing`, the console).
    package var appsMissingReceipts: [String: Int64] {
        var out: [String: Int64] = [:]
        for app in apps where app.policy.ringReceiptTimeoutMs != nil {
            if let count = callsWithoutReceipt[app.id], count >= Int64(app.policy.voipSuspectedAfterSilentRings) { out[app.id] = count }
        }
        return out
    }
}
