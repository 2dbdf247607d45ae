import EventLoop
import GatewayRoles
import CallStorage
import RedisClient

/// Watches every Redis node pushgw writes to for the setting that silently loses calls: a
/// `maxmemory-policy` that evicts (docs/operations.md, "Redis sizing"). At `maxmemory` such a
/// Redis deletes keys instead of refusing writes: result keys (the idempotency window, so a
/// producer's resend rings again), known-invalid tokens, cancellation markers, and whole
/// streams, the retry schedule and dead letters of a quiet app.
///
/// At start (on a cluster, once the first slot map names the primaries) and every `everyMs`
/// it reads `INFO memory stats` (allowed by managed Redis, unlike
/// `CONFIG GET`) from each node — the one Redis, the primary the sentinels named, each primary of
/// a cluster — one command per node, on the store's command connections, at most one
/// outstanding per node. A node whose policy evicts under a `maxmemory` is a readiness problem
/// (`problems`, which `/readyz` reports with its others), `pushgw_redis_evicting_policy 1`,
/// and an error in the log naming the fix; the growth of its `evicted_keys` is counted
/// (`pushgw_redis_evicted_keys_total`) and logged. A node that refuses `INFO` (an ACL without
/// `+info`) is logged once and not judged.
///
/// Loop-owned; `start()` once, `close()` at the end.
package final class RedisEvictionCheck {
    /// What one node said, and what was counted of it.
    package struct Node: Equatable, Sendable {
        /// `host:port` of the node (`unix:PATH` for a socket).
        package var name: String
        package var maxmemory: Int64
        package var policy: String
        /// `evicted_keys` as the node reported it last.
        package var evictedKeys: Int64

        /// Whether the node deletes keys when full: a limit is set and the policy is not
        /// `noeviction`. (Without `maxmemory` a Redis never evicts, whatever its policy.)
        package var evicts: Bool { maxmemory > 0 && policy != "noeviction" }
    }

    /// Reads `maxmemory`, `maxmemory_policy` and `evicted_keys` from an `INFO` answer; nil
    /// when one is missing (a server that is not Redis 7).
    package static func read(info text: String, node: String) -> Node? {
        var fields: [Substring: Substring] = [:]
        for line in text.split(whereSeparator: \.isNewline) {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon]] = line[line.index(after: colon)...]
        }
        guard let maxmemory = fields["maxmemory"].flatMap({ Int64($0) }), let policy = fields["maxmemory_policy"],
              let evicted = fields["evicted_keys"].flatMap({ Int64($0) }) else { return nil }
        return Node(name: node, maxmemory: maxmemory, policy: String(policy), evictedKeys: evicted)
    }

    package var everyMs: Int64 = 60_000
    /// The nodes as last read, by name (on one Redis: the one it is now).
    package private(set) var nodes: [String: Node] = [:]
    /// Keys each node evicted while this process watched it, by name: kept for every node seen
    /// (a counter per node; a cluster has a bounded number of them).
    package private(set) var evicted: [String: Int64] = [:]

    private let store: CallStore
    private let log: Log
    private var timer: LoopTimer!
    private var outstanding: Set<String> = []
    private var refusedINFO: Set<String> = []

    package init(loop: EventLoop, store: CallStore, log: Log) {
        self.store = store
        self.log = log
        timer = LoopTimer(loop: loop) { [unowned self] in self.check() }
    }

    package func start() { check() }

    package func close() { timer.close() }

    /// One readiness problem per node whose policy evicts.
    package var problems: [Readiness.Problem] {
        nodes.values.filter(\.evicts).sorted { $0.name < $1.name }.map { node in
            Readiness.Problem(check: "redis", detail: "\(node.name) has maxmemory-policy \(node.policy) with maxmemory "
                              + "\(node.maxmemory) bytes: at the limit Redis deletes result keys (the idempotency window), "
                              + "tokens known invalid and streams; set maxmemory-policy noeviction (docs/operations.md, \"Redis sizing\")")
        }
    }

    /// The command connections to ask, by the node they reach: the store topology's
    /// connection on one Redis (the primary, through sentinels), each primary's on a cluster.
    private var targets: [(key: String, connection: RedisConnection)] {
        switch store.topology {
        case .single(let connection): return [("redis", connection)]
        case .cluster(let cluster): return cluster.map.primaries.map { ($0.description, cluster.connection(to: $0)) }
        }
    }

    private func check() {
        let round = targets
        if case .cluster = store.topology {
            // Nodes that left the cluster's primaries are not judged any more.
            let current = Set(round.map(\.key))
            nodes = nodes.filter { current.contains($0.key) }
        }
        for (key, connection) in round where !outstanding.contains(key) {
            outstanding.insert(key)
            // weak: the connection may complete it with `.closed` after this check is gone.
            connection.send(["INFO", "memory", "stats"]) { [weak self, weak connection] result in
                guard let self else { return }
                self.outstanding.remove(key)
                let name = connection?.connectedTo ?? key
                switch result {
                case let .success(reply):
                    guard let text = reply.string, let node = Self.read(info: text, node: name) else { return }
                    self.observed(node)
                case let .failure(error) where error.serverCode == "NOPERM" || error.serverCode == "ERR":
                    guard self.refusedINFO.insert(name).inserted else { return }
                    self.log.warn("cannot read Redis' memory settings; eviction is not watched", [
                        "node": name, "error": "\(error)",
                        "fix": "grant +info to pushgw's ACL user (docs/operations.md, \"The least ACL permissions\")"])
                case .failure:
                    break   // Redis down or busy: the probe says it; ask again next round
                }
            }
        }
        // A cluster client knows its primaries once its first slot map is read: until a node
        // answered (or refused INFO), look again within a second rather than a minute.
        let noneAnswered = nodes.isEmpty && refusedINFO.isEmpty && outstanding.isEmpty
        timer.schedule(afterMs: noneAnswered ? min(everyMs, 1_000) : everyMs)
    }

    /// Records `node`'s answer, counts and logs what changed. On one Redis the node is where the
    /// connection is (through sentinels it changes with a failover): it replaces the one before.
    private func observed(_ node: Node) {
        if case .single = store.topology { nodes = nodes.filter { $0.key == node.name } }
        let before = nodes[node.name]
        if evicted[node.name] == nil { evicted[node.name] = 0 }
        if let before {
            // A restarted node counts from 0 again: all it reports was evicted since.
            let grown = node.evictedKeys >= before.evictedKeys ? node.evictedKeys - before.evictedKeys : node.evictedKeys
            evicted[node.name, default: 0] += grown
            if grown > 0 {
                log.error("redis evicted keys: results, idempotency keys or streams may be gone", [
                    "node": node.name, "evicted": grown, "policy": node.policy, "maxmemory": node.maxmemory,
                    "fix": "set maxmemory-policy noeviction and size maxmemory (docs/operations.md, \"Redis sizing\")"],
                          limited: true)
            }
        }
        nodes[node.name] = node
        let wasEvicting = before.map { $0.evicts && $0.policy == node.policy } ?? false
        if node.evicts && !wasEvicting {
            log.error("redis may evict pushgw's keys: its maxmemory-policy deletes keys at maxmemory", [
                "node": node.name, "policy": node.policy, "maxmemory": node.maxmemory,
                "fix": "CONFIG SET maxmemory-policy noeviction on the node (and in its redis.conf or your provider's parameter group)"])
        } else if !node.evicts, let before, before.evicts {
            log.info("redis no longer evicts keys", ["node": node.name, "policy": node.policy, "maxmemory": node.maxmemory])
        }
    }
}
