import CallStorage
import DeadLetters
import EventLoop
import HTTPMessages
import JSONOutput
import RedisClient

/// An app's Pause and Resume buttons on the overview (docs/operations.md, "Pausing an app"),
/// through CallStorage's `AppPauseStore`, the code behind `pushgw apps pause|resume`, with the
/// same audit record.
extension OperatorsConsole {
    /// The pause of each app, for the overview's cards: one read per app, answered together.
    func pauses(of apps: [String], _ completion: @escaping ([String: Result<AppPauseStore.Pause?, ConsoleReadError>]) -> Void) {
        let store = AppPauseStore(topology: operations.store.topology)
        store.pauses(apps.map(operations.keys)) { result in
            var found: [String: Result<AppPauseStore.Pause?, ConsoleReadError>] = [:]
            for app in apps {
                switch result {
                case let .success(pauses): found[app] = .success(pauses[self.operations.keys(app)] ?? nil)
                case let .failure(error): found[app] = .failure(ConsoleReadError("Redis: \(error)"))
                }
            }
            completion(found)
        }
    }

    /// Pauses (`resumes` false) or resumes one app (admin only: `ConsoleGate`), writes the
    /// audit record `pushgw apps pause` / `resume` writes, and says what was done.
    func pause(_ request: HTTPRequest, _ session: ConsoleSession, resumes: Bool, _ answer: @escaping (HTTPResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let items = request.formItems
        let app = items.first { $0.0 == "app" }?.1 ?? ""
        let reason = items.first { $0.0 == "reason" }?.1 ?? ""
        guard operations.policies[app] != nil, reason.count <= AppPauseStore.maxReason else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer,
                                                          text: "Name one configured app (and a reason of at most \(AppPauseStore.maxReason) characters).",
                                                          back: ("/console/overview", "Overview"))))
        }
        let store = AppPauseStore(topology: operations.store.topology)
        let verb = resumes ? "apps resume" : "apps pause"
        let done: (Result<AppPauseStore.Pause?, RedisError>) -> Void = { [weak self] result in
            guard let self else { return }
            // Pausing: nil is a new pause, else the one in place; resuming: the pause removed,
            // nil when it was not paused.
            var changed = false
            var kept: AppPauseStore.Pause?
            if case let .success(found) = result {
                kept = found
                changed = resumes ? found != nil : found == nil
            }
            let who: [(String, OrderedJSON)] = [("reason", .string(resumes ? kept?.reason ?? "" : reason)), ("via", .string("console")),
                                                ("access", .string(session.role.rawValue)), ("from", .string(request.peer ?? "?"))]
            let record = AuditRecord(timeMs: Clock.unixMs(), verb: verb, user: session.name, ids: [app], requested: 1,
                                     done: changed ? 1 : 0, filter: nil, options: who)
            self.log(.info, resumes ? "app resumed" : "app paused", [("user", session.name), ("app", app), ("done", changed ? "1" : "0"),
                                                                   ("via", "console")])
            self.operations.audit(record) { audited in
                var text: String
                switch result {
                case .success where changed:
                    text = resumes ? "Resumed \(app): the gateways read its calls again, within a second or two; those that waited are routed."
                        : "Paused \(app): within a second or two no gateway reads its calls; they wait in its stream until it is resumed."
                case .success:
                    text = resumes ? "\(app) was not paused; nothing changed."
                        : "\(app) was paused already" + (kept.map { " by \($0.user) since \(DeadFormat.time($0.sinceMs))" } ?? "") + "; nothing changed."
                case let .failure(error):
                    text = "Nothing changed: Redis failed: \(error)."
                }
                if case let .failure(error) = audited { text += " The audit record was not written: \(error)." }
                answer(.html(200, ConsolePages.message(title: resumes ? "Resume" : "Pause", viewer: viewer, text: text,
                                                       back: ("/console/overview", "Overview"))))
            }
        }
        if resumes {
            store.resume(operations.keys(app), completion: done)
        } else {
            store.pause(operations.keys(app), .init(sinceMs: Clock.unixMs(), user: session.name, reason: reason), completion: done)
        }
    }
}
