import EventLoop

/// The simulator's timed work: answers that `slow:MS` holds back and the end of a closing
/// connection's linger, released by one loop timer.
///
/// Why one timer for all: a per-stream `LoopTimer` would have to be freed from inside its
/// own callback; here the queue outlives every entry, and an entry whose connection or
/// stream is gone by the time it is due is simply dropped by its receiver.
final class DelayQueue {
    /// What falls due.
    enum Work: Equatable {
        /// Send the held-back answer of this stream.
        case answer(streamID: Int32)
        /// Stop waiting for the client to close; close the connection.
        case endLinger
    }

    /// One piece of work for one connection.
    struct Entry: Equatable {
        let dueMs: Int64
        let connectionID: Int
        let work: Work
    }

    private var entries: [Entry] = []
    private var timer: LoopTimer?
    private let release: (Entry) -> Void

    /// `release` runs on the loop for each entry when it is due.
    init(loop: EventLoop, release: @escaping (Entry) -> Void) {
        self.release = release
        timer = LoopTimer(loop: loop) { [unowned self] in self.fire() }
    }

    /// Releases `work` for `connectionID` after `ms` milliseconds.
    func add(_ work: Work, connectionID: Int, afterMs ms: Int) {
        let entry = Entry(dueMs: Clock.monotonicMs() + Int64(ms), connectionID: connectionID, work: work)
        // Kept sorted by due time; delayed answers are few, so insertion is cheap.
        let at = entries.firstIndex { $0.dueMs > entry.dueMs } ?? entries.endIndex
        entries.insert(entry, at: at)
        if at == 0 { arm() }
    }

    /// Drops every entry and the timer.
    func close() {
        entries = []
        timer?.close()
        timer = nil
    }

    private func fire() {
        let now = Clock.monotonicMs()
        let dueCount = entries.firstIndex { $0.dueMs > now } ?? entries.endIndex
        let due = Array(entries.prefix(dueCount))
        entries.removeFirst(dueCount)
        for entry in due { release(entry) }
        arm()
    }

    private func arm() {
        guard let timer, let first = entries.first else { return }
        timer.schedule(afterMs: max(0, first.dueMs - Clock.monotonicMs()))
    }
}
