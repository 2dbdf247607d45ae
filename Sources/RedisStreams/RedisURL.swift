/// Where and as whom to connect to Redis, parsed from a URL:
///
/// - `redis://[[user]:password@]host[:port][/db]` (port 6379 and db 0 by default; an IPv6
///   host in brackets; user and password percent-decoded; a password alone means the
///   `default` user, `AUTH password`);
/// - `unix://[[user]:password@]/path/to/redis.sock[?db=N]`.
///
/// Invariant: the password is only readable through `password`; `description` and
/// `redacted` print `***` in its place, and parse errors never quote it.
public struct RedisURL: Equatable, Sendable, CustomStringConvertible {
    /// The transport.
    public enum Endpoint: Equatable, Sendable {
        case tcp(host: String, port: Int)
        case unix(path: String)
    }

    public let endpoint: Endpoint
    /// The ACL user (`AUTH user password`); nil with a password means `AUTH password`.
    public let user: String?
    /// The password; never printed.
    public let password: String?
    /// The logical database selected after connecting (`SELECT db` when not 0).
    public let db: Int

    public init(endpoint: Endpoint, user: String? = nil, password: String? = nil, db: Int = 0) {
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.db = db
    }

    /// A URL that cannot be used; the message never contains the password.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Parses `text`; throws a `ParseError` naming what is wrong.
    public init(parsing text: String) throws {
        func fail(_ why: String) -> ParseError { ParseError(description: "redis URL: \(why)") }
        let scheme: String
        let rest: Substring
        if let r = text.firstRange(of: "://") {
            scheme = text[..<r.lowerBound].lowercased()
            rest = text[r.upperBound...]
        } else {
            throw fail("expected redis://host:port/db or unix:///path")
        }
        guard scheme == "redis" || scheme == "unix" else {
            if scheme == "rediss" { throw fail("TLS (rediss://) is not supported by hiredis 0.14") }
            throw fail("unknown scheme '\(scheme)', expected redis or unix")
        }

        // Credentials end at the last '@' before the path (a password may contain '@' only percent-encoded).
        var remainder = rest
        var user: String?
        var password: String?
        let authorityEnd = scheme == "unix" ? (remainder.firstIndex(of: "/") ?? remainder.endIndex)
                                            : (remainder.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? remainder.endIndex)
        if let at = remainder[..<authorityEnd].lastIndex(of: "@") {
            let credentials = remainder[..<at]
            remainder = remainder[remainder.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let u = credentials[..<colon]
                let p = credentials[credentials.index(after: colon)...]
                guard let du = RedisURL.percentDecode(u) else { throw fail("bad percent-encoding in the user name") }
                guard let dp = RedisURL.percentDecode(p) else { throw fail("bad percent-encoding in the password") }
                user = du.isEmpty ? nil : du
                password = dp
            } else {
                // `redis://user@host`: a user without a password is not something AUTH can use.
                throw fail("credentials need a password: user:password@ or :password@")
            }
        }

        var query: Substring = ""
        if let q = remainder.firstIndex(of: "?") {
            query = remainder[remainder.index(after: q)...]
            remainder = remainder[..<q]
        }
        var db = 0
        for item in query.split(separator: "&") {
            let kv = item.split(separator: "=", maxSplits: 1)
            guard kv.count == 2, kv[0] == "db", let n = Int(kv[1]), n >= 0 else {
                throw fail("unknown query parameter '\(kv.first ?? "")', only db=N is understood")
            }
            db = n
        }

        if scheme == "unix" {
            guard remainder.hasPrefix("/"), remainder.count > 1 else { throw fail("unix:// needs an absolute socket path") }
            guard remainder.utf8.count < 108 else { throw fail("unix socket path longer than 107 bytes") }
            self.init(endpoint: .unix(path: String(remainder)), user: user, password: password, db: db)
            return
        }

        var hostPort = remainder
        if let slash = remainder.firstIndex(of: "/") {
            hostPort = remainder[..<slash]
            let path = remainder[remainder.index(after: slash)...]
            if !path.isEmpty {
                guard let n = Int(path), n >= 0 else { throw fail("database '\(path)' is not a number") }
                db = n
            }
        }
        var host: Substring
        var portText: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw fail("unclosed '[' in the host") }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if after.hasPrefix(":") { portText = after.dropFirst() } else if !after.isEmpty { throw fail("junk after the host") }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            portText = hostPort[hostPort.index(after: colon)...]
        } else {
            host = hostPort
        }
        guard !host.isEmpty else { throw fail("missing host") }
        var port = 6379
        if let portText {
            guard let p = Int(portText), (1...65535).contains(p) else { throw fail("port '\(portText)' is not 1-65535") }
            port = p
        }
        self.init(endpoint: .tcp(host: String(host), port: port), user: user, password: password, db: db)
    }

    /// The URL with the password replaced by `***`: safe for logs and error messages.
    public var redacted: String {
        var credentials = ""
        if password != nil { credentials = "\(user ?? ""):***@" }
        switch endpoint {
        case .tcp(let host, let port):
            let h = host.contains(":") ? "[\(host)]" : host
            return "redis://\(credentials)\(h):\(port)/\(db)"
        case .unix(let path):
            return "unix://\(credentials)\(path)" + (db == 0 ? "" : "?db=\(db)")
        }
    }

    public var description: String { redacted }

    private static func percentDecode(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var it = s.utf8.makeIterator()
        while let c = it.next() {
            if c == UInt8(ascii: "%") {
                guard let h = it.next(), let l = it.next(), let hv = hexValue(h), let lv = hexValue(l) else { return nil }
                bytes.append(hv << 4 | lv)
            } else {
                bytes.append(c)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
