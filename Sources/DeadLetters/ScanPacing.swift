import EventLoop

/// The share of Redis and of the loop that the bulk reads of one `DeadLetterOperations` take
/// (a console's previews, however many operators open them at once; a CLI's walk): their
/// steps run one at a time, and after a step that took `d` the next starts no sooner than
/// `restFactor · d` later (at most `maxRestMs`). Together they use at most a quarter of the
/// time of Redis, which runs a step's script, and of the loop, which reads its records: the
/// router's commands wait behind one step at most, and its calls keep their latency.
///
/// Loop-owned. Every step calls its `finished` exactly once.
final class ScanPacing {
    static let restFactor: Int64 = 3
    static let maxRestMs: Int64 = 100

    private var waiting: [(@escaping () -> Void) -> Void] = []
    private var running = false
    /// Monotonic µs before which no step starts.
    private var restUntilUs: Int64 = 0
    private var timer: LoopTimer!

    init(loop: EventLoop) {
        timer = LoopTimer(loop: loop) { [weak self] in self?.startNext() }
    }

    deinit { timer.close() }

    /// Runs `step` after the steps queued before it, and a rest after the one before.
    func run(_ step: @escaping (_ finished: @escaping () -> Void) -> Void) {
        waiting.append(step)
        startNext()
    }

    private func startNext() {
        guard !running, !waiting.isEmpty else { return }
        let now = Clock.monotonicUs()
        guard now >= restUntilUs else {
            if !timer.isScheduled { timer.schedule(afterMs: (restUntilUs - now + 999) / 1000) }
            return
        }
        running = true
        let step = waiting.removeFirst()
        var done = false
        step { [weak self] in
            guard let self, !done else { return }
            done = true
            let end = Clock.monotonicUs()
            self.restUntilUs = end + min((end - now) * ScanPacing.restFactor, ScanPacing.maxRestMs * 1000)
            self.running = false
            self.startNext()
        }
    }
}
