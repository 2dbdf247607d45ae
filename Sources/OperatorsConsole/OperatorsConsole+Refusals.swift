import DeadLetters
import EventLoop

/// The warning before a replay of dead letters of an app whose credential APNs refused
/// (docs/operations.md, "Console"): replayed then, the calls would likely die again.
extension OperatorsConsole {
    /// An app whose credential APNs refused, as far as the console can tell.
    struct CredentialRefusal: Equatable, Sendable {
        let app: String
        /// The refusal's reason (`apns_credentials: InvalidProviderToken`).
        let reason: String
        /// When it died of it (unix ms); nil when only this gateway's router says so now.
        let atMs: Int64?

        /// The warning's text.
        func warning(nowMs: Int64) -> String {
            DeadLetterOperations.credentialRefusalWarning(app: app, reason: reason, atMs: atMs, nowMs: nowMs)
        }
    }

    /// The apps of `apps` whose credential APNs refused: one whose newest credential dead
    /// letter (`DeadLetterOperations.newestCredentialRefusal`) came after the last call this
    /// process saw delivered for it (`OutcomeHistory.delivered`, the last hour), or whose
    /// refusal this process's router holds now (`ConsoleFigures.App.refusal`). A Redis failure
    /// reads as no refusal known (the replay's dry run says nothing it cannot tell). Sorted by app.
    func credentialRefusals(of apps: Set<String>, _ completion: @escaping ([CredentialRefusal]) -> Void) {
        let live = Dictionary(figures().apps.compactMap { a in a.refusal.map { (a.id, $0) } }, uniquingKeysWith: { a, _ in a })
            .filter { $0.value.hasPrefix(DeadLetterOperations.credentialRefusalReason) }
        let asked = apps.sorted()
        guard !asked.isEmpty else { return completion([]) }
        var found: [String: CredentialRefusal] = [:]
        var waiting = asked.count
        for app in asked {
            operations.newestCredentialRefusal(app: app) { [weak self] result in
                guard let self else { return }
                if case let .success(record?) = result, !self.history.delivered(app: app, afterMs: record.deadAtMs) {
                    found[app] = CredentialRefusal(app: app, reason: record.reason, atMs: record.deadAtMs)
                } else if let reason = live[app] {
                    found[app] = CredentialRefusal(app: app, reason: reason, atMs: nil)
                }
                waiting -= 1
                if waiting == 0 { completion(asked.compactMap { found[$0] }) }
            }
        }
    }
}
