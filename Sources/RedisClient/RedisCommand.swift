/// One command's arguments, flattened into a single byte buffer for `redisFormatSdsCommandArgv`
/// (binary-safe: arguments may hold any bytes, including NUL).
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
            bytes.append(contentsOf: arg.utf8)
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
        bytes.append(contentsOf: arg.utf8)
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
        bytes.append(contentsOf: head.utf8)
        bytes.append(contentsOf: tail.utf8)
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

    /// Calls `body` with argc, argv and argvlen pointing into this command's buffer; they
    /// are valid only during the call (hiredis copies the formatted command at once).
    func withArgv<R>(_ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> R) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(lengths.count + 1)
            var offset = 0
            for length in lengths {
                pointers.append((base + offset).assumingMemoryBound(to: CChar.self))
                offset += length
            }
            pointers.append(nil)
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    body(Int32(lengths.count), argv.baseAddress!, argvlen.baseAddress ?? UnsafePointer(bitPattern: 8)!)
                }
            }
        }
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
