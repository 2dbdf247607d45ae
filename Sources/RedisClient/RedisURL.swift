import EventLoop

/// Where and as whom to connect to Redis, parsed from a URL:
///
/// - `redis://[[user]:password@]host[:port][/db]` (port 6379 and db 0 by default; an IPv6
///   host in brackets; user and password percent-decoded; a password alone means the
///   `default` user, `AUTH password`);
/// - `rediss://…`, the same over TLS (`RedisTLSOptions` says whom to trust);
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
    /// True for `rediss://`: TLS over TCP (never with a unix socket).
    public let usesTLS: Bool

    public init(endpoint: Endpoint, user: String? = nil, password: String? = nil, db: Int = 0, usesTLS: Bool = false) {
        precondition(!usesTLS || { if case .tcp = endpoint { return true } else { return false } }(), "TLS needs a TCP endpoint")
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.db = db
        self.usesTLS = usesTLS
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
            throw fail("expected redis://host:port/db, rediss://host:port/db or unix:///path")
        }
        guard scheme == "redis" || scheme == "rediss" || scheme == "unix" else {
            throw fail("unknown scheme '\(scheme)', expected redis, rediss or unix")
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
        self.init(endpoint: .tcp(host: String(host), port: port), user: user, password: password, db: db,
                  usesTLS: scheme == "rediss")
    }

    /// The URL with the password replaced by `***`: safe for logs and error messages.
    public var redacted: String {
        var credentials = ""
        if password != nil { credentials = "\(user ?? ""):***@" }
        switch endpoint {
        case .tcp(let host, let port):
            let h = host.contains(":") ? "[\(host)]" : host
            return "\(usesTLS ? "rediss" : "redis")://\(credentials)\(h):\(port)/\(db)"
        case .unix(let path):
            return "unix://\(credentials)\(path)" + (db == 0 ? "" : "?db=\(db)")
        }
    }

    public var description: String { redacted }

    /// The same credentials, database and scheme with another TCP address (the primary a
    /// sentinel named, or a sentinel itself).
    public func with(host: String, port: Int) -> RedisURL {
        RedisURL(endpoint: .tcp(host: host, port: port), user: user, password: password, db: db, usesTLS: usesTLS)
    }

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

/// Whom a `rediss://` connection trusts and how it proves itself: TLS 1.2 or newer, the
/// server's certificate verified against the host name (or `serverName`) and the CA file or
/// the system trust store. No option turns verification off.
public struct RedisTLSOptions: Equatable, Sendable {
    /// PEM CA bundle to verify the server against; nil uses the system trust store.
    public var caFile: String?
    /// PEM client certificate (chain) and its private key, for servers that require one
    /// (`tls-auth-clients yes`); both or neither.
    public var certFile: String?
    public var keyFile: String?
    /// The name the server's certificate must carry (and the SNI sent) when it differs from
    /// the host connected to; nil uses that host.
    public var serverName: String?

    public init(caFile: String? = nil, certFile: String? = nil, keyFile: String? = nil, serverName: String? = nil) {
        precondition((certFile == nil) == (keyFile == nil), "a client certificate needs its key")
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.serverName = serverName
    }
}

/// The sentinels that know where the primary is (Redis Sentinel): connections ask them
/// for the address of `master`, check that it is a primary, and follow failovers.
///
/// Invariant: `password` is never printed (`description` shows `***`).
public struct RedisSentinelOptions: Equatable, Sendable, CustomStringConvertible {
    /// A sentinel's address.
    public typealias Address = Endpoint

    /// The name the sentinels monitor the primary under (`sentinel monitor NAME …`).
    public var master: String
    /// The sentinels, asked in turn; at least one.
    public var addresses: [Address]
    /// The sentinels' own ACL user and password (`requirepass` / `sentinel sentinel-user`),
    /// if they need one; the data credentials come from the URL.
    public var username: String?
    public var password: String?
    /// Whether the sentinels are reached over TLS (with the connection's `RedisTLSOptions`).
    public var tls: Bool
    /// Hosts and networks a named primary may be on beside the sentinels' own hosts
    /// (`redis.sentinel.allowed_hosts`); nil: the sentinels' hosts only.
    public var allowedHosts: [HostPattern]?

    public init(master: String, addresses: [Address], username: String? = nil, password: String? = nil, tls: Bool = false,
                allowedHosts: [HostPattern]? = nil) {
        precondition(!addresses.isEmpty, "at least one sentinel")
        self.master = master
        self.addresses = addresses
        self.username = username
        self.password = password
        self.tls = tls
        self.allowedHosts = allowedHosts
    }

    /// Which primaries the sentinels may send the data credentials to.
    public var trust: RedisNodeTrust {
        RedisNodeTrust(configured: addresses, allowedHosts: allowedHosts, learnsFromSeeds: false)
    }

    /// The URL a connection to sentinel number `index` uses: its address, the sentinels'
    /// credentials, TLS or not.
    func url(of index: Int) -> RedisURL {
        let address = addresses[index % addresses.count]
        return RedisURL(endpoint: .tcp(host: address.host, port: address.port), user: username, password: password,
                        usesTLS: tls)
    }

    public var description: String {
        "sentinels \(addresses.map(\.description).joined(separator: ",")) of master '\(master)'"
            + (password == nil ? "" : " (as \(username ?? "default"):***)") + (tls ? " over TLS" : "")
    }
}
