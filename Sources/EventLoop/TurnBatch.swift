/// Collects items added during one loop turn and hands them over together, in the order they
/// were added, on the loop's next iteration.
///
/// Why: one turn often produces many small pieces of the same work — one TLS read can carry
/// a hundred APNs answers, each finishing a call — and doing them as one batch turns a
/// hundred Redis round trips (and a hundred script runs in Redis) into one. The first `add`
/// of a turn arms a zero-delay timer; libevent runs it on the next iteration, after the I/O
/// callbacks that were ready in that iteration, so a lone item waits one loop iteration and
/// no more, and a burst is batched whole.
///
/// Loop-owned. `close()` before dropping it (the timer's libevent side is freed there);
/// items still held are then dropped, so flush or hand them elsewhere first.
public final class TurnBatch<Item> {
    private var items: [Item] = []
    private var timer: LoopTimer!
    private let flush: ([Item]) -> Void

    /// `flush` receives each turn's items (never an empty array).
    public init(loop: EventLoop, flush: @escaping ([Item]) -> Void) {
        self.flush = flush
        timer = LoopTimer(loop: loop) { [unowned self] in self.flushNow() }
    }

    /// Holds `item` until the end of this turn.
    public func add(_ item: Item) {
        items.append(item)
        if items.count == 1 { timer.schedule(afterMs: 0) }
    }

    /// Items waiting for the end of the turn.
    public var count: Int { items.count }

    /// Hands over what is held now (nothing happens when empty).
    public func flushNow() {
        timer.cancel()
        guard !items.isEmpty else { return }
        let batch = items
        items = []
        flush(batch)
    }

    /// Frees the timer; held items are dropped.
    public func close() {
        timer.close()
        items = []
    }
}
