/// Which pushes leave first when a client's streams are scarce (docs/architecture.md,
/// "Scheduling"): every push of a lane goes before any of the next one. The caller decides
/// a push's lane; the client only keeps the order.
public enum PushLane: Int, CaseIterable, Sendable {
    /// A new ring: a call's first VoIP push.
    case live
    /// A push tried again (a retry of the VoIP push or of its alert, a ring-receipt escalation).
    case retry
    /// An alert: the fallback alert and the missed-call alert.
    case alert
    /// What no phone waits for: the background push that ends a call on a device, and every
    /// push of a replayed dead letter.
    case background
}

/// The client's queue of pushes waiting for a stream: one lane per `PushLane`, each lane one
/// FIFO per share (the caller's tenant: an app) taken in turns, one push a turn, so a share with
/// thousands of pushes waiting delays another share's new push by at most one push per share.
/// Within a share, resends go to the front so a push refused by one connection is not
/// overtaken by newer ones of its share (the other shares keep their turns).
///
/// Every operation but `removeAll` and `mayHoldExpired` is O(1) (moving-head arrays, compacted
/// when half is dead); no allocation per push once the arrays have grown.
struct PushQueue {
    private var lanes: [Lane] = PushLane.allCases.map { _ in Lane() }
    private(set) var count = 0
    /// True once a resend was put in front or a push with an earlier deadline than the last of
    /// its share was appended: a share's deadlines are then no longer in order.
    private(set) var hasResends = false

    var isEmpty: Bool { count == 0 }

    /// Pushes of `share` waiting, in every lane. O(lanes).
    func count(share: Int) -> Int {
        let s = max(0, share)
        return lanes.reduce(0) { $0 + (s < $1.shares.count ? $1.shares[s].count : 0) }
    }

    mutating func append(_ push: PendingPush) {
        if lanes[push.lane.rawValue].append(push) { hasResends = true }
        count += 1
    }

    mutating func prepend(_ push: PendingPush) {
        hasResends = true
        lanes[push.lane.rawValue].prepend(push)
        count += 1
    }

    /// The next push: the first lane's with pushes, from the share whose turn it is.
    mutating func popFirst() -> PendingPush? {
        guard count > 0 else { return nil }
        for i in lanes.indices where !lanes[i].isEmpty {
            count -= 1
            if count == 0 { hasResends = false }
            return lanes[i].popFirst()
        }
        preconditionFailure("PushQueue counted \(count) pushes and holds none")
    }

    /// The next push of a share `mayTake` allows: in lane order, each lane's shares in turn
    /// (a share it refuses keeps its pushes and goes to the back of its lane's turns). Nil when
    /// no share with pushes is allowed. O(shares) at most.
    mutating func popFirst(mayTake: (Int) -> Bool) -> PendingPush? {
        guard count > 0 else { return nil }
        for i in lanes.indices where !lanes[i].isEmpty {
            guard let push = lanes[i].popFirst(mayTake: mayTake) else { continue }
            count -= 1
            if count == 0 { hasResends = false }
            return push
        }
        return nil
    }

    /// Whether a push may be past `nowMs`: some share's first push is, or the order is broken.
    func mayHoldExpired(nowMs: Int64) -> Bool {
        guard count > 0 else { return false }
        if hasResends { return true }
        return lanes.contains { $0.anyFirstDeadline(atOrBefore: nowMs) }
    }

    /// Removes and returns the pushes matching `predicate`, keeping the others' order.
    mutating func removeAll(where predicate: (PendingPush) -> Bool) -> [PendingPush] {
        var removed: [PendingPush] = []
        for i in lanes.indices { lanes[i].removeAll(where: predicate, into: &removed) }
        count -= removed.count
        hasResends = false
        return removed
    }

    /// One lane: a FIFO per share, and the shares with pushes in turn order.
    private struct Lane {
        var shares: [MovingHeadArray<PendingPush>] = []
        var turns = MovingHeadArray<Int>()

        var isEmpty: Bool { turns.isEmpty }

        /// Appends `push` to its share; true when it is due before the share's last push.
        mutating func append(_ push: PendingPush) -> Bool {
            let s = grow(to: push.share)
            let outOfOrder = shares[s].last.map { push.deadlineMs < $0.deadlineMs } ?? false
            if shares[s].isEmpty { turns.append(s) }
            shares[s].append(push)
            return outOfOrder
        }

        mutating func prepend(_ push: PendingPush) {
            let s = grow(to: push.share)
            if shares[s].isEmpty { turns.prepend(s) }
            shares[s].prepend(push)
        }

        mutating func popFirst() -> PendingPush? {
            guard let s = turns.popFirst() else { return nil }
            let push = shares[s].popFirst()
            if !shares[s].isEmpty { turns.append(s) }
            return push
        }

        mutating func popFirst(mayTake: (Int) -> Bool) -> PendingPush? {
            for _ in 0..<turns.count {
                guard let s = turns.first else { return nil }
                if mayTake(s) { return popFirst() }
                _ = turns.popFirst()
                turns.append(s)
            }
            return nil
        }

        func anyFirstDeadline(atOrBefore nowMs: Int64) -> Bool {
            turns.contains { (shares[$0].first?.deadlineMs ?? .max) <= nowMs }
        }

        mutating func removeAll(where predicate: (PendingPush) -> Bool, into removed: inout [PendingPush]) {
            guard !turns.isEmpty else { return }
            var kept = MovingHeadArray<Int>()
            while let s = turns.popFirst() {
                var left = MovingHeadArray<PendingPush>()
                while let push = shares[s].popFirst() {
                    if predicate(push) { removed.append(push) } else { left.append(push) }
                }
                shares[s] = left
                if !left.isEmpty { kept.append(s) }
            }
            turns = kept
        }

        /// The index of share `share` (negative ones are share 0), its FIFO made if new.
        private mutating func grow(to share: Int) -> Int {
            let s = max(0, share)
            while shares.count <= s { shares.append(MovingHeadArray()) }
            return s
        }
    }
}

/// An array with a moving head: O(1) append, prepend (into the dead head, else an insert) and
/// pop; storage compacts when half is dead, and is kept when emptied.
struct MovingHeadArray<Element> {
    private var items: [Element] = []
    private var head = 0

    var count: Int { items.count - head }
    var isEmpty: Bool { head == items.count }
    var first: Element? { isEmpty ? nil : items[head] }
    var last: Element? { isEmpty ? nil : items[items.count - 1] }

    mutating func append(_ element: Element) { items.append(element) }

    mutating func prepend(_ element: Element) {
        if head > 0 {
            head -= 1
            items[head] = element
        } else {
            items.insert(element, at: 0)
        }
    }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let element = items[head]
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return element
    }

    func contains(where predicate: (Element) -> Bool) -> Bool { items[head...].contains(where: predicate) }
}
