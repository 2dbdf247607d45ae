import EventLoop

/// A cluster node's answer that the command belongs elsewhere or later, read from its error
/// reply (https://redis.io/topics/cluster-spec,
/// "Redirection and resharding"):
///
/// - `-MOVED slot host:port`: the slot now lives on that node for good: update the map, resend.
/// - `-ASK slot host:port`: the slot is being migrated and this key already left: send `ASKING`
///   then the command to that node, this once; the map does not change.
/// - `-TRYAGAIN`: a multi-key command whose keys are split by an ongoing migration: retry later.
/// - `-CLUSTERDOWN`: the cluster cannot serve the slot now (a failover in progress): retry later.
public enum ClusterRedirect: Equatable, Sendable {
    case moved(HashSlot, Endpoint)
    case ask(HashSlot, Endpoint)
    case tryAgain
    case clusterDown

    /// Reads an error reply's message; nil for every other error. `currentHost` stands for an
    /// empty host (a node that does not know the address it is reached at).
    public init?(errorMessage message: String, currentHost: String) {
        let words = message.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: true)
        guard let code = words.first else { return nil }
        switch code {
        case "TRYAGAIN": self = .tryAgain
        case "CLUSTERDOWN": self = .clusterDown
        case "MOVED", "ASK":
            guard words.count >= 3, let number = Int(words[1]), let slot = HashSlot(number),
                  let node = Endpoint(parsing: words[2], defaultHost: currentHost) else { return nil }
            self = code == "MOVED" ? .moved(slot, node) : .ask(slot, node)
        default: return nil
        }
    }
}

/// The life of one command sent to a cluster, from its first send to the answer its caller
/// gets: a pure decision, the cluster client (`RedisCluster`) does the I/O.
///
/// Each answer is an event; the machine says what to do next. A redirect to a node the
/// cluster's `RedisNodeTrust` does not allow is refused here, the one place redirects are
/// decided: the caller gets `RedisError.refusedNode` and nothing is sent to that node. A
/// redirect is followed at most
/// `maxRedirects` times and a `TRYAGAIN`/`CLUSTERDOWN` retried at most `maxRetries` times,
/// paced by `backoff`, so a command never loops for ever between confused nodes: past the
/// limits the last error goes to the caller, who treats it as any Redis error (retry later).
public struct ClusterCommandCourse: Equatable, Sendable {
    /// What the client does next.
    public enum Action: Equatable, Sendable {
        /// Hand the answer to the caller.
        case complete
        /// Send the command again to the owner of its slot in the map: the map was corrected
        /// for `slot` (a `-MOVED`), and a refresh of the whole map is due (rate-limited).
        case resendAfterMove(HashSlot, Endpoint)
        /// Send `ASKING` and the command to `node`, once, without touching the map.
        case resendAsking(Endpoint)
        /// Send the command again to its slot's owner after `delayMs`, and refresh the map.
        case retryLater(delayMs: Int64)
        /// Send nothing to the node named: it is not trusted. Complete with
        /// `RedisError.refusedNode`, report the refusal, and refresh the map from the seeds.
        case refuse(RedisNodeRefusal)
    }

    public var maxRedirects = 16
    public var maxRetries = 8
    public var backoff = ReconnectBackoff(baseMs: 20, capMs: 1000)
    public private(set) var redirects = 0
    public private(set) var retries = 0

    public init() {}

    /// The command's answer arrived: `error` is nil for a reply, else the error it got.
    /// `answeredBy` is the node that answered, `trust` says which nodes a redirect may name.
    /// `random` in [0, 1) draws the jitter.
    public mutating func onAnswer(error: RedisError?, answeredBy: Endpoint, trust: RedisNodeTrust, random: Double) -> Action {
        guard case .server(let message)? = error,
              let redirect = ClusterRedirect(errorMessage: message, currentHost: answeredBy.host) else { return .complete }
        switch redirect {
        case .moved(let slot, let node):
            guard trust.allows(node) else { return .refuse(RedisNodeRefusal(kind: .moved, node: node, namedBy: answeredBy)) }
            guard redirects < maxRedirects else { return .complete }
            redirects += 1
            return .resendAfterMove(slot, node)
        case .ask(_, let node):
            guard trust.allows(node) else { return .refuse(RedisNodeRefusal(kind: .ask, node: node, namedBy: answeredBy)) }
            guard redirects < maxRedirects else { return .complete }
            redirects += 1
            return .resendAsking(node)
        case .tryAgain, .clusterDown:
            guard retries < maxRetries else { return .complete }
            retries += 1
            return .retryLater(delayMs: backoff.delayMs(attempt: retries - 1, unit: random))
        }
    }
}
