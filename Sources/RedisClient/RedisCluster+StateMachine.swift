import EventLoop

extension RedisCluster {
    /// Which command reads the slot map.
    enum SlotMapCommand: Equatable, Sendable {
        /// `CLUSTER SHARDS` (Redis 7.0 and later).
        case shards
        /// `CLUSTER SLOTS`, for servers older than 7.0.
        case slots

        var arguments: [String] { ["CLUSTER", self == .shards ? "SHARDS" : "SLOTS"] }
    }

    /// Which nodes a refresh asks first.
    enum CandidateOrder: Equatable, Sendable {
        /// The map's primaries (their connections are up), then the seeds.
        case primariesFirst
        /// The seeds, then the primaries: after a node was refused, so that a node the cluster
        /// really gained is learned from a seed at once.
        case seedsFirst
    }

    /// What a command that waits for the slot map (its slot had no owner) is told.
    enum MapWait: Equatable, Sendable {
        /// A refresh read a map: send again (or fail when the slot still has no owner).
        case mapRead
        /// The refresh found no node to answer; the reason says why, per node.
        case refreshFailed(String)
        /// The client was closed.
        case closed
    }

    /// How a refresh ended, for `RedisCluster.run(_:)` to carry out in this order.
    struct RefreshOutcome: Equatable, Sendable {
        /// Primaries of maps the refresh did not use as untrusted, and that nothing vouched for
        /// meanwhile: report each (`onRefusal`).
        var refusals: [RedisNodeRefusal]
        /// The map is a new one: close idle connections to nodes that own no slot any more and
        /// run `onMapChanged`.
        var mapChanged: Bool
        /// What the commands waiting for the map are told.
        var waiters: MapWait
        /// When the next refresh is due, ms from now.
        var nextRefreshAfterMs: Int64
    }

    /// The life of one `RedisCluster`, as a value, in the shape of valkey-swift's cluster
    /// client machine: the cluster's state (`State`: not started, running, closed) carries the
    /// refresh's (`RefreshState`: waiting for the timer, or asking nodes for the map). Each
    /// event is a `mutating func on…` that moves the state and returns what the client must
    /// do (`Action`), and does no I/O itself: `RedisCluster.run(_:)` performs it, in one place.
    ///
    /// ```
    /// idle ─start─▶ running(asking) ─last answer─▶ running(waiting) ─timer, request─▶ running(asking) …
    ///                 │ a request while asking: once more after it (`again`)
    /// any state ─closeRequested─▶ closed (final)
    /// ```
    ///
    /// It also holds what the refreshes learn: the slot map (corrected by `-MOVED` answers),
    /// the node trust, the command that reads the map, the counters and the last problem.
    ///
    /// Switches have no `default:`. An answer to a question that was not asked stops the
    /// process with the state; races the loop allows (a timer that fires while a refresh runs,
    /// answers after `close()`) are commented and return `.none`.
    struct StateMachine {
        /// One refresh: the nodes it asks, in order, and what it learned so far.
        struct Asking: Equatable, Sendable {
            /// The nodes to ask, in order; never empty (the seeds are in it).
            var candidates: [Endpoint]
            /// The one being asked.
            var index: Int
            /// Why the nodes before it gave no usable map, one text per node.
            var problems: [String]
            /// Primaries of maps not used as untrusted: refused at the end unless a seed's
            /// answer vouched for them meanwhile.
            var untrusted: [RedisNodeRefusal]
            /// The question out: the map, or (after `CLUSTER SHARDS` was refused) the server's
            /// version, which tells a server too old for it from a real error.
            var question: Question
            /// A refresh was asked for while this one ran: the next starts at the gap.
            var again: Bool

            var node: Endpoint { candidates[index] }
        }

        enum Question: Equatable, Sendable {
            case slotMap(SlotMapCommand)
            /// `HELLO 2`; `shardsRefusal` is what `CLUSTER SHARDS` got.
            case version(shardsRefusal: RedisError)
        }

        enum RefreshState: Equatable, Sendable {
            /// No refresh runs; the refresh timer is armed.
            case waiting
            /// A refresh runs.
            case asking(Asking)
        }

        enum State: Equatable, Sendable {
            /// Created; `start()` not called yet. Commands wait for the map; nothing is asked.
            case idle
            /// Started: the slot map is kept current.
            case running(RefreshState)
            /// Closed by its owner; final. Sends fail `.closed`.
            case closed
        }

        /// What to do.
        enum Action: Equatable, Sendable {
            case none
            /// Send `command` to `node` on its commands lane; its answer: `onSlotMapAnswered`.
            case askSlotMap(Endpoint, SlotMapCommand)
            /// Send `HELLO 2` to `node` on its commands lane; its answer: `onVersionAnswered`.
            case askVersion(Endpoint)
            /// Arm (or re-arm) the refresh timer to fire after this many ms.
            case armRefreshTimer(afterMs: Int64)
            /// A refresh ended: carry out the outcome.
            case finishRefresh(RefreshOutcome)
            /// Closed for good: free the timers, close every node connection (commands in flight
            /// complete `.disconnected`), tell waiting commands `.closed`.
            case shutDown
        }

        private(set) var state: State = .idle
        /// The current slot map (empty before the first refresh).
        private(set) var map = ClusterSlotMap()
        /// Which nodes may get the credentials; grows with what seeds announce.
        private(set) var trust: RedisNodeTrust
        private(set) var stats = Stats()
        /// The last refresh problem, nil once a refresh succeeded.
        private(set) var lastProblem: String?
        /// `.slots` once a server older than 7.0 was found (then for the client's life).
        private(set) var slotMapCommand = SlotMapCommand.shards
        private var nextOrder = CandidateOrder.primariesFirst
        /// Monotonic ms when the last refresh began.
        private var lastRefreshStartMs: Int64 = .min / 2

        let seeds: [Endpoint]
        let refreshEveryMs: Int64
        let minRefreshGapMs: Int64
        /// Whether node connections use TLS (`CLUSTER SHARDS` names a TLS port then).
        let tls: Bool

        init(seeds: [Endpoint], refreshEveryMs: Int64, minRefreshGapMs: Int64, tls: Bool, trust: RedisNodeTrust) {
            precondition(!seeds.isEmpty, "a cluster needs at least one seed")
            self.seeds = seeds
            self.refreshEveryMs = refreshEveryMs
            self.minRefreshGapMs = minRefreshGapMs
            self.tls = tls
            self.trust = trust
        }

        init(config: Config) {
            self.init(seeds: config.seeds, refreshEveryMs: config.refreshEveryMs, minRefreshGapMs: config.minRefreshGapMs,
                      tls: config.connection.url.usesTLS,
                      trust: RedisNodeTrust(configured: config.seeds, allowedHosts: config.allowedHosts, learnsFromSeeds: true))
        }

        var isClosed: Bool { state == .closed }

        // MARK: Events

        /// The owner calls `start()`. Starting twice, or after `close()`, does nothing.
        mutating func onStart(nowMs: Int64) -> Action {
            switch state {
            case .idle:
                return beginRefresh(nowMs: nowMs)
            case .running, .closed:
                return .none
            }
        }

        /// A refresh is wanted soon: a command's slot has no owner, a node connection was lost
        /// or refused, or the owner asked (`requestRefresh()`). Starts one now, or when
        /// `minRefreshGapMs` has passed since the last began; while one runs, once it ends.
        mutating func onRefreshRequested(nowMs: Int64) -> Action {
            switch state {
            case .idle, .closed:
                return .none  // before start the first refresh comes with it; after close none
            case .running(.asking(var asking)):
                asking.again = true
                state = .running(.asking(asking))
                return .none
            case .running(.waiting):
                let wait = lastRefreshStartMs + minRefreshGapMs - nowMs
                if wait <= 0 { return beginRefresh(nowMs: nowMs) }
                // The timer is armed while waiting, for at most `refreshEveryMs`: bring it forward.
                return wait < refreshEveryMs ? .armRefreshTimer(afterMs: wait) : .none
            }
        }

        /// The refresh timer fired.
        mutating func onRefreshTimerFired(nowMs: Int64) -> Action {
            switch state {
            case .running(.waiting):
                return beginRefresh(nowMs: nowMs)
            case .running(.asking):
                return .none  // armed before a request began this refresh at once; it re-arms at its end
            case .idle, .closed:
                return .none  // armed before close
            }
        }

        /// The node asked for the slot map answered.
        mutating func onSlotMapAnswered(by node: Endpoint, _ answer: Result<RedisReply, RedisError>) -> Action {
            switch state {
            case .running(.asking(var asking)):
                guard asking.node == node, case .slotMap(let command) = asking.question else {
                    preconditionFailure("redis cluster: a slot map from \(node) while asking \(asking)")
                }
                switch answer {
                case .success(let reply):
                    let read: ClusterSlotMap
                    do throws(ClusterSlotMap.ParseError) {
                        read = command == .shards ? try ClusterSlotMap(shards: reply, tls: tls, askedHost: node.host)
                                                  : try ClusterSlotMap(slots: reply, askedHost: node.host)
                    } catch {
                        return askNext(asking, problem: "\(node): \(error)")
                    }
                    if read.coveredSlots == 0 { return askNext(asking, problem: "\(node): serves no slot") }
                    if seeds.contains(node) { trust.learn(read.announced) }
                    if let stranger = read.primaries.first(where: { !trust.allows($0) }) {
                        let refusal = RedisNodeRefusal(kind: .slotMap, node: stranger, namedBy: node)
                        asking.untrusted.append(refusal)
                        return askNext(asking, problem: "\(refusal)")
                    }
                    return finishRefresh(asking, .success(read))
                case .failure(let error) where command == .shards && error.serverCode == "ERR":
                    // A server before 7.0 refuses the subcommand; so would one that is not a
                    // cluster node, or one in trouble. Its version tells them apart.
                    asking.question = .version(shardsRefusal: error)
                    state = .running(.asking(asking))
                    return .askVersion(node)
                case .failure(let error):
                    return askNext(asking, problem: "\(node): \(error)")
                }
            case .closed:
                return .none  // asked before close: its connection completes it `.disconnected`
            case .idle, .running(.waiting):
                preconditionFailure("redis cluster: a slot map from \(node) in state \(state)")
            }
        }

        /// The node that refused `CLUSTER SHARDS` answered `HELLO 2`.
        mutating func onVersionAnswered(by node: Endpoint, _ answer: Result<RedisReply, RedisError>) -> Action {
            switch state {
            case .running(.asking(var asking)):
                guard asking.node == node, case .version(let shardsRefusal) = asking.question else {
                    preconditionFailure("redis cluster: a version from \(node) while asking \(asking)")
                }
                let older: Bool
                switch answer {
                case .success(let reply):
                    guard let version = RedisServerVersion(hello: reply) else {
                        return askNext(asking, problem: "\(node): \(shardsRefusal); HELLO named no version: \(reply)")
                    }
                    older = version < .clusterShards
                case .failure(let error) where error.serverCode == "ERR":
                    older = true  // no HELLO: before Redis 6.0
                case .failure(let error):
                    return askNext(asking, problem: "\(node): \(shardsRefusal); HELLO: \(error)")
                }
                guard older else { return askNext(asking, problem: "\(node): \(shardsRefusal)") }
                slotMapCommand = .slots
                asking.question = .slotMap(.slots)
                state = .running(.asking(asking))
                return .askSlotMap(node, .slots)
            case .closed:
                return .none  // as in `onSlotMapAnswered`
            case .idle, .running(.waiting):
                preconditionFailure("redis cluster: a version from \(node) in state \(state)")
            }
        }

        /// A command's course decided on a node's answer (`ClusterCommandCourse`): count it, and
        /// for a `-MOVED` correct the map; a move, a retry later and a refusal want a refresh
        /// (after a refusal from the seeds first). The client carries the command on itself.
        mutating func onCommandRedirected(_ decision: ClusterCommandCourse.Action, nowMs: Int64) -> Action {
            switch decision {
            case .complete:
                return .none
            case let .resendAfterMove(slot, node):
                stats.moved += 1
                map.assign(slot.value...slot.value, to: node)
                return onRefreshRequested(nowMs: nowMs)
            case .resendAsking:
                stats.asked += 1
                return .none
            case .retryLater:
                stats.retriedLater += 1
                return onRefreshRequested(nowMs: nowMs)
            case .refuse(let refusal):
                stats.refused[refusal.kind, default: 0] += 1
                nextOrder = .seedsFirst
                return onRefreshRequested(nowMs: nowMs)
            }
        }

        /// The owner calls `close()`.
        mutating func onCloseRequested() -> Action {
            switch state {
            case .closed:
                return .none
            case .idle, .running:
                state = .closed
                return .shutDown
            }
        }

        // MARK: Transitions shared by several events

        private mutating func beginRefresh(nowMs: Int64) -> Action {
            lastRefreshStartMs = nowMs
            let (first, then) = nextOrder == .seedsFirst ? (seeds, map.primaries) : (map.primaries, seeds)
            var candidates = first
            for node in then where !candidates.contains(node) { candidates.append(node) }
            nextOrder = .primariesFirst
            let asking = Asking(candidates: candidates, index: 0, problems: [], untrusted: [],
                                question: .slotMap(slotMapCommand), again: false)
            state = .running(.asking(asking))
            return .askSlotMap(asking.node, slotMapCommand)
        }

        private mutating func askNext(_ asking: Asking, problem: String) -> Action {
            var next = asking
            next.problems.append(problem)
            next.index += 1
            guard next.index < next.candidates.count else {
                let reason = "redis cluster: no node gave the slot map: " + next.problems.joined(separator: "; ")
                return finishRefresh(next, .failure(.connectFailed(reason)))
            }
            next.question = .slotMap(slotMapCommand)
            state = .running(.asking(next))
            return .askSlotMap(next.node, slotMapCommand)
        }

        private mutating func finishRefresh(_ asking: Asking, _ result: Result<ClusterSlotMap, RedisError>) -> Action {
            state = .running(.waiting)
            var refusals: [RedisNodeRefusal] = []
            for refusal in asking.untrusted where !trust.allows(refusal.node) {
                stats.refused[refusal.kind, default: 0] += 1
                refusals.append(refusal)
                nextOrder = .seedsFirst
            }
            var changed = false
            let waiters: MapWait
            switch result {
            case .success(let read):
                stats.refreshes += 1
                lastProblem = nil
                if read != map {
                    map = read
                    changed = true
                }
                waiters = .mapRead
            case .failure(let error):
                stats.refreshFailures += 1
                lastProblem = "\(error)"
                waiters = .refreshFailed("\(error)")
            }
            let soon = asking.again || waiters != .mapRead
            return .finishRefresh(RefreshOutcome(refusals: refusals, mapChanged: changed, waiters: waiters,
                                                 nextRefreshAfterMs: soon ? max(minRefreshGapMs, 1) : refreshEveryMs))
        }
    }
}
