/// Why a Redis command or operation did not produce a value.
///
/// Every completion of this module carries exactly one of these or a value. None of the
/// messages contains a password: connection problems are described with
/// `RedisURL.redacted`, and server replies to `AUTH` never echo the password.
public enum RedisError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The connection was lost (or freed by the watchdog) before the reply arrived, or there
    /// was no room left in the queue of commands waiting for a connection. The command may
    /// or may not have run: retry what is idempotent.
    case disconnected
    /// A connection attempt failed (refused, timed out, AUTH or SELECT rejected) while the
    /// command waited for it. The command did not run. The text is safe to log.
    case connectFailed(String)
    /// Redis answered with an error reply (`-ERR …`, `-NOGROUP …`, `-WRONGPASS …`), as sent.
    /// Error replies never arrive as `.success(.error(_))`; only nested elements of an array
    /// reply (a Lua table) can be `RedisReply.error`.
    case server(String)
    /// The reply did not have the shape the command promises (a bug or a version mismatch).
    case unexpectedReply(String)
    /// The connection was closed by its owner; nothing more will be sent.
    case closed
    /// A node named another one that is not trusted with the credentials (`RedisNodeTrust`):
    /// the command was not sent there and did not run.
    case refusedNode(RedisNodeRefusal)

    /// The server error's code, the first word of its message (`NOGROUP`, `BUSYGROUP`,
    /// `NOSCRIPT`, `WRONGPASS`), or nil for other errors.
    public var serverCode: Substring? {
        guard case .server(let message) = self else { return nil }
        return message.split(separator: " ", maxSplits: 1).first
    }

    /// Why Redis refuses writes it would otherwise take, when this error is such a refusal:
    /// the one place refusals are told from other errors. A refusal says nothing about the
    /// command (it is idempotent to send it again) and lasts until an operator or Redis fixes
    /// the cause; a script's refusal carries the same code (Redis 7 keeps the code of an error
    /// raised inside a script: `OOM command not allowed … script: …`).
    public var writeRefusal: WriteRefusal? {
        serverCode.flatMap { WriteRefusal(rawValue: String($0)) }
    }

    /// The error codes with which Redis refuses writes as a whole (not one command's fault).
    public enum WriteRefusal: String, CaseIterable, Sendable {
        /// `maxmemory` reached under `noeviction`: commands that add data are refused.
        case outOfMemory = "OOM"
        /// `min-replicas-to-write` not met: every write is refused.
        case noReplicas = "NOREPLICAS"
        /// The last RDB save or AOF write failed (`stop-writes-on-bgsave-error`, a full disk).
        case persistenceFailing = "MISCONF"
        /// The node is a replica (a failover moved the primary elsewhere).
        case readOnly = "READONLY"

        /// The code as Redis sends it: the `reason` label of the refusal metrics.
        public var code: String { rawValue }
    }

    public var description: String {
        switch self {
        case .disconnected: return "redis: connection lost before the reply"
        case .connectFailed(let why): return "redis: cannot connect: \(why)"
        case .server(let message): return "redis: \(message)"
        case .unexpectedReply(let what): return "redis: unexpected reply: \(what)"
        case .closed: return "redis: connection closed"
        case .refusedNode(let refusal): return "redis: \(refusal)"
        }
    }
}
