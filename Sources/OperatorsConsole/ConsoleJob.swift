import DeadLetters

/// A replay or purge started from the console: what it was asked to do and how far it got.
/// The console keeps the last few so their pages can be looked at (and refreshed while a
/// paced replay runs). Loop-owned.
final class ConsoleJob {
    let number: Int
    let action: ConsolePages.Action
    let requested: Int
    let rate: ReplayRate?
    /// What each step did, one line each (the first `maxLines`).
    private(set) var lines: [String] = []
    private(set) var done = 0
    private(set) var gone = 0
    /// Why it stopped early, or why its audit record could not be written.
    var failure: String?
    private(set) var isDone = false
    /// Stops a running replay after the entry in progress, as the user named; nil for a purge
    /// (it is one batch) and once the job is done.
    var cancel: ((_ user: String) -> Void)?
    /// Who cancelled it, and how many it had replayed then.
    private(set) var cancelled: (user: String, done: Int)?

    static let maxLines = 200

    init(number: Int, action: ConsolePages.Action, requested: Int, rate: ReplayRate?) {
        self.number = number
        self.action = action
        self.requested = requested
        self.rate = rate
    }

    func stepDone(_ line: String) {
        done += 1
        add(line)
    }

    func stepGone(_ line: String) {
        gone += 1
        add(line)
    }

    /// Sets the count of what changed (a purge counts entries that still existed).
    func counted(done: Int) { self.done = done }

    /// Asks the running replay to stop; false when it cannot be cancelled (done, a purge, or
    /// cancelled already).
    func cancel(by user: String) -> Bool {
        guard !isDone, cancelled == nil, let cancel else { return false }
        cancelled = (user, done)
        cancel(user)
        return true
    }

    var mayCancel: Bool { !isDone && cancelled == nil && cancel != nil }

    func finish() {
        isDone = true
        cancel = nil
    }

    private func add(_ line: String) {
        if lines.count < ConsoleJob.maxLines { lines.append(line) }
    }

    var summaryLine: String {
        let verb = action == .replay ? "replayed" : "purged"
        var s = isDone ? "" : "running: "
        s += "\(verb) \(done) of \(DeadFormat.count(requested, "dead letter"))"
        if let rate { s += " at \(rate)" }
        if gone > 0 { s += " (\(gone) gone meanwhile: replayed or purged by someone else)" }
        if let cancelled {
            s += isDone ? "; cancelled by \(cancelled.user): \(done) replayed before the cancel, the rest not"
                : "; cancel asked by \(cancelled.user): stopping after the entry in progress"
        } else if isDone && failure == nil {
            s += "; done"
        }
        return s
    }
}
