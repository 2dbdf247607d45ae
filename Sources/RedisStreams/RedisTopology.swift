/// Where a store's commands go: one Redis, or the owners of their keys' slots on a cluster.
///
/// The stores (`CallStore`, `RetrySchedule`) ask it for the channel of each command's first key
/// and send there; on one Redis every key gives the same connection, so nothing is computed on
/// that path.
public enum RedisTopology {
    /// One Redis (plain, TLS or through sentinels), every command on `connection`.
    case single(RedisConnection)
    /// A Redis Cluster: each command to the owner of its key's slot, redirects followed.
    case cluster(RedisCluster)

    /// Where a command whose (first) key is `key` goes.
    public func channel(for key: String) -> any RedisCommandChannel {
        switch self {
        case .single(let connection): return connection
        case .cluster(let cluster): return cluster.channel(slot: HashSlot(key: key))
        }
    }

    /// Sends `args` (`args[0]` is the command's name) where `key` lives.
    public func send(_ args: [String], key: String, completion: @escaping RedisConnection.Completion) {
        channel(for: key).send(command: RedisCommand(args), blockMs: 0, completion: completion)
    }
}
