import Glibc

/// One entry of an allow-list of hosts, as an operator writes it (config/README.md,
/// `redis.cluster.allowed_hosts`, `redis.sentinel.allowed_hosts`): a host name
/// (`redis-1.internal`), an IP address (`10.0.0.5`, `::1`) or a network in CIDR notation
/// (`10.0.0.0/24`, `fd00::/8`).
///
/// Matching compares what it is given as written, with no DNS lookup (the loop never blocks on
/// a resolver): a name matches the same name (case and a trailing dot aside), an address or a
/// network matches an IP address by its bytes (`127.0.0.1` and `::ffff:127.0.0.1` are not the
/// same). So a cluster that announces IP addresses is allowed by addresses or networks, one
/// that announces names (`cluster-announce-hostname`) by names.
public enum HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// A host name, lower case, without a trailing dot.
    case name(String)
    /// An IP address (4 or 16 bytes) and how many of its leading bits must match (32 or 128
    /// for one address).
    case network(address: [UInt8], prefixLength: Int)

    /// Parses `host`, `address` or `address/prefix`; nil for anything else (an empty string,
    /// a prefix out of range, a name with characters no host name has).
    public init?(parsing text: String) {
        if let slash = text.firstIndex(of: "/") {
            guard let address = Self.ipBytes(String(text[..<slash])),
                  let prefix = Int(text[text.index(after: slash)...]), text[text.index(after: slash)...].allSatisfy(\.isASCII),
                  (0...(address.count * 8)).contains(prefix) else { return nil }
            self = .network(address: Self.masked(address, prefix), prefixLength: prefix)
        } else if let address = Self.ipBytes(text) {
            self = .network(address: address, prefixLength: address.count * 8)
        } else {
            var name = text.lowercased()
            if name.hasSuffix(".") { name.removeLast() }
            guard !name.isEmpty, name.utf8.count <= 253,
                  name.utf8.allSatisfy({ $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_")
                      || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) })
            else { return nil }
            self = .name(name)
        }
    }

    /// The pattern that matches exactly `host` (a seed's or a sentinel's host as configured).
    public init(exactly host: String) {
        if let address = Self.ipBytes(host) {
            self = .network(address: address, prefixLength: address.count * 8)
        } else {
            var name = host.lowercased()
            if name.hasSuffix(".") { name.removeLast() }
            self = .name(name)
        }
    }

    /// Whether `host` (a name or an IP address, as a server reported it) is matched.
    public func matches(_ host: String) -> Bool {
        switch self {
        case .name(let name):
            var other = host.lowercased()
            if other.hasSuffix(".") { other.removeLast() }
            return other == name
        case let .network(address, prefixLength):
            guard let bytes = Self.ipBytes(host), bytes.count == address.count else { return false }
            return Self.masked(bytes, prefixLength) == address
        }
    }

    public var description: String {
        switch self {
        case .name(let name): return name
        case let .network(address, prefixLength):
            let text = Self.text(address)
            return prefixLength == address.count * 8 ? text : "\(text)/\(prefixLength)"
        }
    }

    // MARK: IP addresses

    /// The 4 or 16 bytes of an IPv4 or IPv6 address written as text (IPv6 without brackets).
    static func ipBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    /// `bytes` with every bit past the first `prefix` cleared.
    private static func masked(_ bytes: [UInt8], _ prefix: Int) -> [UInt8] {
        var out = bytes
        for i in out.indices {
            let keep = min(max(prefix - i * 8, 0), 8)
            out[i] &= keep == 8 ? 0xFF : ~(UInt8(0xFF) >> UInt8(keep))
        }
        return out
    }

    private static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil }
        guard ok else { return bytes.map(String.init).joined(separator: ".") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
