import Foundation

/// Checks on the files a config names, without ever returning their contents: whether a file
/// can be read, whether a secret is open to group or others, and what kind of private key a
/// PEM file holds.
enum KeyFileInspection {
    /// Why a file cannot be read, as `strerror` says it (or "is a directory"); nil if it can.
    static func unreadableReason(_ path: String) -> String? {
        var info = stat()
        if stat(path, &info) != 0 { return String(cString: strerror(errno)) }
        if (info.st_mode & S_IFMT) == S_IFDIR { return "is a directory" }
        let fd = open(path, O_RDONLY)
        if fd < 0 { return String(cString: strerror(errno)) }
        close(fd)
        return nil
    }

    /// The permission bits when group or others have any access (`mode & 0o077 != 0`), else nil.
    static func looseMode(_ path: String) -> UInt32? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let mode = UInt32(info.st_mode) & 0o777
        return mode & 0o077 != 0 ? mode : nil
    }

    /// The algorithm named in a PKCS#8 `AlgorithmIdentifier`.
    enum KeyAlgorithm: Equatable {
        case ecP256, ecOtherCurve, rsa, ed25519, unknown

        var name: String {
            switch self {
            case .ecP256: return "an EC P-256 key"
            case .ecOtherCurve: return "an EC key on a curve other than P-256"
            case .rsa: return "an RSA key"
            case .ed25519: return "an Ed25519 key"
            case .unknown: return "a key of an algorithm pushgw does not know"
            }
        }
    }

    /// What a PEM private key file holds, judged from its first line and the algorithm
    /// identifier at the start of the DER.
    enum PrivateKeyShape: Equatable {
        /// `BEGIN PRIVATE KEY`: unencrypted PKCS#8, of this algorithm.
        case pkcs8(KeyAlgorithm)
        /// `BEGIN EC PRIVATE KEY`: SEC1, which OpenSSL's older tools write.
        case sec1EC
        /// `BEGIN RSA PRIVATE KEY`: PKCS#1.
        case pkcs1RSA
        /// `BEGIN ENCRYPTED PRIVATE KEY`: needs a passphrase pushgw does not have.
        case encrypted
        /// Some other PEM block (a certificate, a public key).
        case otherPEM
        /// No PEM header on the first line (DER, or not a key at all).
        case notPEM
        /// The file could not be opened or read.
        case unreadable
    }

    /// Classifies the private key in `path`. Reads at most the first 128 bytes, and decodes
    /// only the first 40 base64 characters after the header: the DER version and
    /// `AlgorithmIdentifier`, which come before any key material. The buffer is wiped before
    /// returning, and nothing read leaves this function except the classification.
    static func privateKeyShape(_ path: String) -> PrivateKeyShape {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return .unreadable }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 128)
        defer { for i in buffer.indices { buffer[i] = 0 } }
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return count == 0 ? .notPEM : .unreadable }

        // The first line (leading blank lines tolerated), then the start of the next one.
        var start = 0
        while start < count, buffer[start] == 0x0A || buffer[start] == 0x0D || buffer[start] == 0x20 { start += 1 }
        var end = start
        while end < count, buffer[end] != 0x0A, buffer[end] != 0x0D { end += 1 }
        let header = String(decoding: buffer[start..<end], as: UTF8.self)

        switch header {
        case "-----BEGIN PRIVATE KEY-----":
            var body = end
            while body < count, buffer[body] == 0x0A || buffer[body] == 0x0D { body += 1 }
            var base64 = [UInt8]()
            while body < count, base64.count < 40, buffer[body] != 0x0A, buffer[body] != 0x0D {
                base64.append(buffer[body])
                body += 1
            }
            base64.removeLast(base64.count % 4)
            var der = Data(base64Encoded: Data(base64)).map { [UInt8]($0) } ?? []
            defer { for i in der.indices { der[i] = 0 } }
            for i in base64.indices { base64[i] = 0 }
            return .pkcs8(algorithm(ofPKCS8Prefix: der))
        case "-----BEGIN EC PRIVATE KEY-----": return .sec1EC
        case "-----BEGIN RSA PRIVATE KEY-----": return .pkcs1RSA
        case "-----BEGIN ENCRYPTED PRIVATE KEY-----": return .encrypted
        default: return header.hasPrefix("-----BEGIN ") ? .otherPEM : .notPEM
        }
    }

    private static let oidECPublicKey: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
    private static let oidPrime256v1: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    private static let oidRSAEncryption: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]
    private static let oidEd25519: [UInt8] = [0x2B, 0x65, 0x70]

    /// The algorithm of a PKCS#8 `PrivateKeyInfo` from its first bytes:
    /// `SEQUENCE { INTEGER version, SEQUENCE { OID algorithm, [OID parameters] }, … }`.
    static func algorithm(ofPKCS8Prefix der: [UInt8]) -> KeyAlgorithm {
        var i = 0
        // Reads a tag and a length, returning the length; nil when the bytes run out.
        func header(_ tag: UInt8) -> Int? {
            guard i + 2 <= der.count, der[i] == tag else { return nil }
            let first = Int(der[i + 1])
            i += 2
            if first < 0x80 { return first }
            let octets = first & 0x7F
            guard octets <= 2, i + octets <= der.count else { return nil }
            var length = 0
            for _ in 0..<octets { length = length << 8 | Int(der[i]); i += 1 }
            return length
        }
        func oid() -> [UInt8]? {
            guard let length = header(0x06), i + length <= der.count else { return nil }
            defer { i += length }
            return Array(der[i..<i + length])
        }
        guard header(0x30) != nil, let versionLength = header(0x02) else { return .unknown }
        i += versionLength
        guard header(0x30) != nil, let algorithm = oid() else { return .unknown }
        if algorithm == oidRSAEncryption { return .rsa }
        if algorithm == oidEd25519 { return .ed25519 }
        if algorithm == oidECPublicKey { return oid() == oidPrime256v1 ? .ecP256 : .ecOtherCurve }
        return .unknown
    }
}
