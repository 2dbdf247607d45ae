import EventLoop

/// Where a store's commands go: one Redis, or the owners of their keys' slots on a cluster.
///
/// Each store of CallStorage sends on one topology: it asks it for the channel of each
/// command's first key and sends there; on one Redis every key gives the same connection, so
/// nothing is computed on that path. Blocking reads need a link of their own beside it: a
/// sibling connection on one Redis (`RedisConnection.sibling`), a lane of the cluster client on
/// a cluster (`RedisCluster.Lane`).
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

    /// A topology of its own for one part of a process: a cluster client when `cluster` is
    /// set, else one connection (through `sentinels`, if any); named `clientName` in Redis.
    /// Nothing connects before `start()`.
    public static func own(loop: EventLoop, redis: RedisConnection.Config, sentinels: RedisSentinels? = nil,
                           cluster: RedisCluster.Config?, clientName: String) -> RedisTopology {
        if var cluster {
            cluster.connection.clientName = clientName
            return .cluster(RedisCluster(loop: loop, config: cluster))
        }
        var settings = redis
        settings.clientName = clientName
        return .single(RedisConnection(loop: loop, config: settings, sentinels: sentinels))
    }

    /// Starts the connection, or the cluster client.
    public func start() {
        switch self {
        case .single(let connection): connection.start()
        case .cluster(let cluster): cluster.start()
        }
    }

    /// Closes the connection, or the cluster client.
    public func close() {
        switch self {
        case .single(let connection): connection.close()
        case .cluster(let cluster): cluster.close()
        }
    }
}
