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

/// Reconnect delays: capped exponential backoff with jitter, a pure function.
///
/// `delayMs(attempt:)` = uniform in [d/2, d] where d = min(cap, base · 2^attempt).
/// With the defaults (base 50 ms, cap 5 s):
///
/// | attempt | 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7+ |
/// |---|---|---|---|---|---|---|---|---|
/// | d (ms) | 50 | 100 | 200 | 400 | 800 | 1600 | 3200 | 5000 |
///
/// The first attempt after a lost connection is attempt 0; a successful connect resets it.
public struct ReconnectBackoff: Equatable, Sendable {
    public var baseMs: Int64
    public var capMs: Int64

    public init(baseMs: Int64 = 50, capMs: Int64 = 5000) {
        precondition(baseMs > 0 && capMs >= baseMs, "backoff needs 0 < base <= cap")
        self.baseMs = baseMs
        self.capMs = capMs
    }

    /// The delay before attempt number `attempt` (0-based); `unit` is a random number in [0, 1).
    public func delayMs(attempt: Int, unit: Double) -> Int64 {
        // Cap the exponent before shifting so large attempt numbers cannot overflow.
        let shift = min(attempt, 40)
        let full = min(capMs, baseMs << Int64(shift) > 0 ? baseMs << Int64(shift) : capMs)
        let half = full / 2
        return half + Int64(Double(full - half) * min(max(unit, 0), 1))
    }
}
