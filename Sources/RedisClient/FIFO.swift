/// A first-in first-out queue with O(1) amortised push and pop, for commands awaiting
/// replies (hiredis answers in order) or awaiting a connection.
///
/// Invariant: popped elements are released at once (slots are set to nil).
struct FIFO<Element> {
    private var slots: [Element?] = []
    private var head = 0

    var isEmpty: Bool { head == slots.count }
    var count: Int { slots.count - head }
    var first: Element? { isEmpty ? nil : slots[head] }

    mutating func push(_ element: Element) { slots.append(element) }

    mutating func popFirst() -> Element? {
        guard head < slots.count else { return nil }
        let element = slots[head]
        slots[head] = nil
        head += 1
        if head == slots.count {
            slots.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Empties the queue and returns its elements in order.
    mutating func takeAll() -> [Element] {
        let all = slots[head...].compactMap { $0 }
        slots.removeAll()
        head = 0
        return all
    }
}
