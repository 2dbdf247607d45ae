import CallStorage
import DeadLetters
import Foundation
import HTTPMessages

/// The page of the webhook deliveries given up on (docs/webhooks.md, "Dead letters"): what
/// `pushgw webhooks dead` lists, per app, with a replay form for an admin.
extension ConsolePages {
    /// One app's webhook dead letters as read (the oldest first), or why they could not be.
    struct WebhookDeadLetters {
        var app: String
        var entries: [WebhookStore.DeadDelivery]
        var more: Bool
        var problem: String?
    }

    static func webhookDeadLetters(viewer: Viewer, apps: [WebhookDeadLetters], nowMs: Int64, notice: String?) -> Node {
        var s: [Node] = [.el("h1", "Webhook dead letters"),
                         .el("p", ["class": "hint"], .text("Results a receiver refused (a 4xx other than 429), or that were retried past "
                                 + "the app's webhooks.retry_for_seconds. A replay puts them back on the app's deliveries with the same "
                                 + "Idempotency-Key; the webhooks role of a running gateway sends them again."))]
        if let notice { s.append(.el("p", ["class": "notice"], .text(notice))) }
        for app in apps {
            var section: [Node] = [.el("h2", .text(app.app))]
            if let problem = app.problem {
                section.append(.el("p", ["class": "error"], .text(problem)))
            } else if app.entries.isEmpty {
                section.append(.el("p", ["class": "empty"], "None."))
            } else {
                let head = Node.el("thead", .el("tr", .el("th", "Replay"), .el("th", "Entry"), .el("th", "Failed"), .el("th", "Attempts"),
                                                .el("th", "Why"), .el("th", "Outcome"), .el("th", "Call"), .el("th", "Idempotency-Key")))
                let rows: [Node] = app.entries.map { d in
                    let f = d.fields
                    let result = f["result"].flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
                    let failed = f["failed_at_ms"].flatMap { Int64($0) }
                    let age = failed.map { DeadFormat.time($0) + " (" + DeadFormat.age(nowMs - $0) + " ago)" } ?? "?"
                    var box: [Attribute] = [Attribute("type", "checkbox"), Attribute("name", "ids"), Attribute("value", d.entryID),
                                            Attribute("aria-label", "replay")]
                    if viewer.role != .admin { box.append(.flag("disabled")) }
                    return .el("tr", ["class": "webhook-dead", "data-entry": d.entryID],
                               .el("td", .element("input", box, [])), .el("td", ["class": "mono"], .text(d.entryID)), .el("td", .text(age)),
                               .el("td", .text(f["attempts"] ?? "?")), .el("td", ["class": "reason"], .text(f["reason"] ?? "")),
                               .el("td", .text(result?["outcome"] as? String ?? "?")), .el("td", ["class": "mono"], .text(result?["id"] as? String ?? "?")),
                               .el("td", ["class": "mono"], .text(f["results_entry"] ?? "?")))
                }
                let table = Node.el("div", ["class": "scroll"], .el("table", ["class": "list"], head, .el("tbody", children: rows)))
                let more: [Node] = app.more ? [.el("p", ["class": "hint"], "Only the oldest are listed; replay them to see the next ones.")] : []
                if viewer.role == .admin {
                    // One form per app: a replay names its app, and only that app's entries.
                    section.append(.el("form", ["method": "post", "action": "/console/webhooks/replay"],
                                       children: [csrfField(viewer), .el("input", ["type": "hidden", "name": "app", "value": app.app]), table]
                                           + more + [.el("p", .el("button", ["type": "submit"], "Replay the selected"))]))
                } else {
                    section.append(table)
                    section += more
                    section.append(.el("p", ["class": "hint"], "Signed in read-only: replays need the admin token."))
                }
            }
            s.append(.el("section", ["class": "webhooks", "data-app": app.app], children: section))
        }
        if apps.isEmpty { s.append(.el("p", ["class": "empty"], "No apps are configured.")) }
        return page(title: "Webhooks", section: .webhooks, viewer: viewer, body: s)
    }
}
