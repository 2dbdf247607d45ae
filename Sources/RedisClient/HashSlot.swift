import EventLoop

/// The Redis Cluster hash slot of a key: CRC16 (XMODEM: polynomial 0x1021, initial value 0,
/// no reflection) of the key's hash tag, modulo 16384, as the cluster specification defines it
/// (https://redis.io/topics/cluster-spec, "Key distribution
/// model" and "Hash tags").
///
/// The hash tag rule: if the key has a `{`, and a `}` somewhere after it, and at least one byte
/// between the first `{` and the first `}` after it, only those bytes are hashed; otherwise the
/// whole key is. Every key of an app is `PREFIX:{APP}:…`, so an app lives in one slot: the slot
/// of its id (docs/architecture.md).
public struct HashSlot: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number of slots of a cluster.
    public static let count = 16_384

    /// 0 ..< 16384.
    public let value: Int

    public init?(_ value: Int) {
        guard (0..<Self.count).contains(value) else { return nil }
        self.value = value
    }

    /// The slot of `key` (bytes as Redis sees them: UTF-8 of a Swift string).
    public init(key: String) {
        self = key.withUTF8Bytes { HashSlot(keyBytes: UnsafeRawBufferPointer($0)) }
    }

    /// The slot of a binary key.
    public init(keyBytes key: UnsafeRawBufferPointer) {
        let tagged = HashSlot.hashTag(of: key)
        value = Int(HashSlot.crc16(UnsafeRawBufferPointer(rebasing: key[tagged])) & 0x3FFF)
    }

    /// The byte range of `key` that is hashed: the hash tag's bytes, or the whole key.
    static func hashTag(of key: UnsafeRawBufferPointer) -> Range<Int> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
              let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")),
              close > open + 1 else { return 0..<key.count }
        return (open + 1)..<close
    }

    /// CRC16-XMODEM, table driven (the table is the specification's, built once).
    static func crc16(_ bytes: UnsafeRawBufferPointer) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ crcTable[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let crcTable: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
        return crc
    }

    public static func < (a: HashSlot, b: HashSlot) -> Bool { a.value < b.value }
    public var description: String { String(value) }
}
