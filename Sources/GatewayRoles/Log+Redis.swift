import RedisClient

extension Log {
    /// Logs what happens to a Redis connection: ready (info), lost (warn), and failed
    /// attempts (warn; a failure with the same reason as the one before is not repeated, so a
    /// Redis that stays down costs a line per change, not one per backoff). Reasons are
    /// redacted by `RedisConnection`.
    package func follow(_ connection: RedisConnection, name: String) {
        var lastFailure: String?
        let target = connection.config.redactedTarget
        connection.onEvent = { [unowned self] event in
            switch event {
            case .ready:
                lastFailure = nil
                self.info("redis connection ready", ["connection": name, "redis": target])
            case let .lost(reason):
                lastFailure = nil
                self.warn("redis connection lost; reconnecting", ["connection": name, "error": reason])
            case let .connectFailed(reason):
                guard reason != lastFailure else { return }
                lastFailure = reason
                self.warn("redis connection failed; retrying with backoff", ["connection": name, "error": reason])
            }
        }
    }

    /// Logs what happens to every node connection of a cluster client, as `follow` does for one
    /// connection; the connection is named `name` and the node and lane (`write 10.0.0.1:7000
    /// read:acme`). A node refused as untrusted is an error (limited).
    package func follow(_ cluster: RedisCluster, name: String) {
        cluster.onRefusal = { [unowned self] refusal in self.refused(refusal, connection: name) }
        var lastFailure: [String: String] = [:]
        cluster.onConnectionEvent = { [unowned self] node, event in
            let connection = "\(name) \(node)"
            switch event {
            case .ready:
                lastFailure[node] = nil
                self.info("redis connection ready", ["connection": connection])
            case let .lost(reason):
                lastFailure[node] = nil
                self.warn("redis connection lost; reconnecting", ["connection": connection, "error": reason])
            case let .connectFailed(reason):
                guard reason != lastFailure[node] else { return }
                lastFailure[node] = reason
                self.warn("redis connection failed; retrying with backoff", ["connection": connection, "error": reason])
            }
        }
    }

    /// Logs the primaries the sentinels named that are not trusted with the credentials.
    package func follow(_ sentinels: RedisSentinels) {
        sentinels.onRefusal = { [unowned self] refusal in self.refused(refusal, connection: "sentinels") }
    }

    private func refused(_ refusal: RedisNodeRefusal, connection: String) {
        error("redis node refused: not trusted with the credentials", ["connection": connection, "kind": refusal.kind.rawValue,
                                                                        "node": refusal.node.description,
                                                                        "named_by": refusal.namedBy.description,
                                                                        "fix": "use TLS to Redis; if the node belongs to the deployment, add its host or network to \(refusal.allowListKey)"],
              limited: true)
    }

    /// `follow` for a connection or a cluster client.
    package func follow(_ topology: RedisTopology, name: String) {
        switch topology {
        case .single(let connection): follow(connection, name: name)
        case .cluster(let cluster): follow(cluster, name: name)
        }
    }
}
