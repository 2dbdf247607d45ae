import EventLoop

/// One command's arguments, flattened into a single byte buffer, written to the wire in Redis'
/// protocol by `writeRESP` (binary-safe: arguments may hold any bytes, including NUL).
///
/// Invariant: `lengths.count` is the argument count and `lengths` sums to `bytes.count - 1`;
/// `bytes` ends with one spare byte so its base address is never nil.
public struct RedisCommand {
    private(set) var bytes: [UInt8]
    private(set) var lengths: [Int]

    package init(_ args: [String]) {
        bytes = []
        bytes.reserveCapacity(args.reduce(1) { $0 + $1.utf8.count })
        lengths = []
        lengths.reserveCapacity(args.count)
        for arg in args {
            arg.withUTF8Bytes { bytes.append(contentsOf: $0) }
            lengths.append(arg.utf8.count)
        }
        bytes.append(0)
    }

    /// An empty command, to be built with `append`; `bytes` is the expected size in bytes.
    package init(reservingBytes bytes: Int, arguments: Int) {
        self.bytes = []
        self.bytes.reserveCapacity(bytes + 1)
        self.bytes.append(0)
        lengths = []
        lengths.reserveCapacity(arguments)
    }

    /// Appends one argument.
    package mutating func append(_ arg: String) {
        bytes.removeLast()
        // The bytes as one copy (`withUTF8Bytes`), not byte by byte through the `UTF8View`.
        arg.withUTF8Bytes { bytes.append(contentsOf: $0) }
        bytes.append(0)
        lengths.append(arg.utf8.count)
    }

    /// Appends one argument of any bytes.
    package mutating func append(bytes arg: [UInt8]) {
        bytes.removeLast()
        bytes.append(contentsOf: arg)
        bytes.append(0)
        lengths.append(arg.count)
    }

    /// Appends one argument made of `head` followed by `tail` (a key: prefix + id), without
    /// building the joined string.
    package mutating func append(_ head: String, _ tail: String) {
        bytes.removeLast()
        head.withUTF8Bytes { bytes.append(contentsOf: $0) }
        tail.withUTF8Bytes { bytes.append(contentsOf: $0) }
        bytes.append(0)
        lengths.append(head.utf8.count + tail.utf8.count)
    }

    /// Appends every argument of `other`.
    package mutating func append(contentsOf other: RedisCommand) {
        bytes.removeLast()
        bytes.append(contentsOf: other.bytes)
        lengths.append(contentsOf: other.lengths)
    }

    /// How many arguments it has.
    package var count: Int { lengths.count }

    package init(_ args: [[UInt8]]) {
        bytes = []
        bytes.reserveCapacity(args.reduce(1) { $0 + $1.count })
        lengths = args.map(\.count)
        for arg in args { bytes.append(contentsOf: arg) }
        bytes.append(0)
    }

    /// The command name, for messages.
    package var name: String { String(decoding: bytes.prefix(lengths.first ?? 0), as: UTF8.self) }

    /// At most how many bytes `writeRESP` writes: the arguments, and for each of them and the
    /// count a kind byte, up to 20 digits and CRLF.
    var respCapacity: Int { bytes.count + 23 * (lengths.count + 1) }

    /// Writes the command in Redis' protocol, as hiredis's `redisFormatSdsCommandArgv` writes it,
    /// to `out` (at least `respCapacity` bytes) and returns how many bytes it wrote: `*ARGC`,
    /// CRLF, then `$LENGTH`, CRLF, the argument's bytes and CRLF for each argument. Straight into
    /// the connection's output, without hiredis's argv arrays, sds buffer and format parsing.
    func writeRESP(to out: UnsafeMutableRawBufferPointer) -> Int {
        precondition(out.count >= respCapacity, "a RESP buffer of \(out.count) bytes for a command of up to \(respCapacity)")
        var at = RedisCommand.writeHeader(UInt8(ascii: "*"), lengths.count, to: out, at: 0)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            for length in lengths {
                at = RedisCommand.writeHeader(UInt8(ascii: "$"), length, to: out, at: at)
                if length > 0 {
                    UnsafeMutableRawBufferPointer(rebasing: out[at..<at + length])
                        .copyMemory(from: UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + length]))
                }
                at += length
                out[at] = UInt8(ascii: "\r")
                out[at + 1] = UInt8(ascii: "\n")
                at += 2
                offset += length
            }
        }
        return at
    }

    /// Writes `kind`, `n` in decimal and CRLF at `at`; returns where it stopped.
    private static func writeHeader(_ kind: UInt8, _ n: Int, to out: UnsafeMutableRawBufferPointer, at start: Int) -> Int {
        var at = start
        out[at] = kind
        at += 1
        var divisor = 1
        while divisor <= n / 10 { divisor *= 10 }
        while divisor > 0 {
            out[at] = UInt8(ascii: "0") + UInt8(n / divisor % 10)
            at += 1
            divisor /= 10
        }
        out[at] = UInt8(ascii: "\r")
        out[at + 1] = UInt8(ascii: "\n")
        return at + 2
    }
}

/// Where a command can be sent: one connection, or the slot of a cluster (which follows the
/// cluster's redirects). `RedisScript` runs on either.
public protocol RedisCommandChannel {
    /// Sends `command`; `blockMs` is how long it may legitimately hold its connection.
    func send(command: RedisCommand, blockMs: Int64, completion: @escaping RedisConnection.Completion)
}

extension RedisConnection: RedisCommandChannel {}

extension RedisClusterSlot: RedisCommandChannel {
    public func send(command: RedisCommand, blockMs: Int64, completion: @escaping RedisConnection.Completion) {
        cluster.send(command: command, slot: slot, lane: lane, blockMs: blockMs, completion: completion)
    }
}
