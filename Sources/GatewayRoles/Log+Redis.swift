import RedisStreams

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
                self.warn("redis connection lost; reconnecting", ["connection": name, "reason": reason])
            case let .connectFailed(reason):
                guard reason != lastFailure else { return }
                lastFailure = reason
                self.warn("redis connection failed; retrying with backoff", ["connection": name, "reason": reason])
            }
        }
    }
}

