/// One command's arguments, flattened into a single byte buffer for `redisAsyncCommandArgv`
/// (binary-safe: arguments may hold any bytes, including NUL).
///
/// Invariant: `lengths.count` is the argument count and `lengths` sums to `bytes.count - 1`;
/// `bytes` ends with one spare byte so its base address is never nil.
struct RedisCommand {
    private(set) var bytes: [UInt8]
    private(set) var lengths: [Int]

    init(_ args: [String]) {
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

    init(_ args: [[UInt8]]) {
        bytes = []
        bytes.reserveCapacity(args.reduce(1) { $0 + $1.count })
        lengths = args.map(\.count)
        for arg in args { bytes.append(contentsOf: arg) }
        bytes.append(0)
    }

    /// The command name, for messages.
    var name: String { String(decoding: bytes.prefix(lengths.first ?? 0), as: UTF8.self) }

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

