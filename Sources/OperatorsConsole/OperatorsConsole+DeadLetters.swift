import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage

/// The dead letters' pages: the list and its filters, one dead letter, and the dry run of a
/// replay or purge (what `+Changes` then confirms). Each reads a bounded amount per loop turn.
extension OperatorsConsole {
    /// Reads the list's filters from `items` (names prefixed by `prefix` in a confirmation
    /// form): the text as given and the filter, or the problem with it.
    func filters(_ items: [(String, String)], prefix: String = "", nowMs: Int64)
        -> (ConsolePages.ListFilters, DeadLetterFilter, String?) {
        func value(_ name: String) -> String {
            (items.first { $0.0 == prefix + name }?.1 ?? "").trimmingCharacters(in: .whitespaces)
        }
        let text = ConsolePages.ListFilters(app: value("app"), reason: value("reason"), call: value("call"), since: value("since"),
                                            olderThan: value("older"))
        var filter = DeadLetterFilter(apps: apps)
        var problem: String?
        if !text.app.isEmpty {
            if operations.policies[text.app] == nil { problem = "No app \"\(text.app)\" in the config." } else { filter.apps = [text.app] }
        }
        if !text.reason.isEmpty { filter.reason = text.reason }
        if !text.call.isEmpty { filter.callID = text.call }
        if !text.since.isEmpty {
            if let ms = TimeArgument.instant(text.since, nowMs: nowMs) { filter.sinceMs = ms } else {
                problem = "Newer than: \(TimeArgument.forms), not \(DeadFormat.quoted(text.since))."
            }
        }
        if !text.olderThan.isEmpty {
            if let ms = TimeArgument.instant(text.olderThan, nowMs: nowMs) { filter.beforeMs = ms } else {
                problem = "Older than: \(TimeArgument.forms), not \(DeadFormat.quoted(text.olderThan))."
            }
        }
        return (text, filter, problem)
    }

    func deadList(_ request: HTTPRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let now = Clock.unixMs()
        let items = request.queryItems
        let (text, filter, problem) = filters(items, nowMs: now)
        let before = items.first { $0.0 == "before" }.flatMap { DeadLetterReference($0.1) }
        let render = { [apps] (records: [DeadLetterRecord], next: DeadLetterReference?, scanned: Int, problem: String?) in
            answer(.html(problem == nil ? 200 : 400,
                         ConsolePages.deadList(viewer: viewer, apps: apps, filters: text, records: records, next: next?.text,
                                               scanned: scanned, problem: problem, nowMs: now)))
        }
        if let problem { return render([], nil, 0, problem) }
        operations.listing(apps: filter.apps ?? apps, filter: filter, before: before, limit: OperatorsConsole.pageSize,
                           scanLimit: OperatorsConsole.scanLimit) { result in
            switch result {
            case let .success(listing): render(listing.records, listing.next, listing.scanned, nil)
            case let .failure(error): render([], nil, 0, "Redis: \(error)")
            }
        }
    }

    func deadLetter(_ rest: String, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let parts = rest.split(separator: "/", omittingEmptySubsequences: false).map { OperatorsConsole.pathComponent($0) }
        guard parts.count == 2, operations.policies[parts[0]] != nil, DeadLetterRecord.isEntryID(parts[1]) else {
            return answer(notFound(viewer))
        }
        operations.find([DeadLetterReference(app: parts[0], id: parts[1])], among: [parts[0]]) { result in
            switch result {
            case let .success(records):
                answer(.html(200, ConsolePages.deadLetter(viewer: viewer, record: records[0], ringTimeoutMs: self.operations.ringTimeoutMs(records[0].app),
                                                          nowMs: Clock.unixMs())))
            case .failure(.notFound):
                answer(.html(404, ConsolePages.message(title: "Not found", viewer: viewer,
                                                       text: "No dead letter \(parts[1]) in app \(parts[0]): replayed, purged or trimmed.",
                                                       back: ("/console/dead", "Dead letters"))))
            case let .failure(error):
                answer(.html(503, ConsolePages.message(title: "Unavailable", viewer: viewer, text: "\(error)", back: nil)))
            }
        }
    }

    /// A path component, percent-decoded (`+` stays `+`).
    static func pathComponent(_ text: Substring) -> String {
        FormData.unescape(Substring(text.replacingOccurrences(of: "+", with: "%2B")))
    }

    /// One dead letter of a preview: what the page shows of it, not its event, built and
    /// rendered as it is read (a step of the scan renders its rows, so the record is not kept
    /// and the answer's render only copies them).
    struct PreviewRow: Sendable {
        let app: String
        let id: String
        let forecast: ReplayForecast
        /// Its `<tr>` and its confirmation form's hidden input.
        let row: Node
        let input: Node

        init(_ record: DeadLetterRecord, action: ConsolePages.Action, forecast: ReplayForecast, nowMs: Int64) {
            app = record.app
            id = record.id
            self.forecast = forecast
            let (row, input) = ConsolePages.previewRow(record, action: action, forecast: forecast, nowMs: nowMs)
            self.row = row.prerendered
            self.input = input.prerendered
        }
    }

    /// How far a preview's scan went.
    struct PreviewScan: Sendable {
        /// Entries read.
        var scanned = 0
        /// Where the next preview goes on (`APP/ID`); nil when the scan reached the end.
        var next: DeadLetterReference?
        /// Why it stopped before the end, for the page: nil at the end.
        var stoppedBecause: String?
    }

    /// The dead letters a preview lists: the named ones (at most `maxTargets`), or those the
    /// filters select, oldest first, from `from` on: a bounded step at a time
    /// (`DeadLetterOperations.walk`), each step on its own loop turn, until `maxTargets` are
    /// found, `previewScanLimit` entries were read, or `previewDeadlineMs` passed since the
    /// request came (the request's deadline stops the work, not only its answer). Only a row
    /// per dead letter is kept, never its event.
    func previewRows(action: ConsolePages.Action, references: [DeadLetterReference], all: Bool, filter: DeadLetterFilter,
                             from: DeadLetterReference?,
                             completion: @escaping (Result<([PreviewRow], PreviewScan), DeadLetterOperationError>) -> Void) {
        let nowMs = Clock.unixMs()
        var rows: [PreviewRow] = []
        guard all else {
            let named = Array(references.prefix(OperatorsConsole.maxTargets))
            operations.findEach(named, among: apps, each: { [operations] record in
                rows.append(PreviewRow(record, action: action, forecast: operations.forecast(record, nowMs: nowMs), nowMs: nowMs))
            }) { result in
                completion(result.map { _ in (rows, PreviewScan(scanned: named.count)) })
            }
            return
        }
        let deadline = Clock.monotonicMs() + OperatorsConsole.previewDeadlineMs
        var scan = PreviewScan()
        operations.walk(apps: filter.apps ?? apps, filter: filter, from: from, onPage: { [operations] app, page, proceed in
            scan.scanned += page.scanned
            for record in page.records {
                guard rows.count < OperatorsConsole.maxTargets else {
                    // Full: go on after the last one listed.
                    scan.next = rows.last.map { DeadLetterReference(app: $0.app, id: $0.id) }
                    scan.stoppedBecause = "the console lists at most \(OperatorsConsole.maxTargets) at once"
                    return proceed(false)
                }
                rows.append(PreviewRow(record, action: action, forecast: operations.forecast(record, nowMs: nowMs), nowMs: nowMs))
            }
            if Clock.monotonicMs() >= deadline {
                scan.stoppedBecause = "a preview scans for at most \(OperatorsConsole.previewDeadlineMs / 1000) s"
            } else if scan.scanned >= OperatorsConsole.previewScanLimit {
                scan.stoppedBecause = "a preview reads at most \(OperatorsConsole.previewScanLimit) entries"
            }
            proceed(scan.stoppedBecause == nil)
        }, completion: { result in
            switch result {
            case let .failure(error): completion(.failure(.redis(error)))
            case let .success(position):
                if scan.next == nil { scan.next = position }
                if scan.next == nil { scan.stoppedBecause = nil }
                completion(.success((rows, scan)))
            }
        })
    }

    func preview(_ request: HTTPRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let now = Clock.unixMs()
        let items = request.queryItems
        let choice = items.first { $0.0 == "action" }?.1 ?? ""
        let action: ConsolePages.Action = choice.hasPrefix("purge") ? .purge : .replay
        let all = choice.hasSuffix("-all")
        let (text, filter, problem) = filters(items, nowMs: now)
        let references = items.filter { $0.0 == "ids" }.compactMap { DeadLetterReference($0.1) }
        let fromText = items.first { $0.0 == "from" }?.1 ?? ""
        let from = DeadLetterReference(fromText)
        let rateText = items.first { $0.0 == "rate" }?.1 ?? ""
        let rate = rateText.isEmpty ? ReplayRate.default : ReplayRate(parsing: rateText)
        let back = ("/console/dead?" + FormData.encode(text.items), "Back to the dead letters")
        func message(_ s: String) { answer(.html(400, ConsolePages.message(title: "Nothing to do", viewer: viewer, text: s, back: back))) }
        if let problem { return message(problem) }
        guard let rate else { return message(OperatorsConsole.rateProblem(rateText)) }
        if !fromText.isEmpty && from?.app == nil { return message("The scan's cursor must be APP/ID, not \(DeadFormat.quoted(fromText)).") }
        if !all && references.isEmpty { return message("Select dead letters first, or choose \"all matching\".") }
        previewRows(action: action, references: references, all: all, filter: filter, from: from) { result in
            switch result {
            case let .success((rows, scan)):
                var more: String?
                if let next = scan.next {
                    more = "/console/dead/preview?" + FormData.encode([("action", choice)] + text.items + [("rate", rate.description),
                                                                                                        ("from", next.text)])
                }
                let render = { (refusals: [CredentialRefusal]) in
                    let now = Clock.unixMs()
                    answer(.html(200, ConsolePages.preview(viewer: viewer, action: action, rows: rows, filters: all ? text : nil, rate: rate,
                                                           scan: scan, more: more, cappedNamed: !all && references.count > OperatorsConsole.maxTargets,
                                                           refusals: refusals.map { $0.warning(nowMs: now) }, nowMs: now)))
                }
                guard action == .replay else { return render([]) }
                self.credentialRefusals(of: Set(rows.map(\.app)), render)
            case let .failure(error): message("\(error); nothing would be done.")
            }
        }
    }

    /// Why the rate a form gave is refused.
    static func rateProblem(_ text: String) -> String {
        "The rate must be \(ReplayRate.forms), not \(DeadFormat.quoted(text)); nothing was done."
    }

}
