import DeadLetters
import Foundation
import HTTPMessages
import CallStorage
import RedisClient

/// The console's HTML, server-rendered from plain values. Pure functions that build `Node`s:
/// every value from an event, Redis or APNs is a text node or an attribute value, escaped by
/// the renderer (`Node.render`); links are built from `ConsoleEscaping.queryComponent`s.
/// Nothing is written into a `<script>`, and no page writes HTML as a string.
enum ConsolePages {
    private static func q(_ s: String) -> String { ConsoleEscaping.queryComponent(s) }

    /// Who is looking, for the frame and the forms.
    struct Viewer {
        var name: String
        var role: ConsoleRole
        var csrf: String
    }

    enum Section: String { case overview, fleet, dead, webhooks, audit, none }

    // MARK: Frame

    /// A page: the header (the brand; signed in: the sections, the search box holding
    /// `search`, who is signed in) and `body`.
    static func page(title: String, section: Section, viewer: Viewer?, body: [Node], search: String = "") -> Node {
        var top: [Node] = [.el("a", ["class": "brand", "href": "/console/overview"], .el("span", ["class": "mark"], "◆"), " pushgw ",
                               .el("span", ["class": "sub"], "console"))]
        if let viewer {
            let links: [(Section, String, String)] = [(.overview, "/console/overview", "Overview"), (.fleet, "/console/fleet", "Fleet"),
                                                      (.dead, "/console/dead", "Dead letters"),
                                                      (.webhooks, "/console/webhooks", "Webhooks"), (.audit, "/console/audit", "Audit")]
            top.append(.el("nav", children: links.map { s, href, label in
                .element("a", [Attribute("href", href)] + (s == section ? [Attribute("class", "current"), Attribute("aria-current", "page")] : []),
                         [.text(label)])
            }))
            top.append(searchBox(search))
            top.append(.el("div", ["class": "who"], .el("span", ["class": "name"], .text(viewer.name)),
                           .el("span", ["class": "role role-" + (viewer.role == .admin ? "admin" : "readonly")], .text(viewer.role.rawValue)),
                           .el("form", ["method": "post", "action": "/console/signout"], csrfField(viewer),
                               .el("button", ["class": "link"], "Sign out"))))
        }
        return .group(
            .raw(.doctype), .newline,
            .el("html", ["lang": "en"],
                .el("head", .el("meta", ["charset": "utf-8"]), .el("meta", ["name": "viewport", "content": "width=device-width, initial-scale=1"]),
                    .newline, .el("title", .text(title + " · pushgw console")), .newline,
                    .el("link", ["rel": "stylesheet", "href": "/console/static/console.css"]), .newline,
                    .element("script", [Attribute("src", "/console/static/console.js"), .flag("defer")], []), .newline),
                .el("body", .el("header", ["class": "top"], children: top), .newline, .el("main", .newline, .group(body), .newline))))
    }

    static func csrfField(_ viewer: Viewer) -> Node {
        .el("input", ["type": "hidden", "name": "csrf", "value": viewer.csrf])
    }

    static func message(title: String, viewer: Viewer?, text: String, back: (String, String)? = nil) -> Node {
        var body: [Node] = [.el("h1", .text(title)), .el("p", ["class": "notice"], .text(text))]
        if let (href, label) = back { body.append(.el("p", .el("a", ["href": href], .text(label)))) }
        return page(title: title, section: .none, viewer: viewer, body: body)
    }

    // MARK: Sign-in

    static func signIn(problem: String?, readOnlyAvailable: Bool) -> Node {
        let tokens = readOnlyAvailable ? "the admin token (admin.token_file) or the read-only token (admin.readonly_token_file)"
            : "the admin token (admin.token_file)"
        let body: [Node] = [
            .el("section", ["class": "signin"], .newline,
                .el("h1", "Sign in"), .newline,
                .el("p", ["class": "hint"], .text("Paste \(tokens). The console keeps you signed in with a cookie for 8 hours.")), .newline,
                problem.map { .el("p", ["class": "error", "role": "alert"], .text($0)) } ?? .none, .newline,
                .el("form", ["method": "post", "action": "/console/signin", "autocomplete": "off"], .newline,
                    .el("label", "Token ", .element("input", [Attribute("type", "password"), Attribute("name", "token"), Attribute("id", "token"),
                                                              .flag("required"), .flag("autofocus")], [])), .newline,
                    .el("label", "Your name ", .el("span", ["class": "hint"], "(for the audit trail)"), " ",
                        .el("input", ["type": "text", "name": "name", "id": "name", "maxlength": "64"])), .newline,
                    .el("button", ["class": "primary", "id": "signin"], "Sign in"), .newline), .newline),
        ]
        return page(title: "Sign in", section: .none, viewer: nil, body: body)
    }

    // MARK: Overview

    /// One app's overview figures.
    struct AppOverview {
        var app: ConsoleFigures.App
        var last5: OutcomeHistory.Window
        var last60: OutcomeHistory.Window
        var series: [OutcomeHistory.Point]
        /// Dead letters kept and what a retention trim now would remove; nil when Redis did not say.
        var dead: DeadLetterStore.PendingTrim?
        var retention: DeadLetterRetentionPolicy
        /// With ring receipts on: its VoIP tokens suspected of iOS's silent ban (or why they
        /// could not be read); nil when not read.
        var suspected: Result<(tokens: [String], more: Bool), ConsoleReadError>?
        /// Its pause as Redis holds it (nil inside: running), or why it could not be read; nil
        /// when not read.
        var pause: Result<AppPauseStore.Pause?, ConsoleReadError>? = nil
    }

    static let outcomeNames = ["delivered_voip", "delivered_alert", "dead_lettered", "expired", "undeliverable", "cancelled"]

    static func overview(viewer: Viewer, figures: ConsoleFigures, apps: [AppOverview], redisError: String?, nowMs: Int64) -> Node {
        var live: [Node] = [
            .el("h1", "Overview"),
            .el("div", ["class": "summary"],
                tile("Redis", figures.redisReachable ? "up" : "down", good: figures.redisReachable),
                tile("Ready", figures.readinessProblems.isEmpty ? "yes" : "no", good: figures.readinessProblems.isEmpty),
                tile("Calls in flight", String(figures.callsInFlight), good: nil),
                tile("Apps", String(figures.apps.count), good: nil),
                tile("Updated", DeadFormat.time(nowMs).dropFirst(11).prefix(8) + " UTC", good: nil)),
        ]
        if !figures.readinessProblems.isEmpty {
            live.append(.el("ul", ["class": "problems"], children: figures.readinessProblems.map { .el("li", .text($0)) }))
        }
        if let redisError { live.append(.el("p", ["class": "error"], .text("dead-letter figures unavailable: " + redisError))) }
        live += apps.map { appCard($0, viewer: viewer) }
        return page(title: "Overview", section: .overview, viewer: viewer, body: [.el("div", ["id": "live", "data-refresh-ms": "5000"], children: live)])
    }

    /// An app's pause (docs/operations.md, "Pausing an app"): since when, by whom and why, and
    /// for an admin the button that resumes it, or the one (with an optional reason) that
    /// pauses it, as `pushgw apps pause` and `resume` do. A read-only session sees no button.
    private static func pauseControl(app: String, _ pause: Result<AppPauseStore.Pause?, ConsoleReadError>, viewer: Viewer) -> [Node] {
        let paused: AppPauseStore.Pause?
        switch pause {
        case let .failure(error): return [.el("p", ["class": "error"], .text("whether the app is paused is unknown: " + error.text))]
        case let .success(found): paused = found
        }
        var s: [Node] = []
        if let paused {
            s.append(.el("p", ["class": "warning app-paused"], .text(
                "Paused since \(DeadFormat.time(paused.sinceMs)) by \(paused.user)" + (paused.reason.isEmpty ? "" : ": " + paused.reason)
                    + ". No gateway reads its calls: they wait in its stream; those whose deadline passes get their missed-call "
                    + "alert after the resume (cause paused).")))
        }
        guard viewer.role.mayChange else { return s }
        let hidden = Node.el("input", ["type": "hidden", "name": "app", "value": app])
        if paused != nil {
            s.append(.el("form", ["method": "post", "action": "/console/apps/resume", "class": "pause"], csrfField(viewer), hidden,
                         .el("button", ["type": "submit"], "Resume")))
        } else {
            s.append(.el("form", ["method": "post", "action": "/console/apps/pause", "class": "pause"], csrfField(viewer), hidden,
                         .el("input", ["type": "text", "name": "reason", "maxlength": String(AppPauseStore.maxReason),
                                       "placeholder": "why (optional)", "aria-label": "reason for the pause"]),
                         .el("button", ["type": "submit"], "Pause")))
        }
        return s
    }

    private static func tile(_ label: String, _ value: String, good: Bool?) -> Node {
        let state = good.map { $0 ? " good" : " bad" } ?? ""
        return .el("div", ["class": "tile" + state], .el("div", ["class": "label"], .text(label)), .el("div", ["class": "value"], .text(value)))
    }

    private static func appCard(_ a: AppOverview, viewer: Viewer) -> Node {
        let id = a.app.id
        let health: Node = a.app.refusal.map { .el("span", ["class": "pill bad"], .text("refused by APNs: " + $0)) }
            ?? .el("span", ["class": "pill good"], "healthy")
        var header: [Node] = [.el("h2", .text(id)), health]
        if case .success(_?)? = a.pause { header.append(.el("span", ["class": "pill bad paused"], "paused")) }
        header.append(.el("span", ["class": "meta"], .text(a.app.bundleID + " · " + a.app.environment)))
        var s: [Node] = [.el("header", children: header)]
        if let pause = a.pause { s += pauseControl(app: id, pause, viewer: viewer) }
        if let m = a.app.environmentMismatches {
            s.append(.el("p", ["class": "warning environment-mismatch"], .text(
                "\(m.count) \(m.count == 1 ? "token" : "tokens") refused by APNs (BadDeviceToken) in \(a.app.environment) and delivered "
                    + "through \(m.acceptedIn) since this gateway started, the last at \(DeadFormat.time(m.lastAtMs)): the app's builds and "
                    + "its environment in the config disagree (a development or TestFlight build, or apps.\(id).environment). The tokens "
                    + "are kept, not marked invalid; see pushgw_environment_mismatches_total.")))
        }
        if let calls = a.app.receiptsMissing {
            s.append(.el("p", ["class": "warning receipts-missing"], .text(
                "Ring receipts missing: no device sent a receipt for the app's last \(calls) calls, so its backend is not adding "
                    + "call_ringing (docs/app.md, Ring receipts). Its calls are escalated for want of receipts; no VoIP token is "
                    + "suspected of iOS's silent ban meanwhile. See pushgw_app_receipts_missing.")))
        }
        switch a.suspected {
        case nil:
            break
        case let .failure(error)?:
            s.append(.el("p", ["class": "error"], .text("suspected VoIP tokens unavailable: " + error.text)))
        case let .success(found)?:
            if !found.tokens.isEmpty {
                let count = found.more ? "more than \(found.tokens.count)" : "\(found.tokens.count)"
                s.append(.el("div", ["class": "warning voip-suspected"],
                             .el("p", .text("\(count) VoIP \(found.tokens.count == 1 && !found.more ? "token" : "tokens") suspected of "
                                            + "iOS's silent VoIP ban (their last VoIP rings were accepted and none rang): their calls skip "
                                            + "VoIP and go straight to the alert until a receipt of the token, or for a day. "
                                            + "pushgw tokens show TOKEN says more; see pushgw_voip_suspected_blocked_total.")),
                             .el("ul", ["class": "tokens"],
                                 children: found.tokens.map { .el("li", .el("code", .text(ConsoleEscaping.shortToken($0)))) })))
            }
        }
        let deadText = a.dead.map { "\($0.length)" } ?? "–"
        let trim = a.dead.map { d in
            d.total == 0 ? "nothing (keeps \(a.retention.summary))"
                : "\(d.total) (\(d.byAge) by age, \(d.byCount) by count, \(d.bySize) by size)"
        } ?? "–"
        var stats = [stat("Backlog", .text(a.app.backlog.map { String($0) } ?? "–")),
                     stat("Pending", .text(a.app.pending.map { String($0) } ?? "–")),
                     stat("Dead letters", .el("a", ["href": "/console/dead?app=" + q(id)], .text(deadText))),
                     stat("Live tail", .group(.el("a", ["href": "/console/tail?app=" + q(id) + "&stream=results"], "results"), " · ",
                                              .el("a", ["href": "/console/tail?app=" + q(id) + "&stream=feedback"], "feedback"))),
                     stat("Retention trims next", .text(trim))]
        if let l = a.app.limits { stats += limitStats(l) }
        s.append(.el("dl", ["class": "stats"], children: stats))
        var rows: [Node] = []
        for name in outcomeRowNames(a.last60.outcomes) {
            rows.append(outcomeRow(name, last5: a.last5.outcomes, last60: a.last60.outcomes))
            if name == "delivered_alert" {
                for cause in Set(a.last60.causes.keys).sorted() {
                    rows.append(.el("tr", ["class": "cause"], .el("th", .text("fallback: " + cause)),
                                    .el("td", .text(String(a.last5.causes[cause] ?? 0))), .el("td", .text(String(a.last60.causes[cause] ?? 0)))))
                }
            }
        }
        rows.append(.el("tr", ["class": "latency"], .el("th", "XADD→answer p50"), .el("td", .text(ms(a.last5.p50Ms))), .el("td", .text(ms(a.last60.p50Ms)))))
        rows.append(.el("tr", ["class": "latency"], .el("th", "XADD→answer p99"), .el("td", .text(ms(a.last5.p99Ms))), .el("td", .text(ms(a.last60.p99Ms)))))
        if a.app.ringReceipts {
            rows.append(.el("tr", ["class": "latency ring"], .el("th", "XADD→ringing p50"), .el("td", .text(ms(a.last5.ringP50Ms))),
                            .el("td", .text(ms(a.last60.ringP50Ms)))))
            rows.append(.el("tr", ["class": "latency ring"], .el("th", "XADD→ringing p99"), .el("td", .text(ms(a.last5.ringP99Ms))),
                            .el("td", .text(ms(a.last60.ringP99Ms)))))
        }
        rows.append(.el("tr", .el("th", "Deadline misses"), .el("td", .text(String(a.last5.outcomes["expired"] ?? 0))),
                        .el("td", .text(String(a.last60.outcomes["expired"] ?? 0)))))
        s.append(.el("div", ["class": "columns"],
                     .el("table", ["class": "outcomes"],
                         .el("thead", .el("tr", .el("th", "Outcome"), .el("th", "5 min"), .el("th", "60 min"))),
                         .el("tbody", children: rows)),
                     .el("figure", ["class": "chart"], OutcomeChart.svg(app: id, points: a.series),
                         .el("figcaption", "Calls per minute by outcome; line: XADD→answer p99 (right axis)"))))
        return .el("section", ["class": "app", "data-app": id], children: s)
    }

    /// The outcomes a table lists: the usual ones, then any other counted, by name.
    private static func outcomeRowNames(_ counted: [String: Int]) -> [String] {
        outcomeNames + Set(counted.keys).subtracting(outcomeNames).sorted()
    }

    /// One outcome's row: its swatch and name, its count of the last 5 and 60 minutes.
    private static func outcomeRow(_ name: String, last5: [String: Int], last60: [String: Int]) -> Node {
        .el("tr", ["class": "outcome", "data-outcome": name],
            .el("th", .el("span", ["class": "swatch o-" + name]), .text(name)),
            .el("td", ["class": "n5"], .text(String(last5[name] ?? 0))),
            .el("td", ["class": "n60"], .text(String(last60[name] ?? 0))))
    }

    // MARK: Fleet

    /// One app's outcomes and XADD→answer latencies summed over every gateway.
    struct FleetApp {
        var id: String
        var last5: [String: Int] = [:]
        var last60: [String: Int] = [:]
        var latency5 = [Int](repeating: 0, count: OutcomeHistory.latencyBuckets)
        var latency60 = [Int](repeating: 0, count: OutcomeHistory.latencyBuckets)

        init(id: String) { self.id = id }

        /// Adds one minute of the fleet's counts; `recent`: the minute is of the last 5.
        mutating func add(_ m: FleetMinuteCounts, recent: Bool) {
            for (k, n) in m.outcomes {
                last60[k, default: 0] += n
                if recent { last5[k, default: 0] += n }
            }
            for (i, n) in m.latency where i >= 0 && i < OutcomeHistory.latencyBuckets {
                latency60[i] += n
                if recent { latency5[i] += n }
            }
        }

        func quantileMs(_ q: Double, recent: Bool) -> Double? {
            let h = recent ? latency5 : latency60
            return OutcomeHistory.quantile(q, h, count: h.reduce(0, +))
        }
    }

    static func fleet(viewer: Viewer, gateways: [(name: String, card: GatewayCard?)], apps: [FleetApp], redisError: String?,
                      nowMs: Int64) -> Node {
        let total5 = apps.reduce(0) { $0 + $1.last5.values.reduce(0, +) }
        let total60 = apps.reduce(0) { $0 + $1.last60.values.reduce(0, +) }
        var body: [Node] = [
            .el("h1", "Fleet"),
            .el("p", ["class": "hint"], .text("Every gateway on this Redis: each adds what it counted every 5 seconds, so a gateway that "
                + "stopped still counts for the minutes it ran. The overview shows this gateway alone.")),
            .el("div", ["class": "summary"],
                tile("Gateways live", String(gateways.count), good: gateways.isEmpty ? false : nil),
                tile("Calls, 5 min", String(total5), good: nil),
                tile("Calls, 60 min", String(total60), good: nil),
                tile("Updated", DeadFormat.time(nowMs).dropFirst(11).prefix(8) + " UTC", good: nil)),
        ]
        if let redisError { body.append(.el("p", ["class": "error"], .text("fleet figures unavailable: " + redisError))) }
        func ago(_ ms: Int64) -> String { DeadFormat.age(max(0, nowMs - ms)) + " ago" }
        let head = Node.el("thead", .el("tr", .el("th", "Gateway"), .el("th", "Roles"), .el("th", "Version"), .el("th", "Started"),
                                        .el("th", "Last seen"), .el("th", "In flight")))
        let rows: [Node] = gateways.map { g in
            let c = g.card
            return .el("tr", ["class": "gateway", "data-gateway": g.name],
                       .el("td", ["data-label": "Gateway", "class": "name"], .text(g.name)),
                       .el("td", ["data-label": "Roles"], .text(c.map { $0.roles.joined(separator: ", ") } ?? "–")),
                       .el("td", ["data-label": "Version", "class": "version"], .text(c?.version ?? "–")),
                       .el("td", ["data-label": "Started"], .text(c.map { ago($0.startedMs) } ?? "–")),
                       .el("td", ["data-label": "Last seen"], .text(c.map { ago($0.seenMs) } ?? "–")),
                       .el("td", ["data-label": "In flight", "class": "in-flight"], .text(c.map { String($0.callsInFlight) } ?? "–")))
        }
        body.append(.el("section", ["class": "gateways"], .el("h2", "Gateways live"),
                        gateways.isEmpty ? .el("p", ["class": "notice"], "No gateway holds a lease in the registry.")
                            : .el("table", ["class": "list", "id": "gateways"], head, .el("tbody", children: rows))))
        for app in apps {
            var rows = outcomeRowNames(app.last60).map { outcomeRow($0, last5: app.last5, last60: app.last60) }
            for (label, q) in [("XADD→answer p50", 0.50), ("XADD→answer p99", 0.99)] {
                rows.append(.el("tr", ["class": "latency"], .el("th", .text(label)), .el("td", .text(ms(app.quantileMs(q, recent: true)))),
                                .el("td", .text(ms(app.quantileMs(q, recent: false))))))
            }
            body.append(.el("section", ["class": "app fleet", "data-app": app.id],
                            .el("header", .el("h2", .text(app.id))),
                            .el("table", ["class": "outcomes"],
                                .el("thead", .el("tr", .el("th", "Outcome"), .el("th", "5 min"), .el("th", "60 min"))),
                                .el("tbody", children: rows))))
        }
        return page(title: "Fleet", section: .fleet, viewer: viewer, body: [.el("div", ["id": "live", "data-refresh-ms": "5000"], children: body)])
    }

    /// A label and its value.
    private static func stat(_ label: String, _ value: Node) -> Node { .el("div", .el("dt", .text(label)), .el("dd", value)) }

    /// An app's limits and where it stands (docs/operations.md, *Limits*): in flight of its
    /// cap, its rate, and the seconds its events waited for the rate.
    private static func limitStats(_ l: ConsoleFigures.Limits) -> [Node] {
        let cap = "\(l.inFlight) of \(l.maxInFlight)" + (l.maxInFlightSet ? " (max_in_flight)" : " (default cap)")
        let rate = l.eventsPerSecond.map { "\($0)/s, burst \(l.burst ?? $0)" } ?? "no limit"
        let throttled = l.throttledSeconds.map { String(format: "%.1f s", $0) } ?? "–"
        return [.el("div", ["class": "limit in-flight"], .el("dt", "In flight"), .el("dd", .text(cap))),
                .el("div", ["class": "limit rate"], .el("dt", "Event rate"), .el("dd", .text(rate))),
                .el("div", ["class": "limit throttled"], .el("dt", "Waited for its rate"), .el("dd", .text(throttled)))]
    }

    /// A latency bound as `≤ 12 ms` (the histogram's bucket bound).
    private static func ms(_ v: Double?) -> String {
        guard let v else { return "–" }
        return v < 10 ? String(format: "≤ %.1f ms", v) : String(format: "≤ %.0f ms", v)
    }

    // MARK: Dead letters

    /// The list's filters as the form holds them (text, unparsed), for links and hidden fields.
    struct ListFilters: Equatable {
        var app = ""
        var reason = ""
        var call = ""
        var since = ""
        var olderThan = ""

        var items: [(String, String)] { [("app", app), ("reason", reason), ("call", call), ("since", since), ("older", olderThan)] }
        var isEmpty: Bool { items.allSatisfy { $0.1.isEmpty } }
    }

    /// A hidden input of a form.
    private static func hidden(_ name: String, _ value: String) -> Node {
        .element("input", [Attribute("type", "hidden"), Attribute("name", name), Attribute("value", value)], [])
    }

    static func deadList(viewer: Viewer, apps: [String], filters: ListFilters, records: [DeadLetterRecord], next: String?,
                         scanned: Int, problem: String?, nowMs: Int64) -> Node {
        var s: [Node] = [.el("h1", "Dead letters")]
        var options: [Node] = [.el("option", ["value": ""], "all apps")]
        for app in apps {
            options.append(.element("option", [Attribute("value", app)] + (app == filters.app ? [.flag("selected")] : []), [.text(app)]))
        }
        s.append(.el("form", ["class": "filters", "method": "get", "action": "/console/dead", "id": "filters"],
                     .el("label", "App ", .el("select", ["name": "app", "id": "f-app"], children: options)),
                     .el("label", "Reason starts with ", .el("input", ["name": "reason", "id": "f-reason", "value": filters.reason,
                                                                      "placeholder": "apns_credentials"])),
                     .el("label", "Call id ", .el("input", ["name": "call", "id": "f-call", "value": filters.call])),
                     .el("label", "Newer than ", .el("input", ["name": "since", "id": "f-since", "value": filters.since, "placeholder": "2h",
                                                              "size": "8"])),
                     .el("label", "Older than ", .el("input", ["name": "older", "id": "f-older", "value": filters.olderThan,
                                                              "placeholder": "1d", "size": "8"])),
                     .el("button", ["id": "apply"], "Filter"),
                     filters.isEmpty ? .none : .el("a", ["class": "clear", "href": "/console/dead"], "clear")))
        if let problem { s.append(.el("p", ["class": "error", "role": "alert"], .text(problem))) }

        var selection: [Node] = filters.items.filter { !$0.1.isEmpty }.map { k, v in hidden(k, v) }
        selection.append(.el("div", ["class": "actions"],
                             .el("label", "Rate ", .el("input", ["name": "rate", "value": "20/s", "size": "6", "id": "rate"])),
                             .el("button", ["name": "action", "value": "replay", "id": "replay-selected"], "Replay selected…"),
                             .el("button", ["name": "action", "value": "purge", "class": "danger", "id": "purge-selected"], "Purge selected…"),
                             .el("span", ["class": "sep"]),
                             .el("button", ["name": "action", "value": "replay-all", "id": "replay-all"], "Replay all matching…"),
                             .el("button", ["name": "action", "value": "purge-all", "class": "danger", "id": "purge-all"], "Purge all matching…")))
        if records.isEmpty {
            selection.append(.el("p", ["class": "empty", "id": "no-dead"], .text("No dead letters\(filters.isEmpty ? "" : " match these filters").")))
        } else {
            let head = Node.el("thead", .el("tr", .el("th", .el("input", ["type": "checkbox", "id": "select-all", "aria-label": "select all"])),
                                        .el("th", "Dead letter"), .el("th", "App"), .el("th", "Age"), .el("th", "Reason"), .el("th", "Call"),
                                        .el("th", "Type"), .el("th", "Attempts"), .el("th", "Replays")))
            let rows: [Node] = records.map { r in
                let ref = r.app + "/" + r.id
                return .el("tr", ["class": "dead", "data-id": ref],
                           .el("td", .el("input", ["type": "checkbox", "name": "ids", "value": ref, "aria-label": "select"])),
                           .el("td", .el("a", ["class": "id", "href": detailHref(r)], .text(r.id))), .el("td", .text(r.app)),
                           .el("td", ["title": DeadFormat.time(r.deadAtMs)], .text(DeadFormat.age(nowMs - r.deadAtMs))),
                           .el("td", ["class": "reason"], .text(r.reason)),
                           .el("td", ["class": "call"], .text(r.callID ?? "-"),
                               r.device.map { .el("span", ["class": "device"], .text(" · device " + $0)) } ?? .none),
                           .el("td", .text(r.eventType ?? "-")),
                           .el("td", .text(String(r.attempts.count))), .el("td", .text(String(r.replays))))
            }
            selection.append(.el("table", ["class": "list", "id": "dead-table"], head, .el("tbody", children: rows)))
        }
        s.append(.el("form", ["method": "get", "action": "/console/dead/preview", "id": "selection"], children: selection))
        s.append(.el("p", ["class": "pager"],
                     next.map { .el("a", ["id": "older-page", "href": "/console/dead?" + FormData.encode(filters.items + [("before", $0)])], "Older →") }
                        ?? .none,
                     .el("span", ["class": "hint"], .text("\(scanned) entries read for this page"))))
        return page(title: "Dead letters", section: .dead, viewer: viewer, body: s)
    }

    static func detailHref(_ r: DeadLetterRecord) -> String { detailHref(app: r.app, id: r.id) }
    static func detailHref(app: String, id: String) -> String { "/console/dead/" + q(app) + "/" + q(id) }

    /// The crumbs above a page under the dead letters: a link back, then where this is.
    private static func crumbs(_ here: String) -> Node {
        .el("p", ["class": "crumbs"], .el("a", ["href": "/console/dead"], "Dead letters"), .text(" / " + here))
    }

    static func deadLetter(viewer: Viewer, record r: DeadLetterRecord, ringTimeoutMs: Int64, nowMs: Int64) -> Node {
        func at(_ ms: Int64?) -> String { ms.map { "\(DeadFormat.time($0)) (\(DeadFormat.age(nowMs - $0)) ago)" } ?? "–" }
        func fact(_ label: String, _ value: String, _ attributes: [Attribute] = []) -> Node {
            .el("tr", .el("th", .text(label)), .element("td", attributes, [.text(value)]))
        }
        let ref = r.app + "/" + r.id
        var s: [Node] = [crumbs(r.app), .el("h1", "Dead letter ", .el("span", ["class": "mono", "id": "dead-id"], .text(r.id))),
                         .el("div", ["class": "actions"],
                             .el("a", ["class": "button", "id": "replay-one", "href": "/console/dead/preview?action=replay&ids=" + q(ref)], "Replay…"),
                             .el("a", ["class": "button danger", "id": "purge-one", "href": "/console/dead/preview?action=purge&ids=" + q(ref)], "Purge…"))]
        let deadline = DeadFormat.deadline(r, ringTimeoutMs: ringTimeoutMs, nowMs: nowMs)
        let facts = Node.el("div", ["class": "card"], .el("table", ["class": "kv", "id": "facts"], .el("tbody",
            fact("Reason", r.reason, [Attribute("class", "reason")]),
            fact("App", r.app),
            fact("Call", r.callID ?? "– (the event has no readable id)", [Attribute("class", "call")]),
            r.device.map { fact("Device", $0 + " (this device's ring alone: the call has its result; a replay rings this device only)",
                                [Attribute("id", "device")]) } ?? .none,
            fact("Type", r.eventType ?? "–"),
            fact("VoIP token", ConsoleEscaping.shortToken(r.voipToken), [Attribute("class", "mono")]),
            fact("Alert token", ConsoleEscaping.shortToken(r.alertToken), [Attribute("class", "mono")]),
            fact("Dead since", at(r.deadAtMs)),
            fact("First failure", at(r.firstFailureMs)),
            fact("Last failure", at(r.lastFailureMs)),
            fact("Replays so far", String(r.replays), [Attribute("id", "replays")]),
            fact("Deadline", deadline, [Attribute("id", "deadline")]))))

        var history: [Node] = []
        if r.rounds.count > 1 {
            history.append(.el("h2", "Rounds"))
            history.append(.el("table", ["class": "list"],
                               .el("thead", .el("tr", .el("th", "Round"), .el("th", "Dead letter"), .el("th", "Attempts"), .el("th", "Reason"))),
                               .el("tbody", children: r.rounds.map { round in
                                   .el("tr", .el("td", .text(String(round.round))),
                                       .el("td", .text(round.deadEntryID + (round.round == r.rounds.count ? " (this one)" : " (replayed)"))),
                                       .el("td", .text(String(round.attempts.count))), .el("td", .text(round.reason)))
                               })))
        }
        let attempts = r.attempts
        history.append(.el("h2", ["class": "first"], .text("Attempts (\(attempts.count))")))
        if attempts.isEmpty {
            history.append(.el("p", ["class": "empty", "id": "no-attempts"], "None: nothing was sent (the event was refused before any push)."))
        } else {
            history.append(.el("ol", ["class": "timeline", "id": "attempts"], children: attempts.map { a in
                let ok = a.status.map { (200..<300).contains($0) } ?? false
                return .el("li", ["class": "attempt " + (ok ? "ok" : "failed")],
                           .el("div", ["class": "when"], .text(a.timeMs.map(DeadFormat.time) ?? "–")),
                           .el("div", ["class": "what"], .el("span", ["class": "channel"], .text(a.channel ?? "–")),
                               .el("span", ["class": "status"], .text(a.status.map { String($0) } ?? "no answer")),
                               .el("span", ["class": "why"], .text(a.reason ?? a.error ?? ""))),
                           .el("div", ["class": "more"], .text("round \(a.round) · token "),
                               .el("span", ["class": "mono"], .text(a.token.map { "…" + $0 } ?? "–")), " · apns-id ",
                               .el("span", ["class": "mono"], .text(a.apnsID ?? "–"))))
            }))
        }
        s.append(.el("div", ["class": "detail"], facts, .el("div", ["class": "card"], children: history)))
        s.append(.el("h2", "Event"))
        if let note = DeadFormat.cutNote(r) {
            s.append(.el("p", ["class": "hint", "id": "event-cut"], .text(note.prefix(1).uppercased() + note.dropFirst() + ".")))
        }
        if let text = r.eventText, let pretty = PrettyJSON.pretty(text, margin: "") {
            s.append(.el("pre", ["class": "event", "id": "event"], .text(pretty, keepingLines: true)))
        } else {
            s.append(.el("p", ["class": "hint"], .text(r.eventText == nil ? "Not UTF-8; each invalid byte is shown as \\xNN." : "Not JSON, shown as stored.")))
            // Each line made visible on its own (a line feed of the event stays a line break).
            let lines = r.event.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            var text: [Node] = []
            for (i, line) in lines.enumerated() {
                if i > 0 { text.append(.text("\n", keepingLines: true)) }
                text.append(.text(line))
            }
            s.append(.el("pre", ["class": "event", "id": "event"], children: text))
        }
        return page(title: "Dead letter \(r.id)", section: .dead, viewer: viewer, body: s)
    }

    // MARK: Replay and purge

    enum Action: String {
        case replay, purge
    }

    /// The dry run of a replay or purge: what each listed dead letter would become (for a
    /// replay: whether it rings or gets the missed-call alert only), how far the scan went, a
    /// link that goes on from there when it stopped early, and the confirmation form for
    /// exactly the dead letters listed. `filters` are those of an "all matching" choice (for
    /// the audit record).
    static func preview(viewer: Viewer, action: Action, rows: [OperatorsConsole.PreviewRow], filters: ListFilters?,
                        rate: ReplayRate, scan: OperatorsConsole.PreviewScan, more: String?, cappedNamed: Bool, refusals: [String] = [],
                        nowMs: Int64) -> Node {
        let verb = action == .replay ? "replayed" : "purged"
        let counted = DeadFormat.count(rows.count, "dead letter")
        var s: [Node] = [crumbs(action == .replay ? "Replay" : "Purge"), .el("h1", .text("\(action == .replay ? "Replay" : "Purge") \(counted)?"))]
        let rateText = action == .replay ? " at \(rate)" : ""
        s.append(.el("p", ["class": "notice", "id": "dry-run"], .text("Dry run: \(counted) would be \(verb)\(rateText). Nothing has changed yet.")))
        if action == .replay, !rows.isEmpty {
            var tally: [String: Int] = [:]
            for r in rows { tally[r.forecast.word, default: 0] += 1 }
            let parts = [("rings", "will ring (VoIP push)"), ("alert-only", "get the missed-call alert only (their deadline passed)"),
                         ("alert", "get an alert (no VoIP token)"), ("nothing-sent", "send nothing (deadline passed, no alert token)"),
                         ("cancel", "are cancels"), ("refused-again", "will be refused again (invalid events)"),
                         ("not-replayable", "cannot be replayed (only part of the event was kept)")]
                .compactMap { word, what in tally[word].map { "\($0) \(what)" } }
            s.append(.el("p", ["id": "forecast"], .text(parts.joined(separator: "; ") + ".")))
        }
        if filters != nil {
            s.append(.el("p", ["class": "hint", "id": "scanned"], .text(DeadFormat.count(scan.scanned, "entry", "entries") + " read, oldest first.")))
        }
        if let why = scan.stoppedBecause {
            s.append(.el("p", ["class": "error", "id": "more"], .text("More may match: the scan stopped here, as \(why). Confirm acts on the ones listed"),
                         more.map { .group("; ", .el("a", ["href": $0, "id": "next-preview"], "preview the next ones →")) } ?? .none, "."))
        }
        if cappedNamed {
            s.append(.el("p", ["class": "error"],
                         .text("More were selected than the console acts on at once (\(OperatorsConsole.maxTargets)): the first ones are listed.")))
        }
        for refusal in refusals {
            s.append(.el("p", ["class": "warning", "data-warning": "credential-refused"], .text(refusal)))
        }
        if action == .purge {
            s.append(.el("p", ["class": "warning"], "A purge deletes the dead letters and their replay history for good."))
        }
        s.append(.el("table", ["class": "list", "id": "preview"],
                     .el("thead", .el("tr", .el("th", "Dead letter"), .el("th", "Call"), .el("th", "Reason"), .el("th", "What happens"))),
                     .el("tbody", children: rows.map(\.row))))
        if rows.isEmpty {
            s.append(.el("p", .el("a", ["href": "/console/dead"], "Back to the dead letters")))
        } else if viewer.role.mayChange {
            var form: [Node] = [csrfField(viewer)]
            form += rows.map(\.input)
            if let filters { form += filters.items.filter { !$0.1.isEmpty }.map { k, v in hidden("f-" + k, v) } }
            if action == .replay { form.append(hidden("rate", rate.description)) }
            if !refusals.isEmpty {
                form.append(.el("p", .el("label", .element("input", [Attribute("type", "checkbox"), Attribute("name", despiteRefusalField),
                                                                      Attribute("value", "yes"), Attribute("id", "despite-refusal"), .flag("required")], []),
                                         " ", .text(despiteRefusalLabel))))
            }
            form.append(.el("button", ["class": action == .purge ? "danger" : "primary", "id": "confirm"],
                            .text("Confirm: \(action == .replay ? "replay" : "purge") \(counted)")))
            form.append(" ")
            form.append(.el("a", ["href": "/console/dead"], "Cancel"))
            s.append(.el("form", ["method": "post", "action": "/console/dead/" + action.rawValue, "class": "confirm"], children: form))
        } else {
            s.append(.el("p", ["class": "notice", "id": "read-only"], "Signed in read-only: you can see this preview but not confirm it."))
        }
        return page(title: action == .replay ? "Replay" : "Purge", section: .dead, viewer: viewer, body: s)
    }

    /// The confirmation's checkbox a replay needs while APNs refuses an app's credential.
    static let despiteRefusalField = "despite_refusal"
    static let despiteRefusalLabel = "Replay anyway: I know APNs may still refuse this app's credential"

    /// One dead letter's row of a preview, and its confirmation form's hidden input.
    static func previewRow(_ r: DeadLetterRecord, action: Action, forecast: ReplayForecast, nowMs: Int64) -> (row: Node, input: Node) {
        let what = action == .replay ? "replay #\(r.replays + 1): " + forecast.text(nowMs: nowMs) : "deleted"
        let row = Node.el("tr", ["data-forecast": forecast.word], .el("td", .el("a", ["href": detailHref(r)], .text(r.app + "/" + r.id))),
                          .el("td", .text(r.callID ?? "-")), .el("td", .text(r.reason)), .el("td", .text(what)))
        return (row, hidden("ids", r.app + "/" + r.id))
    }

    /// A replay or purge under way or done.
    static func job(viewer: Viewer, job: ConsoleJob) -> Node {
        let title = job.action == .replay ? "Replay" : "Purge"
        let state = job.isDone ? (job.cancelled != nil ? "cancelled" : job.failure == nil ? "done" : "stopped") : "running"
        var s: [Node] = [crumbs("\(job.action.rawValue) #\(job.number)"), .el("h1", .text("\(title) #\(job.number)")),
                         .el("p", ["class": "notice", "id": "job-state", "data-state": state], .text(job.summaryLine))]
        if let failure = job.failure { s.append(.el("p", ["class": "error"], .text(failure))) }
        if job.mayCancel && viewer.role.mayChange {
            s.append(.el("form", ["method": "post", "action": "/console/jobs/cancel", "class": "confirm"], csrfField(viewer),
                         hidden("job", String(job.number)),
                         .el("button", ["class": "danger", "id": "cancel-job"], "Cancel: stop after the dead letter in progress")))
        }
        if !job.lines.isEmpty {
            s.append(.el("ul", ["class": "log", "id": "job-lines"], children: job.lines.map { .el("li", .text($0)) }))
        }
        if job.isDone {
            s.append(.el("p", .el("a", ["href": "/console/audit"], "See it in the audit trail"), " · ",
                         .el("a", ["href": "/console/dead"], "Back to the dead letters")))
        }
        let live: Node = .element("div", [Attribute("id", "live")] + (job.isDone ? [] : [Attribute("data-refresh-ms", "1000")]), s)
        return page(title: "\(title) #\(job.number)", section: .dead, viewer: viewer, body: [live])
    }

    // MARK: Live tail

    /// One entry of the tail: its id, time and the cells its stream's columns show.
    struct TailRow {
        var id: String
        var timeMs: Int64
        var cells: [String]
        /// The result's outcome or the feedback's reason (a row's `data-kind`).
        var kind: String

        /// The columns of each stream, in the order `cells` holds them.
        static func columns(_ stream: CallHistoryStore.Stream) -> [String] {
            switch stream {
            case .results: return ["Call", "Type", "Outcome", "Cause", "Devices"]
            case .feedback: return ["Token", "Channel", "Reason", "Environment"]
            }
        }

        init(_ entry: StreamEntry, of stream: CallHistoryStore.Stream) {
            id = entry.id
            timeMs = entry.timeMs ?? 0
            func field(_ name: String) -> String { entry.values[name].map { String(decoding: $0, as: UTF8.self) } ?? "" }
            switch stream {
            case .results:
                let result = entry.values["result"].flatMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] } ?? [:]
                func text(_ name: String) -> String { (result[name] as? String) ?? "" }
                let devices = (result["devices"] as? [Any])?.count
                kind = text("outcome")
                cells = [text("id"), text("type"), kind, text("cause"), devices.map(String.init) ?? "1"]
            case .feedback:
                kind = field("reason")
                cells = [field("token"), field("channel"), kind, field("environment")]
            }
        }
    }

    static func tail(viewer: Viewer, apps: [String], app: String, stream: CallHistoryStore.Stream, rows: [TailRow], problem: String?,
                     nowMs: Int64) -> Node {
        let picks: [Node] = apps.flatMap { a in
            CallHistoryStore.Stream.allCases.map { st in
                let here = a == app && st == stream
                return Node.element("a", [Attribute("href", "/console/tail?app=" + q(a) + "&stream=" + st.rawValue)]
                                    + (here ? [Attribute("class", "current"), Attribute("aria-current", "page")] : []),
                                    [.text(a + " · " + st.rawValue)])
            }
        }
        var live: [Node] = [
            .el("p", ["class": "hint"], .text("The newest \(OperatorsConsole.tailSize) entries of PREFIX:{\(app)}:\(stream.rawValue), "
                + "newest first; the page refreshes every 2 s. Updated " + DeadFormat.time(nowMs).dropFirst(11).prefix(8) + " UTC.")),
        ]
        if let problem { live.append(.el("p", ["class": "error"], .text("could not read the stream: " + problem))) }
        let columns = TailRow.columns(stream)
        if rows.isEmpty && problem == nil {
            live.append(.el("p", ["class": "empty", "id": "tail-empty"], "Nothing yet."))
        } else {
            let head = Node.el("thead", .el("tr", children: [.el("th", "Time")] + columns.map { .el("th", .text($0)) }))
            let body: [Node] = rows.map { r in
                .el("tr", ["class": "tail", "data-entry": r.id, "data-kind": r.kind],
                    children: [.el("td", ["data-label": "Time"], .text(DeadFormat.time(r.timeMs)))]
                        + zip(columns, r.cells).map { .el("td", ["data-label": $0.0, "class": "c-" + $0.0.lowercased()], .text($0.1)) })
            }
            live.append(.el("table", ["class": "list", "id": "tail"], head, .el("tbody", children: body)))
        }
        let body: [Node] = [.el("h1", "Live tail"), .el("nav", ["class": "tail-picks"], children: picks),
                            .el("div", ["id": "live", "data-refresh-ms": "2000"], children: live)]
        return page(title: "Live tail", section: .overview, viewer: viewer, body: body)
    }

    // MARK: Audit

    static func audit(viewer: Viewer, entries: [AuditEntry], next: String?, problem: String?) -> Node {
        var s: [Node] = [.el("h1", "Audit trail"),
                         .el("p", ["class": "hint"], "Every replay and purge, from the command line and the console, newest first.")]
        if let problem { s.append(.el("p", ["class": "error"], .text(problem))) }
        if entries.isEmpty && problem == nil {
            s.append(.el("p", ["class": "empty"], "Nothing yet."))
        } else {
            let head = Node.el("thead", .el("tr", .el("th", "Time"), .el("th", "Verb"), .el("th", "Who"), .el("th", "Done"), .el("th", "Dead letters"),
                                            .el("th", "Filters"), .el("th", "Options")))
            let rows: [Node] = entries.map { e in
                let who = e.user + (e.sudoUser.map { " (sudo \($0))" } ?? "")
                let ids = e.ids.prefix(5).joined(separator: ", ") + (e.ids.count > 5 ? ", …" : "")
                return .el("tr", ["class": "audit", "data-verb": e.verb], .el("td", .text(DeadFormat.time(e.timeMs))),
                           .el("td", ["class": "verb"], .text(e.verb)), .el("td", ["class": "user"], .text(who)),
                           .el("td", .text("\(e.done) of \(e.requested)")), .el("td", ["class": "ids"], .text(ids)),
                           .el("td", ["class": "mono"], .text(e.filters == "null" ? "–" : e.filters)), .el("td", ["class": "mono"], .text(e.options)))
            }
            s.append(.el("table", ["class": "list", "id": "audit"], head, .el("tbody", children: rows)))
        }
        if let next { s.append(.el("p", ["class": "pager"], .el("a", ["href": "/console/audit?before=" + q(next)], "Older →"))) }
        return page(title: "Audit", section: .audit, viewer: viewer, body: s)
    }
}
