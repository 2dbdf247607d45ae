import CallStorage
import DeadLetters
import Foundation

/// The search box's pages (`OperatorsConsole+Search`): a call as `pushgw calls show` tells it,
/// a device token as `pushgw tokens show` tells it, and the not-found page. Every value is a
/// text node or an attribute value, escaped by the renderer; the words come from
/// `CallReport` and `TokenReport`, which the command line prints.
extension ConsolePages {
    private static func q(_ s: String) -> String { ConsoleEscaping.queryComponent(s) }

    /// The search box in every signed-in page's header, holding `query`.
    static func searchBox(_ query: String) -> Node {
        .el("form", ["class": "search", "method": "get", "action": "/console/search", "role": "search"],
            .el("input", ["type": "search", "name": "q", "id": "search", "value": query, "placeholder": "Call id or token",
                          "aria-label": "Search a call id (or APP/ID) or a device token", "autocomplete": "off", "spellcheck": "false"]),
            .el("button", ["id": "search-go"], "Search"))
    }

    static func searchHref(_ query: String) -> String { "/console/search?q=" + q(query) }

    /// The page of an empty search: what the box takes.
    static func searchHelp(viewer: Viewer, apps: [String]) -> Node {
        page(title: "Search", section: .none, viewer: viewer, body: [
            .el("h1", "Search"),
            .el("p", ["class": "notice", "id": "search-help"], .text(
                "Type a call id (the event's \"id\"; APP/ID looks in one app) to see its result, every attempt, its dead letter "
                    + "and its tokens' state, as pushgw calls show prints them; or a device token (hex) to see whether calls skip it, "
                    + "since when and why, and APNs' answers about it, as pushgw tokens show prints them. Apps: "
                    + (apps.isEmpty ? "none configured" : apps.joined(separator: ", ")) + ".")),
        ])
    }

    /// Nothing known about `query` as a call id in `apps`, nor as a device token.
    static func searchNotFound(viewer: Viewer, query: String, callID: String, apps: [String], token: String?) -> Node {
        let where_ = apps.count == 1 ? "app \(apps[0])" : "apps \(apps.joined(separator: ", "))"
        var body: [Node] = [
            .el("h1", "Nothing found"),
            .el("p", ["class": "notice", "id": "not-found"], .text(
                "No call \"\(callID)\" in \(where_): no result (results are kept 24 h), no dead letter, no retry, no cancel.")),
        ]
        body.append(.el("p", ["class": "hint", "id": "not-found-token"], .text(token == nil
            ? "Not a device token either (a token is an even number of hex digits)."
            : "As a device token: not known to be invalid, not suspected of iOS's silent VoIP ban and named by no feedback entry "
                + "(among each app's last \(CallLookup.feedbackScanned)), in any app: calls push to it.")))
        body.append(.el("p", ["class": "hint"], .text("A call that was never routed (not yet read, or an event refused before its id "
                                                      + "was read) has nothing under its id; see the dead letters for refused events.")))
        return page(title: "Nothing found", section: .none, viewer: viewer, body: body, search: query)
    }

    /// The calls and the token found for `query`.
    static func searchResults(viewer: Viewer, query: String, calls: [CallReport], tokens: [TokenReport], nowMs: Int64) -> Node {
        var body: [Node] = [.el("h1", .text(calls.isEmpty ? "Device token" : calls.count == 1 ? "Call" : "Calls"))]
        body += calls.map { call($0, nowMs: nowMs) }
        if !tokens.isEmpty {
            if !calls.isEmpty { body.append(.el("h1", "Device token")) }
            body += tokens.map(token)
        }
        return page(title: "Search", section: .none, viewer: viewer, body: body, search: query)
    }

    private static func fact(_ label: String, _ value: Node, _ attributes: [Attribute] = []) -> Node {
        .el("tr", .el("th", .text(label)), .element("td", attributes, [value]))
    }

    /// One call: its result, attempts, retry, cancel, dead letters and tokens.
    private static func call(_ c: CallReport, nowMs: Int64) -> Node {
        func at(_ ms: Int64) -> String { "\(DeadFormat.time(ms)) (\(DeadFormat.age(nowMs - ms)) ago)" }
        let outcome = c.result?.outcome ?? c.stored.compactOutcome
        let good = ["finished", "detail_expired", "in_flight", "waiting_for_retry"].contains(c.state) && outcome != "undeliverable"
            && outcome != "expired" && outcome != "dead_lettered"
        var facts: [Node] = []
        if let r = c.result {
            facts.append(fact("Result", .text(CallReport.summary(r)), [Attribute("id", "call-result")]))
            if let entry = r.entry {
                let when = DeadLetterRecord.timeMs(ofID: entry).map { ", added " + at($0) } ?? ""
                facts.append(fact("Calls entry", .text(entry + when), [Attribute("class", "mono")]))
            }
            if let latency = r.latencyMs { facts.append(fact("Latency", .text("\(latency) ms from the XADD to APNs' answer"))) }
        } else if let none = c.noResult {
            facts.append(fact("Result", .text(none), [Attribute("id", "call-result")]))
        }
        if let retry = c.retry {
            let due = retry.dueAtMs > nowMs ? " (in \(DeadFormat.age(retry.dueAtMs - nowMs)))" : " (due now)"
            facts.append(fact("Retry", .text("waiting, due \(DeadFormat.time(retry.dueAtMs))\(due), replaces calls entry \(retry.retryID)"),
                              [Attribute("id", "call-retry")]))
        }
        if let cancel = c.cancel { facts.append(fact("Cancel", .text(cancel), [Attribute("id", "call-cancel")])) }

        var s: [Node] = [
            .el("header", .el("h2", "Call ", .el("span", ["class": "mono call-id"], .text(c.callID))),
                .el("span", ["class": "pill " + (good ? "good" : "bad"), "id": "call-state"], .text(c.state.replacingOccurrences(of: "_", with: " "))),
                .el("span", ["class": "meta"], .text("app " + c.app))),
            .el("table", ["class": "kv", "id": "call-facts"], .el("tbody", children: facts)),
        ]
        let attempts = c.result?.attempts ?? []
        s.append(.el("h3", .text("Attempts (\(attempts.count))")))
        if attempts.isEmpty {
            s.append(.el("p", ["class": "empty", "id": "call-no-attempts"], .text(c.result == nil ? "No result, so no attempt on record."
                                                                              : "None: nothing was sent.")))
        } else {
            s.append(.el("table", ["class": "list", "id": "call-attempts"],
                         .el("thead", .el("tr", .el("th", "Time"), .el("th", "Channel"), .el("th", "Status"), .el("th", "Reason"),
                                          .el("th", "apns-id"))),
                         .el("tbody", children: attempts.map { a in
                             let ok = a.status.map { (200..<300).contains($0) } ?? false
                             return .el("tr", ["class": "attempt " + (ok ? "ok" : "failed")],
                                        .el("td", .text(a.timeMs.map(DeadFormat.time) ?? "–")), .el("td", .text(a.channel ?? "–")),
                                        .el("td", ["class": "status"], .text(a.status.map { String($0) } ?? "no answer")),
                                        .el("td", ["class": "reason"], .text(a.reason ?? a.error ?? "–")),
                                        .el("td", ["class": "mono"], .text(a.apnsID ?? "–")))
                         })))
        }
        s.append(.el("h3", "Dead letter"))
        if c.deadLetters.isEmpty {
            s.append(.el("p", ["class": "hint", "id": "call-no-dead-letter"], "None."))
        } else {
            s.append(.el("ul", ["class": "dead-letters", "id": "call-dead-letters"], children: c.deadLetters.map { d in
                .el("li", .el("a", ["href": detailHref(d)], .text(d.app + "/" + d.id)),
                    .text(" \(at(d.deadAtMs)): "), .el("span", ["class": "reason"], .text(d.reason)),
                    .text("; \(DeadFormat.count(d.attempts.count, "attempt")), \(DeadFormat.count(d.replays, "replay"))"))
            }))
        }
        s.append(.el("h3", "Tokens"))
        if c.tokens.isEmpty {
            s.append(.el("p", ["class": "hint", "id": "call-no-tokens"],
                         "None known: results keep no token (search a token to see its state)."))
        } else {
            s.append(.el("table", ["class": "list", "id": "call-tokens"],
                         .el("thead", .el("tr", .el("th", "Channel"), .el("th", "Token"), .el("th", "Learnt from"), .el("th", "State"))),
                         .el("tbody", children: c.tokens.map { t in
                             .el("tr", ["class": "token " + (t.mark == nil ? "valid" : "invalid")], .el("td", .text(t.channel.rawValue)),
                                 .el("td", ["class": "mono"], .el("a", ["href": searchHref(t.token)], .text(ConsoleEscaping.shortToken(t.token)))),
                                 .el("td", .text(t.source)), .el("td", .text(t.stateText)))
                         })))
        }
        return .el("section", ["class": "card call", "data-app": c.app], children: s)
    }

    /// What one app keeps about the token.
    private static func token(_ t: TokenReport) -> Node {
        var facts = TokenChannel.apns.map { channel in
            fact(channel.rawValue, .text(t.state(channel)), [Attribute("class", "mark " + (t.marks[channel] == nil ? "valid" : "invalid")),
                                                             Attribute("data-channel", channel.rawValue)])
        }
        if let ban = t.voipBan { facts.append(fact("VoIP ban", .text(ban), [Attribute("class", "voip-ban")])) }
        facts.append(fact("Last feedback", .text(t.feedback.first.map(TokenReport.describe)
                                                 ?? "none among the app's last \(CallLookup.feedbackScanned) feedback entries")))
        var s: [Node] = [
            .el("header", .el("h2", "Token ", .el("span", ["class": "mono"], .text(ConsoleEscaping.shortToken(t.token)))),
                .el("span", ["class": "meta"], .text("app " + t.app))),
            .el("table", ["class": "kv token-facts"], .el("tbody", children: facts)),
        ]
        if !t.feedback.isEmpty {
            s.append(.el("h3", "APNs' answers about it, newest first"))
            s.append(.el("table", ["class": "list feedback"],
                         .el("thead", .el("tr", .el("th", "Time"), .el("th", "Channel"), .el("th", "Reason"), .el("th", "Entry"))),
                         .el("tbody", children: t.feedback.prefix(TokenReport.feedbackShown).map { f in
                             .el("tr", .el("td", .text(f.timestampMs.map(DeadFormat.time) ?? "no time")), .el("td", .text(f.channel)),
                                 .el("td", ["class": "reason"],
                                     .text(TokenReport.reason(f))),
                                 .el("td", ["class": "mono"], .text(f.entryID)))
                         })))
            if t.feedback.count > TokenReport.feedbackShown {
                s.append(.el("p", ["class": "hint"], .text("… \(t.feedback.count - TokenReport.feedbackShown) more")))
            }
        }
        return .el("section", ["class": "card token", "data-app": t.app], children: s)
    }
}
