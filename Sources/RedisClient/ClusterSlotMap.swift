import EventLoop

/// Which primary owns each of the 16,384 slots, as one node answered `CLUSTER SHARDS` (Redis 7)
/// or `CLUSTER SLOTS` (older servers), corrected slot by slot by `-MOVED` answers.
///
/// A value: the cluster client (`RedisCluster`) holds the current one and replaces it at each
/// refresh. Slots no primary serves (a failed shard before its replica is promoted, a cluster
/// being built) have no owner: commands for them wait for a later refresh.
public struct ClusterSlotMap: Equatable, Sendable {
    /// The primaries that own at least one slot, in the order the cluster listed them.
    public private(set) var primaries: [Endpoint]
    /// Per slot, the index of its owner in `primaries`, or -1.
    private var owners: [Int16]
    /// Every node the answer named with a usable address, primaries and replicas, healthy or
    /// not: what the cluster announces of itself (`RedisNodeTrust.learn`). Empty for a map
    /// built by hand.
    public private(set) var announced: Set<Endpoint> = []

    /// A map where no slot has an owner.
    public init() {
        primaries = []
        owners = Array(repeating: -1, count: HashSlot.count)
    }

    /// The primary that serves `slot`, if any.
    public func owner(of slot: HashSlot) -> Endpoint? {
        let index = Int(owners[slot.value])
        return index < 0 ? nil : primaries[index]
    }

    /// How many slots have an owner (16,384 when the whole key space is served).
    public var coveredSlots: Int { owners.reduce(0) { $0 + ($1 >= 0 ? 1 : 0) } }

    /// The slots `node` owns.
    public func slots(of node: Endpoint) -> [HashSlot] {
        guard let index = primaries.firstIndex(of: node) else { return [] }
        return owners.indices.filter { owners[$0] == Int16(index) }.compactMap(HashSlot.init)
    }

    /// Gives `slots` to `node` (a `-MOVED` answer); a primary left without slots leaves.
    public mutating func assign(_ slots: ClosedRange<Int>, to node: Endpoint) {
        give(slots, to: node)
        dropPrimariesWithoutSlots()
    }

    /// Gives `slots` to `node`, leaving primaries without slots in the list: a map being read
    /// drops them once at its end, not once per range (each drop reads all 16,384 slots).
    private mutating func give(_ slots: ClosedRange<Int>, to node: Endpoint) {
        let index: Int
        if let known = primaries.firstIndex(of: node) {
            index = known
        } else {
            index = primaries.count
            primaries.append(node)
        }
        for slot in slots.clamped(to: 0...(HashSlot.count - 1)) { owners[slot] = Int16(index) }
    }

    private mutating func dropPrimariesWithoutSlots() {
        var used = Array(repeating: false, count: primaries.count)
        for owner in owners where owner >= 0 { used[Int(owner)] = true }
        guard used.contains(false) else { return }
        var renumbered = Array(repeating: Int16(-1), count: primaries.count)
        var kept: [Endpoint] = []
        for (i, node) in primaries.enumerated() where used[i] {
            renumbered[i] = Int16(kept.count)
            kept.append(node)
        }
        primaries = kept
        for slot in owners.indices where owners[slot] >= 0 { owners[slot] = renumbered[Int(owners[slot])] }
    }

    // MARK: Reading the cluster's answers

    /// Why an answer could not be read as a slot map.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Reads a `CLUSTER SHARDS` reply (RESP2: each shard and node a flat list of field, value).
    /// A shard's owner is its node with role `master` and health `online`; `tls` picks the
    /// node's `tls-port` when it has one. `askedHost` stands for a node with no address.
    public init(shards reply: RedisReply, tls: Bool, askedHost: String) throws(ParseError) {
        guard let shards = reply.array else { throw ParseError(description: "CLUSTER SHARDS: not a list: \(reply)") }
        self.init()
        for shard in shards {
            let fields = try Self.fields(shard, "shard")
            guard let ranges = fields["slots"]?.array, ranges.count % 2 == 0,
                  let nodes = fields["nodes"]?.array else { throw ParseError(description: "CLUSTER SHARDS: a shard without slots or nodes") }
            var owner: Endpoint?
            for node in nodes {
                let info = try Self.fields(node, "node")
                let port = (tls ? Self.number(info["tls-port"]) : nil) ?? Self.number(info["port"])
                var host = info["endpoint"]?.string ?? ""
                if host.isEmpty || host == "?" { host = info["ip"]?.string ?? "" }
                let address = port.flatMap { Endpoint(reportedHost: host, port: $0, defaultHost: askedHost) }
                if let address { announced.insert(address) }
                guard info["role"]?.string == "master", info["health"]?.string == "online" else { continue }
                guard let address else {
                    throw ParseError(description: "CLUSTER SHARDS: a primary without a usable host and port")
                }
                owner = address
            }
            guard let owner else { continue }   // no primary online: its slots wait for a promotion
            for i in stride(from: 0, to: ranges.count, by: 2) {
                guard let start = Self.number(ranges[i]), let end = Self.number(ranges[i + 1]), 0 <= start, start <= end,
                      end < HashSlot.count else { throw ParseError(description: "CLUSTER SHARDS: a bad slot range") }
                give(start...end, to: owner)
            }
        }
        dropPrimariesWithoutSlots()
    }

    /// Reads a `CLUSTER SLOTS` reply: per range `start, end, [host, port, id, …]` (the
    /// primary first, then its replicas).
    public init(slots reply: RedisReply, askedHost: String) throws(ParseError) {
        guard let ranges = reply.array else { throw ParseError(description: "CLUSTER SLOTS: not a list: \(reply)") }
        self.init()
        for range in ranges {
            guard let parts = range.array, parts.count >= 3, let start = Self.number(parts[0]), let end = Self.number(parts[1]),
                  0 <= start, start <= end, end < HashSlot.count, let primary = parts[2].array, primary.count >= 2,
                  let port = Self.number(primary[1]),
                  let node = Endpoint(reportedHost: primary[0].string ?? "", port: port, defaultHost: askedHost) else {
                throw ParseError(description: "CLUSTER SLOTS: a bad range \(range)")
            }
            give(start...end, to: node)
            announced.insert(node)
            for replica in parts.dropFirst(3) {
                guard let fields = replica.array, fields.count >= 2, let port = Self.number(fields[1]),
                      let address = Endpoint(reportedHost: fields[0].string ?? "", port: port, defaultHost: askedHost) else { continue }
                announced.insert(address)
            }
        }
        dropPrimariesWithoutSlots()
    }

    private static func fields(_ reply: RedisReply, _ what: String) throws(ParseError) -> [String: RedisReply] {
        guard let list = reply.array, list.count % 2 == 0 else { throw ParseError(description: "CLUSTER SHARDS: a \(what) is not a field list") }
        var out: [String: RedisReply] = [:]
        for i in stride(from: 0, to: list.count, by: 2) {
            if let name = list[i].string { out[name] = list[i + 1] }
        }
        return out
    }

    private static func number(_ reply: RedisReply?) -> Int? {
        reply?.integer.map { Int($0) }
    }
}
