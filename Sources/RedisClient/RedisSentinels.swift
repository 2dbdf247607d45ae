import EventLoop

/// The sentinels of one primary, for the connections that follow it (`RedisConnection` with
/// `Config.sentinel`): where the primary is, and when it moved.
///
/// - **Where**: `locatePrimary` asks the sentinels in turn, starting with the last one that
///   answered, `SENTINEL get-master-addr-by-name MASTER`, each on a short connection of its
///   own (so a sentinel that is down costs one refused connect, or the watchdog time for one
///   that hangs). Questions asked while one is out share its answer. No sentinel answering
///   fails with every sentinel's reason.
/// - **When**: one connection subscribed to `+switch-master` on one sentinel at a time
///   (the next one after each failure), pinged every `watchdogMs / 2` so its watchdog notices
///   a hung sentinel. An announcement for this master sends every follower to the new
///   primary at once (`RedisConnection.primaryMoved`), instead of after its backoff.
///
/// - **Trust**: a primary whose host is neither a sentinel's nor in `allowedHosts`
///   (`RedisSentinelOptions.trust`) is refused: the next sentinel is asked, an announcement
///   naming it is ignored, and either is counted (`refused`) and reported (`onRefusal`). So a
///   sentinel that is wrong or not what it claims cannot have the data credentials sent to a
///   host of its choosing.
///
/// The connections that follow check with `ROLE` that what they reached is the primary, and
/// go back to the sentinels on `READONLY` or `LOADING`: an announcement missed while the
/// watch reconnected costs at most one refused write.
///
/// Loop-owned. The watch starts with the first follower; `close()` at the end.
public final class RedisSentinels {
    public let options: RedisSentinelOptions
    private let loop: EventLoop
    private let tls: RedisTLSOptions
    private let watchdogMs: Int64
    private var followers: [WeakConnection] = []
    private var watch: RedisConnection?
    private var pinger: LoopTimer?
    private var waiters: [(Result<RedisSentinelOptions.Address, RedisError>) -> Void] = []
    /// The sentinel asked first: the last one that answered.
    private var preferred = 0
    private var closed = false
    private let trust: RedisNodeTrust
    /// Primaries refused as untrusted since creation (nothing was sent to them).
    public private(set) var refused = 0
    /// Told of every primary refused as untrusted (for the log).
    public var onRefusal: ((RedisNodeRefusal) -> Void)?

    private struct WeakConnection {
        weak var connection: RedisConnection?
    }

    public init(loop: EventLoop, options: RedisSentinelOptions, tls: RedisTLSOptions, watchdogMs: Int64 = 5000) {
        self.loop = loop
        self.options = options
        self.tls = tls
        self.watchdogMs = watchdogMs
        trust = options.trust
    }

    /// Asks the sentinels for the primary's address. Completes once, on the loop: with the
    /// address, `.connectFailed(every sentinel's reason)`, or `.closed` after `close()`.
    func locatePrimary(_ completion: @escaping (Result<RedisSentinelOptions.Address, RedisError>) -> Void) {
        guard !closed else { return completion(.failure(.closed)) }
        waiters.append(completion)
        guard waiters.count == 1 else { return }   // a question is out: its answer serves all
        ask(preferred, tried: 0, problems: [])
    }

    private func ask(_ index: Int, tried: Int, problems: [String]) {
        let count = options.addresses.count
        guard tried < count else {
            return answer(.failure(.connectFailed("no sentinel named the primary of '\(options.master)': " + problems.joined(separator: "; "))))
        }
        let i = index % count
        let address = options.addresses[i]
        let connection = RedisConnection(loop: loop, config: .init(url: options.url(of: i), tls: tls, watchdogMs: watchdogMs,
                                                                    maxQueued: 1),
                                         addresses: .url, random: { Double.random(in: 0..<1) })
        connection.start()
        connection.send(["SENTINEL", "get-master-addr-by-name", options.master]) { [weak self] result in
            connection.close()
            guard let self, !self.closed else { return }
            let problem: String
            switch result {
            case let .success(reply):
                if let items = reply.array, items.count == 2, let host = items[0].string,
                   let port = items[1].integer.flatMap({ Int(exactly: $0) }),
                   let primary = Endpoint(reportedHost: host, port: port, defaultHost: "") {
                    guard self.trust.allows(primary) else {
                        let refusal = RedisNodeRefusal(kind: .sentinel, node: primary, namedBy: address)
                        self.report(refusal)
                        return self.ask(i + 1, tried: tried + 1, problems: problems + ["sentinel \(refusal)"])
                    }
                    self.preferred = i
                    return self.answer(.success(primary))
                }
                problem = reply == .null ? "does not know master '\(self.options.master)'" : "answered \(reply)"
            case let .failure(.connectFailed(why)):
                problem = why
            case let .failure(error):
                problem = error.description
            }
            self.ask(i + 1, tried: tried + 1, problems: problems + ["sentinel \(address): \(problem)"])
        }
    }

    private func answer(_ result: Result<RedisSentinelOptions.Address, RedisError>) {
        let all = waiters
        waiters = []
        for waiter in all { waiter(result) }
    }

    // MARK: Following failovers

    /// Sends `connection` to the new primary whenever the sentinels announce one.
    func follow(_ connection: RedisConnection) {
        followers.removeAll { $0.connection == nil }
        followers.append(WeakConnection(connection: connection))
        if watch == nil && !closed { startWatch() }
    }

    func unfollow(_ connection: RedisConnection) {
        followers.removeAll { $0.connection == nil || $0.connection === connection }
    }

    private func startWatch() {
        let watch = RedisConnection(loop: loop, config: .init(url: options.url(of: 0), tls: tls, watchdogMs: watchdogMs),
                                    addresses: .eachSentinel(options), random: { Double.random(in: 0..<1) })
        watch.onReady = { connection in connection.subscribe(["+switch-master"]) }
        watch.onMessage = { [weak self] channel, payload in
            guard channel == "+switch-master" else { return }
            self?.switched(payload)
        }
        self.watch = watch
        watch.start()
        let pinger = LoopTimer(loop: loop) { [weak self, weak watch] in
            guard let self, let watch else { return }
            if watch.isReady { watch.send(["PING"]) { _ in } }
            self.pinger?.schedule(afterMs: max(1, self.watchdogMs / 2))
        }
        self.pinger = pinger
        pinger.schedule(afterMs: max(1, watchdogMs / 2))
    }

    /// `+switch-master <master> <old ip> <old port> <new ip> <new port>`.
    private func switched(_ payload: String) {
        let parts = payload.split(separator: " ")
        guard parts.count == 5, parts[0] == options.master, let port = Int(parts[4]),
              let primary = Endpoint(reportedHost: String(parts[3]), port: port, defaultHost: "") else { return }
        guard trust.allows(primary) else {
            // The watch is on the sentinel its attempts have reached (`AddressSource.eachSentinel`).
            let attempts = watch.map { $0.stats.connectFailures + $0.stats.lost } ?? 0
            return report(RedisNodeRefusal(kind: .sentinel, node: primary, namedBy: options.addresses[attempts % options.addresses.count]))
        }
        for follower in followers {
            follower.connection?.primaryMoved(host: primary.host, port: primary.port)
        }
    }

    private func report(_ refusal: RedisNodeRefusal) {
        refused += 1
        onRefusal?(refusal)
    }

    /// Stops watching; later questions fail at once.
    public func close() {
        guard !closed else { return }
        closed = true
        pinger?.close()
        pinger = nil
        watch?.close()
        watch = nil
        followers = []
        answer(.failure(.closed))
    }
}
