/// A `host:port` pair, checked: a host of visible ASCII without `/`, at most 253 bytes, and
/// a port in 1...65535. IPv6 hosts are written in brackets (`[::1]:443`) and kept without
/// them in `host`.
///
/// One value for every address the process dials or listens on: those an operator writes
/// (config/README.md) and those a server reports, each read by its own parser below.
public struct Endpoint: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` as an operator writes it (config file, command line): strict, so that
    /// a typo is reported rather than dialled. An IPv6 host must be in brackets. Nil when either
    /// part is missing or invalid.
    public init?(parsing text: String) {
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"),
                  text[text.index(after: close)...].hasPrefix(":") else { return nil }
            hostPart = text[text.index(after: text.startIndex)..<close]
            portPart = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { return nil } // unbracketed IPv6
        }
        self.init(checkedHost: hostPart, port: portPart)
    }

    /// Parses `host:port` as a server reports an address, such as a Redis node in a `-MOVED` or
    /// `-ASK` answer (Redis's cluster specification): lenient, as the server is not to be argued
    /// with. The last `:` separates the port, so an IPv6 host may come with or without brackets;
    /// an empty host or `?` (a node that does not know the address it is reached at) stands for
    /// `defaultHost`, the host that was asked.
    public init?(parsing text: Substring, defaultHost: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]) else { return nil }
        var hostPart = text[..<colon]
        if hostPart.hasPrefix("["), hostPart.hasSuffix("]") { hostPart = hostPart.dropFirst().dropLast() }
        self.init(reportedHost: String(hostPart), port: port, defaultHost: defaultHost)
    }

    /// A host and a port a server reports apart, such as a Redis node in `CLUSTER SHARDS` or
    /// `CLUSTER SLOTS`: the same checks, and the same stand-in for an empty or `?` host, as
    /// `init?(parsing:defaultHost:)`.
    public init?(reportedHost host: String, port: Int, defaultHost: String) {
        self.init(checkedHost: host.isEmpty || host == "?" ? defaultHost[...] : host[...], port: String(port)[...])
    }

    /// The checks every notation shares. A host name is at most 253 characters (DNS), of visible
    /// ASCII: it becomes the `:authority` of every request, the TLS server name, or the address
    /// a connection dials.
    private init?(checkedHost hostPart: Substring, port portPart: Substring) {
        guard !hostPart.isEmpty, hostPart.utf8.count <= 253, hostPart.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
              !hostPart.contains("/"),
              portPart.allSatisfy(\.isASCII), let port = Int(portPart), (1...65535).contains(port) else { return nil }
        self.init(host: String(hostPart), port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// 127.0.0.0/8, ::1 and localhost: an admin endpoint listening elsewhere is warned about.
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}
