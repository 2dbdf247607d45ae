import EventLoop

/// A client of a Redis Cluster on the process's loop: sends each command to the primary that
/// owns its slot, follows the cluster's redirects, and keeps its slot map current.
///
/// - **Slot map**: read with `CLUSTER SHARDS` (Redis 7; `CLUSTER SLOTS` on older servers) from
///   a known primary, else from a seed. Refreshed after a `-MOVED`, a `-TRYAGAIN`/`-CLUSTERDOWN`
///   or a lost node, at most once per `Config.minRefreshGapMs`, and every `Config.refreshEveryMs`
///   anyway (one command per refresh: what an idle cluster client costs beyond its users).
/// - **Trust** (`RedisNodeTrust`): a redirect or a slot map may send the credentials and the
///   data commands only to a node the trust allows — the seeds' hosts and `allowedHosts`, or,
///   without `allowedHosts`, what a seed announced. A redirect elsewhere completes
///   `RedisError.refusedNode` unsent, a slot map naming such a primary is not used (the next
///   candidate is asked), and either is counted (`Stats.refused`) and reported (`onRefusal`);
///   the next refresh asks the seeds first, so a node the cluster really gained is learned then.
/// - **Redirects** (`ClusterCommandCourse` decides, this class sends): `-MOVED` corrects the
///   slot's owner in the map at once and resends there; `-ASK` sends `ASKING` and the command
///   on the importing node's connection, once, without touching the map; `-TRYAGAIN` and
///   `-CLUSTERDOWN` resend after a short backoff. Past the course's limits the error goes to
///   the caller like any Redis error.
/// - **Connections**: one `RedisConnection` per node and `Lane` (a blocking read holds up its
///   connection, so it gets a lane of its own), each keeping itself connected as a single-node
///   connection does, with the same URL's user, password, database and TLS. Connections to
///   nodes that own no slot any more are closed at a refresh once idle.
/// - **No owner yet** (before the first map, or a shard whose primary failed and no replica
///   was promoted yet): the command waits for the next refresh; when that refresh fails or
///   still names no owner, it completes `.connectFailed`, as a command waiting for a
///   single-node connection does after a failed attempt.
///
/// - **Server version**: when a node refuses `CLUSTER SHARDS` with `ERR`, its `HELLO` answer's
///   version says why: before 7.0 the client reads maps with `CLUSTER SLOTS` from then on;
///   from 7.0 the refusal is that node's problem and the next candidate is asked.
///
/// Its life is `StateMachine` (`RedisCluster+StateMachine.swift`): refreshes, the slot map and
/// the trust are the machine's, every event goes to it, and `run(_:)` performs the action it
/// returns, in one place. The course of each command is `ClusterCommandCourse`'s.
///
/// Every command completes exactly once, on the loop. Loop-owned: call everything on the loop
/// thread; `start()` first, `close()` at the end.
public final class RedisCluster {
    /// How to reach the cluster.
    public struct Config: Sendable {
        /// Nodes asked for the slot map until one answers (any node of the cluster will do).
        public var seeds: [Endpoint]
        /// The settings of every node connection; the URL's host and port are replaced by the
        /// node's, its user, password, db and TLS kept. No sentinels.
        public var connection: RedisConnection.Config
        /// The slot map is read again at least this often, ms.
        public var refreshEveryMs: Int64
        /// Two refreshes start at least this far apart, ms (a burst of `-MOVED` costs one).
        public var minRefreshGapMs: Int64
        /// Hosts and networks trusted beside the seeds' hosts (`redis.cluster.allowed_hosts`);
        /// nil: trust what a seed announces instead (`RedisNodeTrust`).
        public var allowedHosts: [HostPattern]?

        public init(seeds: [Endpoint], connection: RedisConnection.Config, refreshEveryMs: Int64 = 30_000,
                    minRefreshGapMs: Int64 = 250, allowedHosts: [HostPattern]? = nil) {
            precondition(!seeds.isEmpty, "a cluster needs at least one seed")
            precondition(connection.sentinel == nil, "cluster nodes are not found through sentinels")
            precondition(refreshEveryMs > 0 && minRefreshGapMs >= 0, "refresh intervals must be positive")
            self.seeds = seeds
            self.connection = connection
            self.refreshEveryMs = refreshEveryMs
            self.minRefreshGapMs = minRefreshGapMs
            self.allowedHosts = allowedHosts
        }
    }

    /// Which of a node's connections carries a command: a blocking read holds up its
    /// connection, so each blocking reader has a lane of its own.
    public struct Lane: Hashable, Sendable {
        /// Shown in `CLIENT LIST` after the client name (`pushgw-write`, `pushgw-write-read:acme`).
        public let name: String
        public init(_ name: String) { self.name = name }
        /// Every non-blocking command.
        public static let commands = Lane("commands")
    }

    /// Counters since creation, for logs, metrics and tests.
    public struct Stats: Equatable, Sendable {
        /// `-MOVED` answers followed.
        public var moved = 0
        /// `-ASK` answers followed.
        public var asked = 0
        /// `-TRYAGAIN`/`-CLUSTERDOWN` answers retried.
        public var retriedLater = 0
        /// Slot maps read, and refreshes that found no node to answer.
        public var refreshes = 0
        public var refreshFailures = 0
        /// Nodes refused as untrusted, by how they were named (nothing was sent to them).
        public var refused: [RedisNodeRefusal.Kind: Int] = [:]
        public init() {}
    }

    public let loop: EventLoop
    public let config: Config
    /// The current slot map (empty before the first refresh).
    public var map: ClusterSlotMap { machine.map }
    public var stats: Stats { machine.stats }
    /// The last refresh problem, nil once a refresh succeeded.
    public var lastProblem: String? { machine.lastProblem }
    /// Runs after every refresh that changed the map.
    public var onMapChanged: ((ClusterSlotMap) -> Void)?
    /// Which nodes may get the credentials; grows with what seeds announce.
    public var trust: RedisNodeTrust { machine.trust }
    /// Told of every node refused as untrusted (for the log).
    public var onRefusal: ((RedisNodeRefusal) -> Void)?
    /// Observes every node connection's events (for logs), named `host:port lane`.
    public var onConnectionEvent: ((_ name: String, RedisConnection.Event) -> Void)?

    private struct ConnectionKey: Hashable {
        let node: Endpoint
        let lane: Lane
    }
    private var machine: StateMachine
    private var connections: [ConnectionKey: RedisConnection] = [:]
    /// Commands whose slot has no owner: sent (or failed) after the next refresh.
    private var waitingForMap: [(MapWait) -> Void] = []
    private var refreshTimer: LoopTimer!
    /// Timers of commands waiting out a `-TRYAGAIN`/`-CLUSTERDOWN`.
    private var retryTimers: [ObjectIdentifier: LoopTimer] = [:]
    private let random: () -> Double

    public init(loop: EventLoop, config: Config, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.loop = loop
        self.config = config
        self.random = random
        machine = StateMachine(config: config)
        refreshTimer = LoopTimer(loop: loop) { [unowned self] in self.run(self.machine.onRefreshTimerFired(nowMs: Clock.monotonicMs())) }
    }

    /// Reads the slot map; commands sent before wait for it.
    public func start() {
        loop.assertInLoop()
        run(machine.onStart(nowMs: Clock.monotonicMs()))
    }

    /// Closes every node connection; commands in flight complete `.disconnected`, waiting ones
    /// `.closed`, later sends `.closed`.
    public func close() {
        loop.assertInLoop()
        run(machine.onCloseRequested())
    }

    // MARK: Sending

    /// Sends `args` (`args[0]` is the command's name) to the owner of `slot`.
    public func send(_ args: [String], slot: HashSlot, lane: Lane = .commands, blockMs: Int64 = 0,
                     completion: @escaping RedisConnection.Completion) {
        send(command: RedisCommand(args), slot: slot, lane: lane, blockMs: blockMs, completion: completion)
    }

    /// Sends `args` to the owner of `key`'s slot.
    public func send(_ args: [String], key: String, lane: Lane = .commands, blockMs: Int64 = 0,
                     completion: @escaping RedisConnection.Completion) {
        send(command: RedisCommand(args), slot: HashSlot(key: key), lane: lane, blockMs: blockMs, completion: completion)
    }

    package func send(command: RedisCommand, slot: HashSlot, lane: Lane = .commands, blockMs: Int64,
                      completion: @escaping RedisConnection.Completion) {
        course(command, slot: slot, lane: lane, blockMs: blockMs, on: { connection, command, done in
            connection.send(command: command, blockMs: blockMs, completion: done)
        }, completion: completion)
    }

    /// `send` whose reply `decode` reads in place (`RedisConnection`'s variant); redirects
    /// arrive as errors and are followed as for any command.
    package func send<T>(command: RedisCommand, slot: HashSlot, lane: Lane = .commands, blockMs: Int64,
                         decodingInPlace decode: @escaping (HiredisReply) throws -> T,
                         completion: @escaping (Result<T, RedisError>) -> Void) {
        course(command, slot: slot, lane: lane, blockMs: blockMs, on: { connection, command, done in
            connection.send(command: command, blockMs: blockMs, decodingInPlace: decode, completion: done)
        }, completion: completion)
    }

    /// What carries one command through the cluster's answers: the connection to the slot's
    /// owner, or another one after a redirect.
    public func channel(slot: HashSlot, lane: Lane = .commands) -> RedisClusterSlot {
        RedisClusterSlot(cluster: self, slot: slot, lane: lane)
    }

    /// The connection of `lane` to `node`, made (and started) on first use.
    public func connection(to node: Endpoint, lane: Lane = .commands) -> RedisConnection {
        let key = ConnectionKey(node: node, lane: lane)
        if let existing = connections[key] { return existing }
        var settings = config.connection
        settings.url = settings.url.with(host: node.host, port: node.port)
        if let name = settings.clientName { settings.clientName = lane == .commands ? name : "\(name)-\(lane.name)" }
        let connection = RedisConnection(loop: loop, config: settings)
        let name = "\(node) \(lane.name)"
        connection.onEvent = { [weak self] event in
            guard let self else { return }
            self.onConnectionEvent?(name, event)
            if case .ready = event { return }
            self.requestRefresh()   // a node lost or refusing: maybe a failover
        }
        connections[key] = connection
        connection.start()
        return connection
    }

    /// The connections this client holds, named `host:port lane` (for metrics and tests).
    public var nodeConnections: [(name: String, connection: RedisConnection)] {
        connections.map { ("\($0.key.node) \($0.key.lane.name)", $0.value) }.sorted { $0.name < $1.name }
    }

    private typealias Send<T> = (RedisConnection, RedisCommand, @escaping (Result<T, RedisError>) -> Void) -> Void

    private func course<T>(_ command: RedisCommand, slot: HashSlot, lane: Lane, blockMs: Int64, on send: @escaping Send<T>,
                           completion: @escaping (Result<T, RedisError>) -> Void) {
        loop.assertInLoop()
        var course = ClusterCommandCourse()
        func toOwner() {
            guard !machine.isClosed else { return completion(.failure(.closed)) }
            guard let owner = machine.map.owner(of: slot) else {
                waitingForMap.append { [unowned self] outcome in
                    switch outcome {
                    case .closed:
                        completion(.failure(.closed))
                    case .refreshFailed(let reason):
                        completion(.failure(.connectFailed(reason)))
                    case .mapRead where self.machine.map.owner(of: slot) == nil:
                        completion(.failure(.connectFailed("redis cluster: no primary serves slot \(slot)")))
                    case .mapRead:
                        toOwner()
                    }
                }
                return requestRefresh()
            }
            attempt(connection(to: owner, lane: lane), node: owner)
        }
        func attempt(_ connection: RedisConnection, node: Endpoint) {
            send(connection, command) { [unowned self] result in
                guard case .failure(let error) = result else { return completion(result) }
                let decision = course.onAnswer(error: error, answeredBy: node, trust: self.machine.trust, random: self.random())
                if case .resendAsking = decision, self.machine.isClosed { return completion(.failure(.closed)) }
                if case .refuse(let refusal) = decision { self.onRefusal?(refusal) }
                self.run(self.machine.onCommandRedirected(decision, nowMs: Clock.monotonicMs()))
                switch decision {
                case .complete:
                    completion(result)
                case .resendAfterMove:
                    toOwner()
                case let .resendAsking(node):
                    let importing = self.connection(to: node, lane: lane)
                    importing.send(["ASKING"]) { _ in }
                    attempt(importing, node: node)
                case let .retryLater(delayMs):
                    self.after(delayMs, toOwner)
                case let .refuse(refusal):
                    completion(.failure(.refusedNode(refusal)))
                }
            }
        }
        toOwner()
    }

    private func after(_ ms: Int64, _ action: @escaping () -> Void) {
        guard !machine.isClosed else { return action() }
        var id: ObjectIdentifier?
        let timer = LoopTimer(loop: loop) { [unowned self] in
            if let id, let timer = self.retryTimers.removeValue(forKey: id) { timer.close() }
            action()
        }
        id = ObjectIdentifier(timer)
        retryTimers[ObjectIdentifier(timer)] = timer
        timer.schedule(afterMs: ms)
    }

    // MARK: The slot map

    /// Reads the slot map again soon: now, or when `minRefreshGapMs` has passed since the last
    /// refresh began; a refresh asked for while one runs starts once it ends.
    public func requestRefresh() {
        run(machine.onRefreshRequested(nowMs: Clock.monotonicMs()))
    }

    // MARK: Performing the machine's actions

    /// Performs `action`: the only place where the client's lifecycle turns into I/O.
    private func run(_ action: StateMachine.Action) {
        switch action {
        case .none:
            return
        case let .askSlotMap(node, command):
            connection(to: node).send(command.arguments) { [weak self] result in
                guard let self else { return }
                self.run(self.machine.onSlotMapAnswered(by: node, result))
            }
        case .askVersion(let node):
            connection(to: node).send(["HELLO", "2"]) { [weak self] result in
                guard let self else { return }
                self.run(self.machine.onVersionAnswered(by: node, result))
            }
        case .armRefreshTimer(let ms):
            refreshTimer.schedule(afterMs: ms)
        case .finishRefresh(let outcome):
            for refusal in outcome.refusals { onRefusal?(refusal) }
            if outcome.mapChanged {
                closeIdleConnectionsOfFormerPrimaries()
                onMapChanged?(machine.map)
            }
            let waiting = waitingForMap
            waitingForMap = []
            for resume in waiting { resume(outcome.waiters) }
            refreshTimer.schedule(afterMs: outcome.nextRefreshAfterMs)
        case .shutDown:
            refreshTimer.close()
            for timer in retryTimers.values { timer.close() }
            retryTimers = [:]
            for connection in connections.values { connection.close() }
            connections = [:]
            let waiting = waitingForMap
            waitingForMap = []
            for resume in waiting { resume(.closed) }
        }
    }

    private func closeIdleConnectionsOfFormerPrimaries() {
        let owners = Set(machine.map.primaries)
        for (key, connection) in connections where !owners.contains(key.node)
            && connection.inFlightCount == 0 && connection.waitingCount == 0 {
            connection.close()
            connections[key] = nil
        }
    }
}

/// The commands of one slot of a cluster, as `RedisScript` and the stores send them: each goes
/// to the slot's owner and follows redirects (`RedisCluster`).
public struct RedisClusterSlot {
    public let cluster: RedisCluster
    public let slot: HashSlot
    public let lane: RedisCluster.Lane

    public func send(_ args: [String], blockMs: Int64 = 0, completion: @escaping RedisConnection.Completion) {
        cluster.send(command: RedisCommand(args), slot: slot, lane: lane, blockMs: blockMs, completion: completion)
    }
}
