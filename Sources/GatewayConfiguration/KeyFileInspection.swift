import Foundation

/// Checks on the files a config names, without ever returning their contents: whether a file
/// can be read, whether a secret is open to group or others, and what kind of private key a
/// PEM file holds.
enum KeyFileInspection {
    /// Why a file cannot be read, as `strerror` says it, or what it is when it is not a
    /// regular file ("is a directory", "is a FIFO, not a regular file", …); nil if it can be.
    /// Opened without blocking: a FIFO with no writer must not hang `config check`.
    static func unreadableReason(_ path: String) -> String? {
        switch openRegular(path) {
        case let .success(fd):
            close(fd)
            return nil
        case let .failure(reason):
            return reason.text
        }
    }

    /// Why a path is not a readable regular file.
    enum NotARegularFile: Error, Equatable {
        case error(String)
        case directory
        case other(String)

        var text: String {
            switch self {
            case let .error(message): return message
            case .directory: return "is a directory"
            case let .other(kind): return "is \(kind), not a regular file"
            }
        }
    }

    /// Opens `path` for reading, without blocking and only if it is a regular file (checked
    /// on the open descriptor, so a file swapped in between cannot slip through). The caller
    /// closes the descriptor.
    static func openRegular(_ path: String) -> Result<Int32, NotARegularFile> {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
        if fd < 0 { return .failure(.error(String(cString: strerror(errno)))) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let message = String(cString: strerror(errno))
            close(fd)
            return .failure(.error(message))
        }
        let kind = info.st_mode & S_IFMT
        guard kind == S_IFREG else {
            close(fd)
            switch kind {
            case S_IFDIR: return .failure(.directory)
            case S_IFIFO: return .failure(.other("a FIFO"))
            case S_IFSOCK: return .failure(.other("a socket"))
            case S_IFCHR: return .failure(.other("a character device"))
            case S_IFBLK: return .failure(.other("a block device"))
            default: return .failure(.other("not a file"))
            }
        }
        // Reads of a regular file do not block; clear the flag for whoever reads on.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return .success(fd)
    }

    /// The contents of the regular file `path`, at most `limit` bytes.
    static func readRegular(_ path: String, limit: Int) -> Result<[UInt8], NotARegularFile> {
        let fd: Int32
        switch openRegular(path) {
        case let .success(opened): fd = opened
        case let .failure(reason): return .failure(reason)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(.error(String(cString: strerror(errno))))
            }
            if n == 0 { return .success(bytes) }
            bytes.append(contentsOf: chunk[..<n])
            if bytes.count > limit { return .failure(.other("over \(limit) bytes")) }
        }
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
        guard case let .success(fd) = openRegular(path) else { return .unreadable }
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
