import CallStorage
import DeadLetters
import EventLoop
import HTTPMessages
import JSONOutput

/// The webhook deliveries given up on, listed and replayed through CallStorage's
/// `WebhookStore`, the code behind `pushgw webhooks dead|replay`, with the same audit record.
extension OperatorsConsole {
    /// Webhook dead letters listed per app, at most this many each.
    static let webhookDeadShown = 100

    func webhookDeadList(_ viewer: ConsolePages.Viewer, notice: String? = nil, _ answer: @escaping (HTTPResponse) -> Void) {
        let store = WebhookStore(topology: operations.store.topology)
        let apps = self.apps
        var read: [String: ConsolePages.WebhookDeadLetters] = [:]
        guard !apps.isEmpty else {
            return answer(.html(200, ConsolePages.webhookDeadLetters(viewer: viewer, apps: [], nowMs: Clock.unixMs(), notice: notice)))
        }
        for app in apps {
            store.dead(operations.keys(app), count: OperatorsConsole.webhookDeadShown + 1) { result in
                switch result {
                case let .success(entries):
                    read[app] = .init(app: app, entries: Array(entries.prefix(OperatorsConsole.webhookDeadShown)),
                                      more: entries.count > OperatorsConsole.webhookDeadShown)
                case let .failure(error):
                    read[app] = .init(app: app, entries: [], more: false, problem: "Redis: \(error)")
                }
                guard read.count == apps.count else { return }
                answer(.html(200, ConsolePages.webhookDeadLetters(viewer: viewer, apps: apps.compactMap { read[$0] }, nowMs: Clock.unixMs(),
                                                                  notice: notice)))
            }
        }
    }

    /// Replays the selected webhook dead letters of one app (admin only: `ConsoleGate`), then
    /// writes the audit record `pushgw webhooks replay` writes and shows the list again.
    func webhookReplay(_ request: HTTPRequest, _ session: ConsoleSession, _ answer: @escaping (HTTPResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let items = request.formItems
        let app = items.first { $0.0 == "app" }?.1 ?? ""
        let ids = items.filter { $0.0 == "ids" }.map(\.1)
        guard operations.policies[app] != nil, !ids.isEmpty, ids.count <= OperatorsConsole.maxTargets,
              ids.allSatisfy(DeadLetterRecord.isEntryID) else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer,
                                                          text: "Select 1 to \(OperatorsConsole.maxTargets) webhook dead letters of one configured app.",
                                                          back: ("/console/webhooks", "Webhooks"))))
        }
        let store = WebhookStore(topology: operations.store.topology)
        store.replay(operations.keys(app), entryIDs: ids, count: ids.count) { [weak self] result in
            guard let self else { return }
            let moved = (try? result.get()) ?? 0
            let who: [(String, OrderedJSON)] = [("app", .string(app)), ("via", .string("console")), ("access", .string(session.role.rawValue)),
                                                ("from", .string(request.peer ?? "?"))]
            let record = AuditRecord(timeMs: Clock.unixMs(), verb: "webhooks replay", user: session.name, ids: ids.map { "\(app)/\($0)" },
                                     requested: ids.count, done: moved, filter: nil, options: who)
            self.log(.info, "webhook dead letters replayed", [("user", session.name), ("app", app), ("requested", String(ids.count)),
                                                             ("done", String(moved)), ("via", "console")])
            self.operations.audit(record) { audited in
                var notice: String
                switch result {
                case .success: notice = "Replayed \(moved) of \(ids.count) webhook dead letters of \(app) (those gone meanwhile were skipped)."
                case let .failure(error): notice = "Nothing replayed: Redis failed: \(error)."
                }
                if case let .failure(error) = audited { notice += " The audit record was not written: \(error)." }
                self.webhookDeadList(viewer, notice: notice, answer)
            }
        }
    }
}
