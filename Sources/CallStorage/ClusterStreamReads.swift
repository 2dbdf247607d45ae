import EventLoop
import RedisClient

/// The router's read of new calls on Redis Cluster, where one `XREADGROUP` cannot name the
/// streams of several apps (each app is in a slot of its own): one blocking read per app, each
/// on a connection of its own to the app's primary (`RedisCluster.Lane`), answered to the
/// store's `readNew` as one read over every app.
///
/// - A `read` answers at once with what reads that already came back hold (entries of the
///   apps asked for); otherwise it arms a read for every app asked for that has none out and
///   answers with the first entries that come, or with nothing after `blockMs`.
/// - A `read` without `blockMs` (the router's read while calls of its last read wait for it)
///   sends a read that does not block for every app asked for that has none out, and answers
///   once they all came back: like one `XREADGROUP` without `BLOCK` on one Redis, it brings
///   what Redis had when it was served. Apps whose blocking read is out are not asked again.
/// - Reads outlive the `read` that armed them: each blocks for `Config.blockMs` (longer than
///   the router's wait), so an idle app costs one command per `Config.blockMs`, whatever the
///   router's read period. What a read brings while no `read` waits is kept for the next one.
/// - An error is answered to the waiting `read` when nothing else is there; a `NOGROUP`
///   re-creates the app's group first. The app's read is armed again by the next `read`.
/// - A read lost with its connection (`.disconnected`) may still have been served by Redis:
///   its entries are then pending for the consumer with their reply lost. `onReadLost` tells
///   the store, whose owner claims its own entries back (as after a reconnect on one Redis).
///
/// Entries held here are pending for the consumer in Redis, so a process that dies with
/// them is taken over like any other. Loop-owned.
final class ClusterStreamReads: StreamReads {
    private let cluster: RedisCluster
    var apps: [AppKeys]
    private let group: String
    private let groupStartID: String
    /// How long each app's read blocks, ms.
    let blockMs: Int64
    private var out: Set<AppKeys> = []
    /// Reads without BLOCK out for the waiting `read`, which answers once none is left.
    private var peeking: Set<AppKeys> = []
    private var held: [AppKeys: [StreamEntry]] = [:]
    private var failure: RedisError?
    private var waiter: (apps: Set<AppKeys>, completion: (Result<[AppKeys: [StreamEntry]], RedisError>) -> Void)?
    private var waitTimer: LoopTimer!
    private var closed = false
    /// Called when an app's read failed with its connection (see the type's comment).
    var onReadLost: (() -> Void)?

    init(cluster: RedisCluster, apps: [AppKeys], group: String, groupStartID: String, blockMs: Int64) {
        self.cluster = cluster
        self.apps = apps
        self.group = group
        self.groupStartID = groupStartID
        self.blockMs = blockMs
        waitTimer = LoopTimer(loop: cluster.loop) { [unowned self] in self.answer(timedOut: true) }
    }

    /// The lanes are the cluster client's.
    var ownLinks: [(name: String, connection: RedisConnection)] { [] }

    /// Creates every app's group (each on its slot's owner, once the slot map is read).
    func start() {
        for app in apps {
            createConsumerGroup(app, group: group, startID: groupStartID, on: cluster.channel(slot: HashSlot(key: app.calls))) { _ in }
        }
    }

    func read(apps: [AppKeys], consumer: String, count: Int, blockMs: Int64?,
              completion: @escaping (Result<[AppKeys: [StreamEntry]], RedisError>) -> Void) {
        precondition(waiter == nil, "one read at a time")
        guard !closed else { return completion(.failure(.closed)) }
        waiter = (Set(apps), completion)
        if answer(timedOut: false) { return }
        let idle = apps.filter { !out.contains($0) && held[$0] == nil }
        guard let blockMs else {
            peeking = Set(idle)
            for app in idle { arm(app, consumer: consumer, count: count, blocking: false) }
            if peeking.isEmpty { answer(timedOut: true) }
            return
        }
        for app in idle { arm(app, consumer: consumer, count: count, blocking: true) }
        waitTimer.schedule(afterMs: max(0, blockMs))
    }

    func close() {
        closed = true
        waitTimer.close()
        if let waiter {
            self.waiter = nil
            waiter.completion(.failure(.closed))
        }
    }

    private func arm(_ app: AppKeys, consumer: String, count: Int, blocking: Bool) {
        out.insert(app)
        var args = ["XREADGROUP", "GROUP", group, consumer, "COUNT", String(count)]
        if blocking { args += ["BLOCK", String(blockMs)] }
        args += ["STREAMS", app.calls, ">"]
        let slot = HashSlot(key: app.calls)
        cluster.send(command: RedisCommand(args), slot: slot, lane: RedisCluster.Lane("read:" + app.app),
                     blockMs: blocking ? blockMs : 0,
                     decodingInPlace: { reply in Array(try StreamReplies.read(reply).values.joined()) },
                     completion: { [weak self] (result: Result<[StreamEntry], RedisError>) in
            guard let self, !self.closed else { return }
            self.out.remove(app)
            let peeked = self.peeking.remove(app) != nil
            switch result {
            case .success(let entries) where !entries.isEmpty:
                self.held[app, default: []] += entries
            case .success:
                break
            case .failure(let error):
                if error.serverCode == "NOGROUP" {
                    createConsumerGroup(app, group: self.group, startID: self.groupStartID,
                                        on: self.cluster.channel(slot: slot)) { _ in }
                }
                if error == .disconnected { self.onReadLost?() }
                self.failure = error
            }
            self.answer(timedOut: peeked && self.peeking.isEmpty)
        })
    }

    /// Answers the waiting read if there is something for it (or its time is up). True when it did.
    @discardableResult
    private func answer(timedOut: Bool) -> Bool {
        guard let waiter else { return false }
        var found: [AppKeys: [StreamEntry]] = [:]
        for app in waiter.apps { if let entries = held.removeValue(forKey: app) { found[app] = entries } }
        let result: Result<[AppKeys: [StreamEntry]], RedisError>
        if !found.isEmpty {
            result = .success(found)
        } else if let failure {
            self.failure = nil
            result = .failure(failure)
        } else if timedOut {
            result = .success([:])
        } else {
            return false
        }
        self.waiter = nil
        peeking = []  // reads still out hold their entries for the next `read`
        waitTimer.cancel()
        waiter.completion(result)
        return true
    }
}
