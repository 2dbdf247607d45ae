/// The client's FIFO of pushes waiting for a stream. Resends go to the front so a push
/// refused by one connection is not overtaken by newer ones. Deadlines are in FIFO order
/// unless a resend or a push with an earlier budget (a VoIP push near its call's deadline)
/// came in: `hasResends` then says so.
///
/// An array with a moving head: O(1) append and pop; storage compacts when half is dead.
struct PushQueue {
    private var items: [PendingPush] = []
    private var head = 0
    /// True once a resend was put in front or a push with an earlier deadline than the last
    /// one was appended: deadlines are then no longer in order.
    private(set) var hasResends = false

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }
    var first: PendingPush? { isEmpty ? nil : items[head] }

    mutating func append(_ push: PendingPush) {
        if let last = items.last, head < items.count, push.deadlineMs < last.deadlineMs { hasResends = true }
        items.append(push)
    }

    mutating func prepend(_ push: PendingPush) {
        hasResends = true
        if head > 0 {
            head -= 1
            items[head] = push
        } else {
            items.insert(push, at: 0)
        }
    }

    mutating func popFirst() -> PendingPush? {
        guard head < items.count else { return nil }
        let push = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
            hasResends = false
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return push
    }

    /// Removes and returns the pushes matching `predicate`, keeping the others' order.
    mutating func removeAll(where predicate: (PendingPush) -> Bool) -> [PendingPush] {
        var kept: [PendingPush] = []
        var removed: [PendingPush] = []
        kept.reserveCapacity(count)
        for push in items[head...] {
            if predicate(push) { removed.append(push) } else { kept.append(push) }
        }
        items = kept
        head = 0
        hasResends = false
        return removed
    }
}
