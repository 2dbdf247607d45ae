import COpenSSL

/// The digest that names an event's replay ledger: SHA-256 of the event's bytes, in
/// lower-case hex. The router stores an event's bytes unchanged in its dead letter, so a
/// replayed event that dies again has the same digest, whether or not it has a readable id.
public enum EventDigest {
    public static func of(_ event: String) -> String {
        of(Array(event.utf8))
    }

    public static func of(_ event: [UInt8]) -> String {
        var bytes = event
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var size: UInt32 = 0
        let ok = bytes.withUnsafeMutableBytes { input in
            EVP_Digest(input.baseAddress, input.count, &digest, &size, EVP_sha256(), nil)
        }
        precondition(ok == 1 && size == 32, "SHA-256 failed")
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in digest.prefix(Int(size)) {
            out.append(hex[Int(byte >> 4)])
            out.append(hex[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
