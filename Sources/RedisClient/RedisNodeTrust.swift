import EventLoop

/// Which Redis nodes may be sent the credentials of `redis.url` and the data commands, when a
/// node other than a configured one is named: a cluster's `-MOVED`/`-ASK` target, a primary in
/// a slot map, the primary a sentinel names (docs/operations.md, "Which nodes get the
/// credentials").
///
/// A node is trusted when its host matches `allowed` — the configured addresses' hosts
/// (`redis.cluster.seeds`, `redis.sentinel.addresses`) and `allowed_hosts` — or, when no
/// `allowed_hosts` is configured for a cluster, when its `host:port` is one a seed announced in
/// its `CLUSTER SHARDS`/`CLUSTER SLOTS` answer (`learn`). Anything else is refused before a
/// connection is opened: nothing, not even the TCP handshake, goes to it.
///
/// A value; `RedisCluster` and `RedisSentinels` each hold one and ask it before they dial.
public struct RedisNodeTrust: Equatable, Sendable {
    /// Hosts trusted whatever their port.
    public let allowed: [HostPattern]
    /// Whether the nodes a seed announces become trusted (no `allowed_hosts` configured).
    public let learnsFromSeeds: Bool
    /// The nodes seeds announced so far (only with `learnsFromSeeds`), at most `maxAnnounced`.
    public private(set) var announced: Set<Endpoint> = []
    /// Announcements are kept up to this many nodes: a cluster has at most about a thousand.
    public static let maxAnnounced = 4096

    /// `configured`: the seeds or the sentinels; `allowedHosts`: the config's list, or nil
    /// when it has none. `learnsFromSeeds` is only for a cluster without `allowed_hosts`.
    public init(configured: [Endpoint], allowedHosts: [HostPattern]?, learnsFromSeeds: Bool) {
        var patterns: [HostPattern] = []
        for pattern in configured.map({ HostPattern(exactly: $0.host) }) + (allowedHosts ?? []) where !patterns.contains(pattern) {
            patterns.append(pattern)
        }
        allowed = patterns
        self.learnsFromSeeds = learnsFromSeeds && allowedHosts == nil
    }

    /// Whether `node` may be dialled with the credentials.
    public func allows(_ node: Endpoint) -> Bool {
        announced.contains(node) || allowed.contains { $0.matches(node.host) }
    }

    /// Trusts the nodes a seed announced (no-op unless `learnsFromSeeds`).
    public mutating func learn<S: Sequence>(_ nodes: S) where S.Element == Endpoint {
        guard learnsFromSeeds else { return }
        for node in nodes where announced.count < Self.maxAnnounced { announced.insert(node) }
    }
}

/// A node pushgw would not dial: who named it, as what, and the fix. Safe to log (no secret).
public struct RedisNodeRefusal: Equatable, Sendable, CustomStringConvertible {
    /// How the node was named.
    public enum Kind: String, CaseIterable, Sendable {
        /// A `-MOVED` redirect.
        case moved
        /// An `-ASK` redirect.
        case ask
        /// A primary in a `CLUSTER SHARDS`/`CLUSTER SLOTS` answer.
        case slotMap = "slot_map"
        /// The primary a sentinel named (`get-master-addr-by-name` or `+switch-master`).
        case sentinel
    }

    public let kind: Kind
    /// The node refused.
    public let node: Endpoint
    /// The node that named it.
    public let namedBy: Endpoint

    public init(kind: Kind, node: Endpoint, namedBy: Endpoint) {
        self.kind = kind
        self.node = node
        self.namedBy = namedBy
    }

    /// The config key whose list would allow the node.
    public var allowListKey: String { kind == .sentinel ? "redis.sentinel.allowed_hosts" : "redis.cluster.allowed_hosts" }

    public var description: String {
        let what: String
        switch kind {
        case .moved: what = "redirected (-MOVED) to"
        case .ask: what = "redirected (-ASK) to"
        case .slotMap: what = "gave a slot map naming"
        case .sentinel: what = "named as the primary"
        }
        return "\(namedBy) \(what) \(node), which is not a trusted node: nothing was sent to it "
            + "(if it belongs to the deployment, add its host or network to \(allowListKey))"
    }
}
