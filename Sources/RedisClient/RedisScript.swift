/// A Lua script run with `EVALSHA`, falling back to `EVAL` when Redis answers `NOSCRIPT`.
///
/// The SHA1 is learned from Redis, not computed here: the first run sends `SCRIPT LOAD`
/// (pipelined ahead of an `EVAL`) and remembers the digest; later runs send `EVALSHA`.
/// After a Redis restart the script cache is empty: the `NOSCRIPT` answer is retried once
/// as `EVAL`, which caches the script again. Each run completes exactly once, with the
/// final attempt's result; a fallback `EVAL` is sent after the `NOSCRIPT` reply, so it may
/// run after commands sent in between.
///
/// Loop-owned; one script object may serve several connections (the digest depends only
/// on the source).
public final class RedisScript {
    /// The Lua source.
    public let source: String
    /// Its SHA1 as Redis reported it, once known.
    public private(set) var sha1: String?
    private var loading = false

    public init(_ source: String) {
        self.source = source
    }

    /// Runs the script with `keys` (all in one hash slot) and `args` on `connection` (a connection,
    /// or the slot of the keys on a cluster).
    public func run(on connection: some RedisCommandChannel, keys: [String], args: [String],
                    completion: @escaping RedisConnection.Completion) {
        let bytes = keys.reduce(0) { $0 + $1.utf8.count } + args.reduce(0) { $0 + $1.utf8.count }
        var body = RedisCommand(reservingBytes: bytes, arguments: keys.count + args.count)
        for key in keys { body.append(key) }
        for arg in args { body.append(arg) }
        run(on: connection, keyCount: keys.count, body: body, completion: completion)
    }

    /// Runs the script with `keys` and arguments that may hold any bytes (a producer's event).
    public func run(on connection: some RedisCommandChannel, keys: [String], arguments: [RedisArgument],
                    completion: @escaping RedisConnection.Completion) {
        var body = RedisCommand(reservingBytes: keys.reduce(0) { $0 + $1.utf8.count } + arguments.reduce(0) { $0 + $1.count },
                                arguments: keys.count + arguments.count)
        for key in keys { body.append(key) }
        for argument in arguments {
            switch argument {
            case let .text(text): body.append(text)
            case let .bytes(bytes): body.append(bytes: bytes)
            }
        }
        run(on: connection, keyCount: keys.count, body: body, completion: completion)
    }

    /// Runs the script with arguments already written into `body`: its first `keyCount`
    /// arguments are the keys, the rest ARGV (callers on the hot path write keys and values
    /// straight into one buffer).
    package func run(on connection: some RedisCommandChannel, keyCount: Int, body: RedisCommand,
                     completion: @escaping RedisConnection.Completion) {
        func command(_ verb: String, _ script: String) -> RedisCommand {
            var c = RedisCommand(reservingBytes: 16 + script.utf8.count + body.bytes.count, arguments: 3 + body.count)
            c.append(verb)
            c.append(script)
            c.append(String(keyCount))
            c.append(contentsOf: body)
            return c
        }
        guard let sha1 else {
            if !loading {
                loading = true
                connection.send(command: RedisCommand(["SCRIPT", "LOAD", source]), blockMs: 0) { [self] result in
                    loading = false
                    if case .success(let reply) = result, let digest = reply.string { sha1 = digest }
                }
            }
            connection.send(command: command("EVAL", source), blockMs: 0, completion: completion)
            return
        }
        connection.send(command: command("EVALSHA", sha1), blockMs: 0) { [source] result in
            if case .failure(let error) = result, error.serverCode == "NOSCRIPT" {
                connection.send(command: command("EVAL", source), blockMs: 0, completion: completion)
            } else {
                completion(result)
            }
        }
    }
}

/// One argument of a script: text, or bytes passed on exactly (a producer's event, which need
/// not be UTF-8).
public enum RedisArgument: Sendable {
    case text(String)
    case bytes([UInt8])

    /// Its length in bytes.
    var count: Int {
        switch self {
        case let .text(text): return text.utf8.count
        case let .bytes(bytes): return bytes.count
        }
    }
}
