import EventLoop
import Foundation
import Glibc
import RedisClient

/// A real Redis Cluster on loopback for one test class: `primaries` × (1 + `replicasPerPrimary`)
/// `redis-server --cluster-enabled yes` (each a `RedisServer`: free port, scratch folder, no
/// persistence, dies with the tests), joined by `redis-cli --cluster create … --cluster-yes`,
/// and waited for until every node says `cluster_state:ok` and knows every other node (never
/// longer than the deadline). Short node timeouts make a failover take seconds.
///
/// The tests' own looks go through `cli` on each node's unix socket as the default user.
public final class LocalRedisCluster: @unchecked Sendable {
    public let nodes: [RedisServer]

    /// `127.0.0.1:PORT` of every node: what pushgw's `redis.cluster.seeds` names.
    public var seeds: [Endpoint] { nodes.map { Endpoint(host: "127.0.0.1", port: $0.port) } }

    private init(nodes: [RedisServer]) {
        self.nodes = nodes
    }

    /// Starts and joins the cluster. `nodeTimeoutMs` is how long a silent node takes to be
    /// declared failed (its replica is then promoted). One primary alone owns every slot: a
    /// cluster node that refuses a command or script whose keys are in two slots (`CROSSSLOT`)
    /// and never redirects, so a single-connection test runs on it as on a plain Redis.
    /// `.tls`: every node serves TLS only on its port (`RedisServer.Transport.tls`), and the
    /// cluster bus and replication run over TLS too (`tls-cluster yes`, `tls-replication yes`;
    /// the bus always asks a connecting node for its certificate: nodes present the client one).
    public static func start(primaries: Int = 3, replicasPerPrimary: Int = 0, nodeTimeoutMs: Int = 1_000,
                             transport: RedisServer.Transport = .tcp, deadlineMs: Int64 = 60_000) throws -> LocalRedisCluster {
        precondition(transport == .tcp || transport == .tls, "a test cluster runs over TCP or TLS")
        precondition(primaries == 1 && replicasPerPrimary == 0 || primaries >= 3,
                     "one primary alone, or three and more (redis-cli --cluster create needs three)")
        var nodes: [RedisServer] = []
        do {
            for _ in 0..<(primaries * (1 + replicasPerPrimary)) {
                let pki = transport == .tls ? try TestPKI.shared() : nil
                let tls = pki.map { ["--tls-cluster", "yes", "--tls-replication", "yes",
                                     "--tls-client-cert-file", $0.redisClientCert, "--tls-client-key-file", $0.redisClientKey] } ?? []
                nodes.append(try RedisServer.start(transport, extraArguments: tls + [
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", String(nodeTimeoutMs),
                    // The bus port of its own (the default, port + 10000, may not exist for a high free port).
                    "--cluster-port", String(freeLoopbackPort()),
                    // A replica may be promoted however long it was cut off (the tests SIGKILL primaries).
                    "--cluster-replica-validity-factor", "0"]))
            }
            let cluster = LocalRedisCluster(nodes: nodes)
            if primaries == 1 {
                _ = try nodes[0].cli(["CLUSTER", "ADDSLOTSRANGE", "0", String(HashSlot.count - 1)])
                try cluster.waitUntilHealthy(deadlineMs: deadlineMs)
                return cluster
            }
            let tlsClient = nodes[0].pki.map { ["--tls", "--cacert", $0.caCert] } ?? []
            let (status, out, err) = try runCommand("redis-cli", tlsClient + ["--cluster", "create"] + cluster.seeds.map(\.description)
                                                    + ["--cluster-replicas", String(replicasPerPrimary), "--cluster-yes"])
            guard status == 0 else { throw TestSupportError("redis-cli --cluster create failed: \(out) \(err)") }
            try cluster.waitUntilHealthy(deadlineMs: deadlineMs)
            return cluster
        } catch {
            nodes.forEach { $0.stop() }
            throw error
        }
    }

    /// Waits until every running node says `cluster_state:ok`, knows all the others and agrees
    /// on the owner of every slot (and every replica is in sync); throws past the deadline.
    public func waitUntilHealthy(deadlineMs: Int64 = 60_000) throws {
        let running = nodes.filter { $0.pid != nil }
        let healthy = waitUntil("", timeoutMs: deadlineMs, pollMs: 100, failing: false) {
            let states = running.map { (try? $0.cli(["CLUSTER", "INFO"])) ?? "" }
            guard states.allSatisfy({ $0.contains("cluster_state:ok") && $0.contains("cluster_known_nodes:\(nodes.count)") })
            else { return false }
            let views = running.map { (try? self.slotOwners(seenBy: $0)) ?? [:] }
            guard let first = views.first, first.count == HashSlot.count, views.allSatisfy({ $0 == first }) else { return false }
            return running.allSatisfy { node in
                let info = (try? node.cli(["INFO", "replication"])) ?? ""
                return info.contains("role:master") || info.contains("master_link_status:up")
            }
        }
        guard healthy else { throw TestSupportError("the cluster was not healthy after \(deadlineMs) ms") }
    }

    /// Restarts `node` empty (no persistence) but with its `nodes.conf`, so it comes back
    /// owning the slots it had, and waits until the cluster is healthy again. A restarted
    /// primary refuses keyed commands (`-CLUSTERDOWN`) for its first seconds, until it
    /// declares the cluster ok: the caller's loop, not run meanwhile, reconnects after that.
    public func restart(_ node: RedisServer, deadlineMs: Int64 = 60_000) throws {
        try node.restart()
        try waitUntilHealthy(deadlineMs: deadlineMs)
    }

    /// Runs `ACL SETUSER user reset on >password rules…` on every node (the cluster does not
    /// propagate ACLs).
    public func setUser(_ user: String, password: String, rules: [String]) throws {
        for node in nodes { _ = try node.cli(["ACL", "SETUSER", user, "reset", "on", ">" + password] + rules) }
    }

    // MARK: Looking at the cluster

    /// The node running on `port`.
    public func node(port: Int) -> RedisServer? { nodes.first { $0.port == port } }

    /// The primary that owns `slot`, as the node `asking` sees it (the first running one by default).
    public func owner(of slot: HashSlot, asking: RedisServer? = nil) throws -> RedisServer {
        let viewer = asking ?? nodes.first { $0.pid != nil }!
        guard let port = try slotOwners(seenBy: viewer)[slot.value], let node = node(port: port) else {
            throw TestSupportError("no owner of slot \(slot)")
        }
        return node
    }

    /// The primaries, as `CLUSTER NODES` on a running node lists them (failed ones left out).
    public func primaries() throws -> [RedisServer] {
        let viewer = nodes.first { $0.pid != nil }!
        return try clusterNodes(viewer).filter { $0.flags.contains("master") && !$0.flags.contains("fail") }
            .compactMap { node(port: $0.port) }
    }

    /// The node id of `server`.
    public func id(of server: RedisServer) throws -> String {
        try server.cli(["CLUSTER", "MYID"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private struct NodeLine {
        let id: String
        let port: Int
        let flags: [Substring]
        /// The slot ranges it serves (start…end), migration markers left out.
        let slots: [ClosedRange<Int>]
    }

    /// `CLUSTER NODES`: `id ip:port@cport flags master ping pong epoch link slot…`.
    private func clusterNodes(_ viewer: RedisServer) throws -> [NodeLine] {
        try viewer.cli(["CLUSTER", "NODES"]).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count >= 8, let address = fields[1].split(separator: "@").first,
                  let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { return nil }
            let slots: [ClosedRange<Int>] = fields.dropFirst(8).compactMap { range in
                guard !range.hasPrefix("[") else { return nil }
                let ends = range.split(separator: "-").compactMap { Int($0) }
                guard let start = ends.first else { return nil }
                return start...(ends.count > 1 ? ends[1] : start)
            }
            return NodeLine(id: String(fields[0]), port: port, flags: fields[2].split(separator: ","), slots: slots)
        }
    }

    private func slotOwners(seenBy viewer: RedisServer) throws -> [Int: Int] {
        var owners: [Int: Int] = [:]
        for line in try clusterNodes(viewer) where line.flags.contains("master") && !line.flags.contains("fail") {
            for range in line.slots { for slot in range { owners[slot] = line.port } }
        }
        return owners
    }

    // MARK: Moving a slot by hand (the cluster specification's resharding steps)

    /// `CLUSTER SETSLOT slot IMPORTING` on `to`, then `MIGRATING` on `from`: from now on `from`
    /// answers `-ASK` for the slot's keys it no longer has.
    public func beginMigration(of slot: HashSlot, from: RedisServer, to: RedisServer) throws {
        _ = try to.cli(["CLUSTER", "SETSLOT", String(slot.value), "IMPORTING", try id(of: from)])
        _ = try from.cli(["CLUSTER", "SETSLOT", String(slot.value), "MIGRATING", try id(of: to)])
    }

    /// Moves up to `count` of the slot's keys still on `from` to `to` (`MIGRATE … KEYS`);
    /// returns how many it moved (0 when none is left).
    @discardableResult
    public func migrateKeys(of slot: HashSlot, from: RedisServer, to: RedisServer, count: Int = 10) throws -> Int {
        let keys = try from.cli(["CLUSTER", "GETKEYSINSLOT", String(slot.value), String(count)])
            .split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        guard !keys.isEmpty else { return 0 }
        let reply = try from.cli(["MIGRATE", "127.0.0.1", String(to.port), "", "0", "5000", "KEYS"] + keys)
        guard reply.contains("OK") else { throw TestSupportError("MIGRATE answered \(reply)") }
        return keys.count
    }

    /// `CLUSTER SETSLOT slot NODE to` on both ends, then on every other primary: the
    /// migration is over, `from` answers `-MOVED`.
    public func finishMigration(of slot: HashSlot, from: RedisServer, to: RedisServer) throws {
        let target = try id(of: to)
        _ = try to.cli(["CLUSTER", "SETSLOT", String(slot.value), "NODE", target])
        _ = try from.cli(["CLUSTER", "SETSLOT", String(slot.value), "NODE", target])
        for other in try primaries() where other !== to && other !== from {
            _ = try other.cli(["CLUSTER", "SETSLOT", String(slot.value), "NODE", target])
        }
    }

    /// Moves `slot` and its keys from its owner to `to` (`beginMigration`, `migrateKeys` until
    /// none is left, `finishMigration`); returns the former owner. A client whose map was read
    /// before still sends the slot's commands there, and gets `-MOVED`.
    @discardableResult
    public func moveSlot(_ slot: HashSlot, to: RedisServer) throws -> RedisServer {
        let from = try owner(of: slot)
        guard from !== to else { return from }
        try beginMigration(of: slot, from: from, to: to)
        while try migrateKeys(of: slot, from: from, to: to, count: 100) > 0 {}
        try finishMigration(of: slot, from: from, to: to)
        return from
    }

    /// Stops every node.
    public func stop() {
        nodes.forEach { $0.stop() }
    }

    deinit { stop() }
}
