import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import JSONOutput

/// Replays and purges confirmed from a preview, run as jobs whose pages can be watched, and
/// the audit trail they (and `pushgw dead`) write.
extension OperatorsConsole {
    /// The confirmation of a preview: the very dead letters it listed (`APP/ID` each), acted on
    /// by a job that reads each one just before it acts (those gone meanwhile are skipped).
    func change(_ action: ConsolePages.Action, _ request: HTTPRequest, _ session: ConsoleSession,
                        _ answer: @escaping (HTTPResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let items = request.formItems
        let (text, filter, _) = filters(items, prefix: "f-", nowMs: Clock.unixMs())
        let wasAll = !text.isEmpty
        let references = items.filter { $0.0 == "ids" }.compactMap { DeadLetterReference($0.1) }
        let rateText = items.first { $0.0 == "rate" }?.1 ?? ""
        guard let rate = rateText.isEmpty ? ReplayRate.default : ReplayRate(parsing: rateText) else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer, text: OperatorsConsole.rateProblem(rateText),
                                                          back: ("/console/dead", "Dead letters"))))
        }
        guard !references.isEmpty, references.count <= OperatorsConsole.maxTargets,
              references.allSatisfy({ $0.app.map { operations.policies[$0] != nil } ?? false }) else {
            return answer(.html(400, ConsolePages.message(title: "Nothing done", viewer: viewer,
                                                          text: "Confirm a preview of 1 to \(OperatorsConsole.maxTargets) dead letters of configured apps (APP/ID each).",
                                                          back: ("/console/dead", "Dead letters"))))
        }
        guard action == .replay, items.first(where: { $0.0 == ConsolePages.despiteRefusalField })?.1 != "yes" else {
            return start(action, references, rate: rate, filter: wasAll ? filter : nil, request, session, answer)
        }
        // Replaying while APNs refuses the app's credential: only with the preview's explicit
        // "replay anyway" (the checkbox is required in the form; this holds without a browser).
        credentialRefusals(of: Set(references.compactMap(\.app))) { [weak self] refusals in
            guard let self else { return }
            guard refusals.isEmpty else {
                let now = Clock.unixMs()
                let text = refusals.map { $0.warning(nowMs: now) }.joined(separator: " ")
                    + " Nothing was replayed: confirm the preview with \"\(ConsolePages.despiteRefusalLabel)\" ticked to replay anyway."
                return answer(.html(409, ConsolePages.message(title: "Not replayed", viewer: viewer, text: text,
                                                              back: ("/console/dead", "Dead letters"))))
            }
            self.start(action, references, rate: rate, filter: wasAll ? filter : nil, request, session, answer)
        }
    }

    /// Starts the job of a confirmed replay or purge and answers with its page.
    private func start(_ action: ConsolePages.Action, _ references: [DeadLetterReference], rate: ReplayRate, filter auditFilter: DeadLetterFilter?,
                       _ request: HTTPRequest, _ session: ConsoleSession, _ answer: @escaping (HTTPResponse) -> Void) {
        let who = [("via", OrderedJSON.string("console")), ("access", .string(session.role.rawValue)), ("from", .string(request.peer ?? "?"))]
        let job = newJob(action, requested: references.count, rate: action == .replay ? rate : nil)
        switch action {
        case .replay:
            let replay = operations.replayAudited(rate: rate, by: AuditActor(user: session.name, options: who), filter: auditFilter)
            job.cancel = { user in replay.cancel(by: user) }
            replay.replay(references, onStep: { step, line in
                if case .replayed = step { job.stepDone(line) } else { job.stepGone(line) }
            }, completion: { [weak self] _ in
                if let failure = replay.summary.failure { job.failure = "Redis failed: \(failure); the rest was not replayed" }
                self?.finish(job, replay.record(requested: references.count))
            })
        case .purge:
            operations.purge(references) { [weak self] summary in
                for id in summary.ids { job.stepDone("purged \(id)") }
                if let failure = summary.failure { job.failure = "Redis failed: \(failure); the rest was not purged" }
                let record = AuditRecord(timeMs: Clock.unixMs(), verb: "purge", user: session.name, ids: summary.ids,
                                         requested: references.count, done: summary.purged, filter: auditFilter, options: who)
                job.counted(done: summary.purged)
                self?.finish(job, record)
            }
        }
        answer(.redirect("/console/jobs/\(job.number)"))
    }

    /// Cancels a running replay job (admin only: `ConsoleGate`): it stops after the dead
    /// letter in progress, and its page then says how many were replayed before. The cancel
    /// writes its own audit record (verb `replay cancel`), and the replay's record names who
    /// cancelled it (`cancelled_by`).
    func cancelJob(_ request: HTTPRequest, _ session: ConsoleSession, _ answer: @escaping (HTTPResponse) -> Void) {
        let viewer = OperatorsConsole.viewer(session)
        let number = request.formItems.first { $0.0 == "job" }.flatMap { Int($0.1) }
        guard let number, let job = jobs[number] else {
            return answer(.html(404, ConsolePages.message(title: "Nothing done", viewer: viewer, text: "No such job (the console keeps the last \(OperatorsConsole.keptJobs)).",
                                                          back: ("/console/dead", "Dead letters"))))
        }
        let replayedSoFar = job.done
        guard job.cancel(by: session.name) else {
            return answer(.html(409, ConsolePages.message(title: "Nothing done", viewer: viewer,
                                                          text: "\(job.action == .replay ? "Replay" : "Purge") #\(number) is not a running replay (\(job.summaryLine)); nothing changed.",
                                                          back: ("/console/jobs/\(number)", "Back to the job"))))
        }
        let who = [("job", OrderedJSON.string(String(number))), ("via", .string("console")), ("access", .string(session.role.rawValue)),
                   ("from", .string(request.peer ?? "?"))]
        let record = AuditRecord(timeMs: Clock.unixMs(), verb: "replay cancel", user: session.name, ids: [], requested: job.requested,
                                 done: replayedSoFar, filter: nil, options: who)
        log(.info, "dead letters replay cancelled", [("user", session.name), ("job", String(number)), ("done", String(replayedSoFar)),
                                                      ("via", "console")])
        operations.audit(record) { [weak self] result in
            if case let .failure(error) = result {
                job.failure = (job.failure.map { $0 + "; " } ?? "") + "the cancel's audit record was not written: \(error)"
                self?.log(.warn, "console audit record not written", [("verb", record.verb), ("error", "\(error)")])
            }
            answer(.redirect("/console/jobs/\(number)"))
        }
    }

    func newJob(_ action: ConsolePages.Action, requested: Int, rate: ReplayRate?) -> ConsoleJob {
        jobCount += 1
        let job = ConsoleJob(number: jobCount, action: action, requested: requested, rate: rate)
        jobs[job.number] = job
        jobs[job.number - OperatorsConsole.keptJobs] = nil
        return job
    }

    /// Logs the action and writes its audit record to the audit stream, as `pushgw dead` does.
    func finish(_ job: ConsoleJob, _ record: AuditRecord) {
        log(.info, "dead letters \(record.verb)", [("user", record.user), ("requested", String(record.requested)),
                                                   ("done", String(record.done)), ("via", "console")])
        operations.audit(record) { [weak self] result in
            if case let .failure(error) = result {
                job.failure = (job.failure.map { $0 + "; " } ?? "") + "the audit record was not written: \(error)"
                self?.log(.warn, "console audit record not written", [("verb", record.verb), ("error", "\(error)")])
            }
            job.finish()
        }
    }

    func auditTrail(_ request: HTTPRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let before = request.queryItems.first { $0.0 == "before" }.map(\.1).flatMap { DeadLetterRecord.isEntryID($0) ? "(" + $0 : nil }
        operations.auditTrail(count: OperatorsConsole.auditPageSize + 1, before: before) { result in
            switch result {
            case let .success(entries):
                let shown = Array(entries.prefix(OperatorsConsole.auditPageSize))
                let next = entries.count > OperatorsConsole.auditPageSize ? shown.last?.id : nil
                answer(.html(200, ConsolePages.audit(viewer: viewer, entries: shown, next: next, problem: nil)))
            case let .failure(error):
                answer(.html(503, ConsolePages.audit(viewer: viewer, entries: [], next: nil, problem: "Redis: \(error)")))
            }
        }
    }
}
