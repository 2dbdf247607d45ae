import DeadLetters
import Foundation
import CallStorage

/// The console's HTML, server-rendered from plain values. Pure functions: every value from an
/// event, Redis or APNs goes through `ConsoleEscaping` (`h` for text, `attr` for attributes,
/// `q` for a query or path component) and nothing is written into a `<script>`.
enum ConsolePages {
    private static func h(_ s: String) -> String { ConsoleEscaping.html(s) }
    private static func attr(_ s: String) -> String { ConsoleEscaping.attribute(s) }
    private static func q(_ s: String) -> String { ConsoleEscaping.queryComponent(s) }

    /// Who is looking, for the frame and the forms.
    struct Viewer {
        var name: String
        var role: ConsoleRole
        var csrf: String
    }

    enum Section: String { case overview, dead, audit, none }

    // MARK: Frame

    static func page(title: String, section: Section, viewer: Viewer?, body: String) -> String {
        var nav = ""
        var who = ""
        if let viewer {
            let links: [(Section, String, String)] = [(.overview, "/console/overview", "Overview"), (.dead, "/console/dead", "Dead letters"),
                                                      (.audit, "/console/audit", "Audit")]
            nav = "<nav>" + links.map { s, href, label in
                #"<a href="\#(href)"\#(s == section ? #" class="current" aria-current="page""# : "")>\#(label)</a>"#
            }.joined() + "</nav>"
            who = #"<div class="who"><span class="name">\#(h(viewer.name))</span><span class="role role-\#(viewer.role == .admin ? "admin" : "readonly")">\#(viewer.role.rawValue)</span>"#
                + #"<form method="post" action="/console/signout">\#(csrfField(viewer))<button class="link">Sign out</button></form></div>"#
        }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(h(title)) · pushgw console</title>
            <link rel="stylesheet" href="/console/static/console.css">
            <script src="/console/static/console.js" defer></script>
            </head><body>
            <header class="top"><a class="brand" href="/console/overview"><span class="mark">◆</span> pushgw <span class="sub">console</span></a>\(nav)\(who)</header>
            <main>
            \(body)
            </main></body></html>
            """
    }

    static func csrfField(_ viewer: Viewer) -> String {
        #"<input type="hidden" name="csrf" value="\#(attr(viewer.csrf))">"#
    }

    static func message(title: String, viewer: Viewer?, text: String, back: (String, String)? = nil) -> String {
        var body = #"<h1>\#(h(title))</h1><p class="notice">\#(h(text))</p>"#
        if let (href, label) = back { body += #"<p><a href="\#(attr(href))">\#(h(label))</a></p>"# }
        return page(title: title, section: .none, viewer: viewer, body: body)
    }

    // MARK: Sign-in

    static func signIn(problem: String?, readOnlyAvailable: Bool) -> String {
        let notice = problem.map { #"<p class="error" role="alert">\#(h($0))</p>"# } ?? ""
        let tokens = readOnlyAvailable ? "the admin token (admin.token_file) or the read-only token (admin.readonly_token_file)"
            : "the admin token (admin.token_file)"
        let body = """
            <section class="signin">
            <h1>Sign in</h1>
            <p class="hint">Paste \(tokens). The console keeps you signed in with a cookie for 8 hours.</p>
            \(notice)
            <form method="post" action="/console/signin" autocomplete="off">
            <label>Token <input type="password" name="token" id="token" required autofocus></label>
            <label>Your name <span class="hint">(for the audit trail)</span> <input type="text" name="name" id="name" maxlength="64"></label>
            <button class="primary" id="signin">Sign in</button>
            </form>
            </section>
            """
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
    }

    static let outcomeNames = ["delivered_voip", "delivered_alert", "dead_lettered", "expired", "undeliverable", "cancelled"]

    static func overview(viewer: Viewer, figures: ConsoleFigures, apps: [AppOverview], redisError: String?, nowMs: Int64) -> String {
        var body = #"<div id="live" data-refresh-ms="5000">"#
        body += #"<h1>Overview</h1><div class="summary">"#
        body += tile("Redis", figures.redisReachable ? "up" : "down", good: figures.redisReachable)
        body += tile("Ready", figures.readinessProblems.isEmpty ? "yes" : "no", good: figures.readinessProblems.isEmpty)
        body += tile("Calls in flight", String(figures.callsInFlight), good: nil)
        body += tile("Apps", String(figures.apps.count), good: nil)
        body += tile("Updated", DeadFormat.time(nowMs).dropFirst(11).prefix(8) + " UTC", good: nil)
        body += "</div>"
        if !figures.readinessProblems.isEmpty {
            body += #"<ul class="problems">"# + figures.readinessProblems.map { "<li>\(h($0))</li>" }.joined() + "</ul>"
        }
        if let redisError { body += #"<p class="error">dead-letter figures unavailable: \#(h(redisError))</p>"# }
        for a in apps { body += appCard(a) }
        body += "</div>"
        return page(title: "Overview", section: .overview, viewer: viewer, body: body)
    }

    private static func tile(_ label: String, _ value: String, good: Bool?) -> String {
        let state = good.map { $0 ? " good" : " bad" } ?? ""
        return #"<div class="tile\#(state)"><div class="label">\#(h(label))</div><div class="value">\#(h(value))</div></div>"#
    }

    private static func appCard(_ a: AppOverview) -> String {
        let id = a.app.id
        let health = a.app.refusal.map { #"<span class="pill bad">refused by APNs: \#(h($0))</span>"# } ?? #"<span class="pill good">healthy</span>"#
        var s = #"<section class="app" data-app="\#(attr(id))"><header><h2>\#(h(id))</h2>\#(health)"#
        s += #"<span class="meta">\#(h(a.app.bundleID)) · \#(h(a.app.environment))</span></header>"#
        if let m = a.app.environmentMismatches {
            s += #"<p class="warning environment-mismatch">\#(m.count) \#(m.count == 1 ? "token" : "tokens") refused by APNs "#
                + #"(BadDeviceToken) in \#(h(a.app.environment)) and delivered through \#(h(m.acceptedIn)) since this gateway "#
                + #"started, the last at \#(h(DeadFormat.time(m.lastAtMs))): the app's builds and its environment in the "#
                + #"config disagree (a development or TestFlight build, or apps.\#(h(id)).environment). The tokens are kept, "#
                + #"not marked invalid; see pushgw_environment_mismatches_total.</p>"#
        }
        let deadText = a.dead.map { "\($0.length)" } ?? "–"
        let trim = a.dead.map { d in
            d.total == 0 ? "nothing (keeps \(a.retention.summary))"
                : "\(d.total) (\(d.byAge) by age, \(d.byCount) by count, \(d.bySize) by size)"
        } ?? "–"
        s += #"<dl class="stats">"#
        s += stat("Backlog", h(a.app.backlog.map { String($0) } ?? "–"))
        s += stat("Pending", h(a.app.pending.map { String($0) } ?? "–"))
        s += stat("Dead letters", #"<a href="/console/dead?app=\#(q(id))">\#(h(deadText))</a>"#)
        s += stat("Retention trims next", h(trim))
        s += "</dl>"
        s += #"<div class="columns">"#
        s += "<table class=\"outcomes\"><thead><tr><th>Outcome</th><th>5 min</th><th>60 min</th></tr></thead><tbody>"
        let names = outcomeNames + Set(a.last60.outcomes.keys).subtracting(outcomeNames).sorted()
        for name in names {
            s += #"<tr class="outcome" data-outcome="\#(attr(name))"><th><span class="swatch o-\#(attr(name))"></span>\#(h(name))</th>"#
                + #"<td class="n5">\#(a.last5.outcomes[name] ?? 0)</td><td class="n60">\#(a.last60.outcomes[name] ?? 0)</td></tr>"#
            if name == "delivered_alert" {
                for cause in Set(a.last60.causes.keys).sorted() {
                    s += #"<tr class="cause"><th>fallback: \#(h(cause))</th><td>\#(a.last5.causes[cause] ?? 0)</td><td>\#(a.last60.causes[cause] ?? 0)</td></tr>"#
                }
            }
        }
        s += #"<tr class="latency"><th>XADD→answer p50</th><td>\#(ms(a.last5.p50Ms))</td><td>\#(ms(a.last60.p50Ms))</td></tr>"#
        s += #"<tr class="latency"><th>XADD→answer p99</th><td>\#(ms(a.last5.p99Ms))</td><td>\#(ms(a.last60.p99Ms))</td></tr>"#
        s += #"<tr><th>Deadline misses</th><td>\#(a.last5.outcomes["expired"] ?? 0)</td><td>\#(a.last60.outcomes["expired"] ?? 0)</td></tr>"#
        s += "</tbody></table>"
        s += #"<figure class="chart">\#(OutcomeChart.svg(app: id, points: a.series))<figcaption>Calls per minute by outcome; line: XADD→answer p99 (right axis)</figcaption></figure>"#
        s += "</div></section>"
        return s
    }

    /// A label and its value, already HTML.
    private static func stat(_ label: String, _ html: String) -> String { "<div><dt>\(h(label))</dt><dd>\(html)</dd></div>" }

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

    static func deadList(viewer: Viewer, apps: [String], filters: ListFilters, records: [DeadLetterRecord], next: String?,
                         scanned: Int, problem: String?, nowMs: Int64) -> String {
        var s = "<h1>Dead letters</h1>"
        s += #"<form class="filters" method="get" action="/console/dead" id="filters">"#
        s += #"<label>App <select name="app" id="f-app"><option value="">all apps</option>"#
        for app in apps {
            s += #"<option value="\#(attr(app))"\#(app == filters.app ? " selected" : "")>\#(h(app))</option>"#
        }
        s += "</select></label>"
        s += #"<label>Reason starts with <input name="reason" id="f-reason" value="\#(attr(filters.reason))" placeholder="apns_credentials"></label>"#
        s += #"<label>Call id <input name="call" id="f-call" value="\#(attr(filters.call))"></label>"#
        s += #"<label>Newer than <input name="since" id="f-since" value="\#(attr(filters.since))" placeholder="2h" size="8"></label>"#
        s += #"<label>Older than <input name="older" id="f-older" value="\#(attr(filters.olderThan))" placeholder="1d" size="8"></label>"#
        s += #"<button id="apply">Filter</button>"#
        if !filters.isEmpty { s += #"<a class="clear" href="/console/dead">clear</a>"# }
        s += "</form>"
        if let problem { s += #"<p class="error" role="alert">\#(h(problem))</p>"# }

        s += #"<form method="get" action="/console/dead/preview" id="selection">"#
        for (k, v) in filters.items where !v.isEmpty { s += #"<input type="hidden" name="\#(k)" value="\#(attr(v))">"# }
        s += #"<div class="actions"><label>Rate <input name="rate" value="20/s" size="6" id="rate"></label>"#
        s += #"<button name="action" value="replay" id="replay-selected">Replay selected…</button>"#
        s += #"<button name="action" value="purge" class="danger" id="purge-selected">Purge selected…</button>"#
        s += #"<span class="sep"></span>"#
        s += #"<button name="action" value="replay-all" id="replay-all">Replay all matching…</button>"#
        s += #"<button name="action" value="purge-all" class="danger" id="purge-all">Purge all matching…</button></div>"#
        if records.isEmpty {
            s += #"<p class="empty" id="no-dead">No dead letters\#(filters.isEmpty ? "" : " match these filters").</p>"#
        } else {
            s += #"<table class="list" id="dead-table"><thead><tr><th><input type="checkbox" id="select-all" aria-label="select all"></th>"#
            s += "<th>Dead letter</th><th>App</th><th>Age</th><th>Reason</th><th>Call</th><th>Type</th><th>Attempts</th><th>Replays</th></tr></thead><tbody>"
            for r in records {
                let ref = r.app + "/" + r.id
                s += #"<tr class="dead" data-id="\#(attr(ref))"><td><input type="checkbox" name="ids" value="\#(attr(ref))" aria-label="select"></td>"#
                s += #"<td><a class="id" href="\#(detailHref(r))">\#(h(r.id))</a></td><td>\#(h(r.app))</td>"#
                s += #"<td title="\#(attr(DeadFormat.time(r.deadAtMs)))">\#(DeadFormat.age(nowMs - r.deadAtMs))</td>"#
                s += #"<td class="reason">\#(h(r.reason))</td><td class="call">\#(h(r.callID ?? "-"))</td><td>\#(h(r.eventType ?? "-"))</td>"#
                s += "<td>\(r.attempts.count)</td><td>\(r.replays)</td></tr>"
            }
            s += "</tbody></table>"
        }
        s += "</form>"
        s += #"<p class="pager">"#
        if let next {
            s += #"<a id="older-page" href="/console/dead?\#(FormData.encode(filters.items + [("before", next)]))">Older →</a>"#
        }
        s += #"<span class="hint">\#(scanned) entries read for this page</span></p>"#
        return page(title: "Dead letters", section: .dead, viewer: viewer, body: s)
    }

    static func detailHref(_ r: DeadLetterRecord) -> String { detailHref(app: r.app, id: r.id) }
    static func detailHref(app: String, id: String) -> String { "/console/dead/\(q(app))/\(q(id))" }

    static func deadLetter(viewer: Viewer, record r: DeadLetterRecord, ringTimeoutMs: Int64, nowMs: Int64) -> String {
        func at(_ ms: Int64?) -> String { ms.map { "\(DeadFormat.time($0)) (\(DeadFormat.age(nowMs - $0)) ago)" } ?? "–" }
        let ref = r.app + "/" + r.id
        var s = #"<p class="crumbs"><a href="/console/dead">Dead letters</a> / \#(h(r.app))</p>"#
        s += #"<h1>Dead letter <span class="mono" id="dead-id">\#(h(r.id))</span></h1>"#
        s += #"<div class="actions"><a class="button" id="replay-one" href="/console/dead/preview?action=replay&amp;ids=\#(q(ref))">Replay…</a>"#
        s += #"<a class="button danger" id="purge-one" href="/console/dead/preview?action=purge&amp;ids=\#(q(ref))">Purge…</a></div>"#
        s += #"<div class="detail"><div class="card"><table class="kv" id="facts"><tbody>"#
        s += #"<tr><th>Reason</th><td class="reason">\#(h(r.reason))</td></tr>"#
        s += #"<tr><th>App</th><td>\#(h(r.app))</td></tr>"#
        s += #"<tr><th>Call</th><td class="call">\#(h(r.callID ?? "– (the event has no readable id)"))</td></tr>"#
        s += #"<tr><th>Type</th><td>\#(h(r.eventType ?? "–"))</td></tr>"#
        s += #"<tr><th>VoIP token</th><td class="mono">\#(h(ConsoleEscaping.shortToken(r.voipToken)))</td></tr>"#
        s += #"<tr><th>Alert token</th><td class="mono">\#(h(ConsoleEscaping.shortToken(r.alertToken)))</td></tr>"#
        s += #"<tr><th>Dead since</th><td>\#(at(r.deadAtMs))</td></tr>"#
        s += #"<tr><th>First failure</th><td>\#(at(r.firstFailureMs))</td></tr>"#
        s += #"<tr><th>Last failure</th><td>\#(at(r.lastFailureMs))</td></tr>"#
        s += #"<tr><th>Replays so far</th><td id="replays">\#(r.replays)</td></tr>"#
        let deadline = DeadFormat.deadline(r, ringTimeoutMs: ringTimeoutMs, nowMs: nowMs)
        s += #"<tr><th>Deadline</th><td id="deadline">\#(h(deadline))</td></tr>"#
        s += #"</tbody></table></div><div class="card">"#

        if r.rounds.count > 1 {
            s += #"<h2>Rounds</h2><table class="list"><thead><tr><th>Round</th><th>Dead letter</th><th>Attempts</th><th>Reason</th></tr></thead><tbody>"#
            for round in r.rounds {
                s += "<tr><td>\(round.round)</td><td>\(h(round.deadEntryID))\(round.round == r.rounds.count ? " (this one)" : " (replayed)")</td>"
                    + "<td>\(round.attempts.count)</td><td>\(h(round.reason))</td></tr>"
            }
            s += "</tbody></table>"
        }
        let attempts = r.attempts
        s += #"<h2 class="first">Attempts (\#(attempts.count))</h2>"#
        if attempts.isEmpty {
            s += #"<p class="empty" id="no-attempts">None: nothing was sent (the event was refused before any push).</p>"#
        } else {
            s += #"<ol class="timeline" id="attempts">"#
            for a in attempts {
                let ok = a.status.map { (200..<300).contains($0) } ?? false
                s += #"<li class="attempt \#(ok ? "ok" : "failed")"><div class="when">\#(a.timeMs.map(DeadFormat.time) ?? "–")</div>"#
                s += #"<div class="what"><span class="channel">\#(h(a.channel ?? "–"))</span>"#
                s += #"<span class="status">\#(a.status.map { String($0) } ?? "no answer")</span>"#
                s += #"<span class="why">\#(h(a.reason ?? a.error ?? ""))</span></div>"#
                s += #"<div class="more">round \#(a.round) · token <span class="mono">\#(h(a.token.map { "…" + $0 } ?? "–"))</span> · apns-id <span class="mono">\#(h(a.apnsID ?? "–"))</span></div></li>"#
            }
            s += "</ol>"
        }
        s += "</div></div>"
        s += "<h2>Event</h2>"
        if let note = DeadFormat.cutNote(r) { s += #"<p class="hint" id="event-cut">\#(h(note.prefix(1).uppercased() + note.dropFirst())).</p>"# }
        if let text = r.eventText, let pretty = PrettyJSON.pretty(text, margin: "") {
            s += #"<pre class="event" id="event">\#(ConsoleEscaping.html(pretty, keepingLines: true))</pre>"#
        } else {
            s += #"<p class="hint">\#(r.eventText == nil ? "Not UTF-8; each invalid byte is shown as \\xNN." : "Not JSON, shown as stored.")</p>"#
            let text = r.event.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
            s += #"<pre class="event" id="event">\#(text.map { h($0) }.joined(separator: "\n"))</pre>"#
        }
        return page(title: "Dead letter \(r.id)", section: .dead, viewer: viewer, body: s)
    }

    // MARK: Replay and purge

    enum Action: String {
        case replay, purge
    }

    /// The dry run before a replay or purge, with the confirmation form. `selection` is what
    /// the confirmation posts: the very dead letters listed, and the filters of an "all
    /// matching" choice (for the audit record).
    /// The dry run of a replay or purge: what each listed dead letter would become (for a
    /// replay: whether it rings or gets the missed-call alert only), how far the scan went, a
    /// link that goes on from there when it stopped early, and the confirmation form for
    /// exactly the dead letters listed.
    static func preview(viewer: Viewer, action: Action, rows: [OperatorsConsole.PreviewRow], filters: ListFilters?,
                        rate: ReplayRate, scan: OperatorsConsole.PreviewScan, more: String?, cappedNamed: Bool, nowMs: Int64) -> String {
        let verb = action == .replay ? "replayed" : "purged"
        let counted = DeadFormat.count(rows.count, "dead letter")
        var s = #"<p class="crumbs"><a href="/console/dead">Dead letters</a> / \#(action == .replay ? "Replay" : "Purge")</p>"#
        s += "<h1>\(action == .replay ? "Replay" : "Purge") \(counted)?</h1>"
        let rateText = action == .replay ? " at \(rate)" : ""
        s += #"<p class="notice" id="dry-run">Dry run: \#(counted) would be \#(verb)\#(rateText). Nothing has changed yet.</p>"#
        if action == .replay, !rows.isEmpty {
            var tally: [String: Int] = [:]
            for r in rows { tally[r.forecast.word, default: 0] += 1 }
            let parts = [("rings", "will ring (VoIP push)"), ("alert-only", "get the missed-call alert only (their deadline passed)"),
                         ("alert", "get an alert (no VoIP token)"), ("nothing-sent", "send nothing (deadline passed, no alert token)"),
                         ("cancel", "are cancels"), ("refused-again", "will be refused again (invalid events)"),
                         ("not-replayable", "cannot be replayed (only part of the event was kept)")]
                .compactMap { word, what in tally[word].map { "\($0) \(what)" } }
            s += #"<p id="forecast">\#(h(parts.joined(separator: "; "))).</p>"#
        }
        if filters != nil {
            s += #"<p class="hint" id="scanned">\#(DeadFormat.count(scan.scanned, "entry", "entries")) read, oldest first.</p>"#
        }
        if let why = scan.stoppedBecause {
            s += #"<p class="error" id="more">More may match: the scan stopped here, as \#(h(why)). Confirm acts on the ones listed"#
            if let more { s += #"; <a href="\#(attr(more))" id="next-preview">preview the next ones →</a>"# }
            s += ".</p>"
        }
        if cappedNamed {
            s += #"<p class="error">More were selected than the console acts on at once (\#(OperatorsConsole.maxTargets)): the first ones are listed.</p>"#
        }
        if action == .purge {
            s += #"<p class="warning">A purge deletes the dead letters and their replay history for good.</p>"#
        }
        s += #"<table class="list" id="preview"><thead><tr><th>Dead letter</th><th>Call</th><th>Reason</th><th>What happens</th></tr></thead><tbody>"#
        for r in rows { s += r.html }
        s += "</tbody></table>"
        if rows.isEmpty {
            s += #"<p><a href="/console/dead">Back to the dead letters</a></p>"#
        } else if viewer.role.mayChange {
            s += #"<form method="post" action="/console/dead/\#(action.rawValue)" class="confirm">\#(csrfField(viewer))"#
            for r in rows { s += r.input }
            if let filters { for (k, v) in filters.items where !v.isEmpty { s += #"<input type="hidden" name="f-\#(k)" value="\#(attr(v))">"# } }
            if action == .replay { s += #"<input type="hidden" name="rate" value="\#(attr(rate.description))">"# }
            s += #"<button class="\#(action == .purge ? "danger" : "primary")" id="confirm">Confirm: \#(action == .replay ? "replay" : "purge") \#(counted)</button>"#
            s += #" <a href="/console/dead">Cancel</a></form>"#
        } else {
            s += #"<p class="notice" id="read-only">Signed in read-only: you can see this preview but not confirm it.</p>"#
        }
        return page(title: action == .replay ? "Replay" : "Purge", section: .dead, viewer: viewer, body: s)
    }

    /// One dead letter's row of a preview, and its confirmation form's hidden input.
    static func previewRow(_ r: DeadLetterRecord, action: Action, forecast: ReplayForecast, nowMs: Int64) -> (row: String, input: String) {
        let what = action == .replay ? "replay #\(r.replays + 1): " + forecast.text(nowMs: nowMs) : "deleted"
        let row = #"<tr data-forecast="\#(attr(forecast.word))"><td><a href="\#(detailHref(r))">\#(h(r.app))/\#(h(r.id))</a></td>"#
            + "<td>\(h(r.callID ?? "-"))</td><td>\(h(r.reason))</td><td>\(h(what))</td></tr>"
        return (row, #"<input type="hidden" name="ids" value="\#(attr(r.app + "/" + r.id))">"#)
    }

    /// A replay or purge under way or done.
    static func job(viewer: Viewer, job: ConsoleJob) -> String {
        var s = #"<div id="live"\#(job.isDone ? "" : #" data-refresh-ms="1000""#)>"#
        s += #"<p class="crumbs"><a href="/console/dead">Dead letters</a> / \#(job.action.rawValue) #\#(job.number)</p>"#
        let title = job.action == .replay ? "Replay" : "Purge"
        s += "<h1>\(title) #\(job.number)</h1>"
        let state = job.isDone ? (job.failure == nil ? "done" : "stopped") : "running"
        s += #"<p class="notice" id="job-state" data-state="\#(state)">\#(h(job.summaryLine))</p>"#
        if let failure = job.failure { s += #"<p class="error">\#(h(failure))</p>"# }
        if !job.lines.isEmpty {
            s += #"<ul class="log" id="job-lines">"# + job.lines.map { "<li>\(h($0))</li>" }.joined() + "</ul>"
        }
        if job.isDone { s += #"<p><a href="/console/audit">See it in the audit trail</a> · <a href="/console/dead">Back to the dead letters</a></p>"# }
        s += "</div>"
        return page(title: "\(title) #\(job.number)", section: .dead, viewer: viewer, body: s)
    }

    // MARK: Audit

    static func audit(viewer: Viewer, entries: [AuditEntry], next: String?, problem: String?) -> String {
        var s = "<h1>Audit trail</h1>"
        s += #"<p class="hint">Every replay and purge, from the command line and the console, newest first.</p>"#
        if let problem { s += #"<p class="error">\#(h(problem))</p>"# }
        if entries.isEmpty && problem == nil {
            s += #"<p class="empty">Nothing yet.</p>"#
        } else {
            s += #"<table class="list" id="audit"><thead><tr><th>Time</th><th>Verb</th><th>Who</th><th>Done</th><th>Dead letters</th><th>Filters</th><th>Options</th></tr></thead><tbody>"#
            for e in entries {
                let who = e.user + (e.sudoUser.map { " (sudo \($0))" } ?? "")
                let ids = e.ids.prefix(5).joined(separator: ", ") + (e.ids.count > 5 ? ", …" : "")
                s += #"<tr class="audit" data-verb="\#(attr(e.verb))"><td>\#(DeadFormat.time(e.timeMs))</td><td class="verb">\#(h(e.verb))</td>"#
                    + "<td class=\"user\">\(h(who))</td><td>\(e.done) of \(e.requested)</td><td class=\"ids\">\(h(ids))</td>"
                    + "<td class=\"mono\">\(h(e.filters == "null" ? "–" : e.filters))</td><td class=\"mono\">\(h(e.options))</td></tr>"
            }
            s += "</tbody></table>"
        }
        if let next { s += #"<p class="pager"><a href="/console/audit?before=\#(q(next))">Older →</a></p>"# }
        return page(title: "Audit", section: .audit, viewer: viewer, body: s)
    }
}
