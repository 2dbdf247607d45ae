import Foundation
import Glibc

/// What the admin endpoint refuses before a request reaches its routes (docs/operations.md,
/// "The endpoint"), from its header lines as they came. Pure.
///
/// - `Host`: exactly one, naming this endpoint: an IP address, `localhost`, or one of the
///   endpoint's public names (`admin.public_host`, the name in `admin.listen`). A page of
///   another site whose name was made to resolve to this address (DNS rebinding) sends its
///   own name, so the browser cannot read the endpoint for it.
/// - The body's framing: at most one `Content-Length`, of digits only, and no
///   `Transfer-Encoding` (the console's forms and the API send plain bodies). A request a proxy
///   in front could frame otherwise than evhttp does (two lengths, `chunked` in another case
///   or list) is refused, and its connection closed, rather than read one way here and
///   another way there.
struct RequestScreen: Equatable {
    /// Host names besides IP addresses and `localhost`, lower case, without a trailing dot.
    let publicHosts: Set<String>

    init(publicHosts: [String]) {
        self.publicHosts = Set(publicHosts.map { RequestScreen.normalised($0) })
    }

    struct Refusal: Equatable {
        let status: Int
        let message: String
        /// The connection is closed after the answer: what follows cannot be trusted to be a
        /// request of its own.
        let closes: Bool
    }

    func refusal(headers: [(name: String, value: String)]) -> Refusal? {
        func values(_ name: String) -> [String] {
            headers.filter { $0.name.lowercased() == name }.map(\.value)
        }
        let lengths = values("content-length")
        if lengths.count > 1 {
            return Refusal(status: 400, message: "a request carries at most one Content-Length", closes: true)
        }
        if let length = lengths.first, length.isEmpty || !length.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return Refusal(status: 400, message: "Content-Length must be digits only", closes: true)
        }
        if !values("transfer-encoding").isEmpty {
            return Refusal(status: 400, message: "this endpoint takes bodies with Content-Length, not Transfer-Encoding", closes: true)
        }
        let hosts = values("host")
        guard hosts.count == 1, let host = hosts.first else {
            return Refusal(status: 400, message: hosts.isEmpty ? "a request needs a Host header" : "a request carries one Host header",
                           closes: true)
        }
        guard allows(host: host) else {
            return Refusal(status: 421, message: "this endpoint does not serve that Host: reach it by its address, localhost, "
                                                 + "or a name in admin.public_host", closes: false)
        }
        return nil
    }

    /// Whether a `Host` value (`name`, `name:port`, `[v6]:port`) names this endpoint.
    func allows(host value: String) -> Bool {
        var host = Substring(value.trimmingCharacters(in: .whitespaces))
        var port: Substring = ""
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return false }
            let literal = String(host[host.index(after: host.startIndex)..<close])
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return false }
            var address = in6_addr()
            guard inet_pton(AF_INET6, literal, &address) == 1 else { return false }
            return rest.isEmpty || RequestScreen.isPort(rest.dropFirst())
        }
        if let colon = host.firstIndex(of: ":") {
            port = host[host.index(after: colon)...]
            host = host[..<colon]
            guard RequestScreen.isPort(port) else { return false }
        }
        let name = RequestScreen.normalised(String(host))
        var address = in_addr()
        if inet_pton(AF_INET, name, &address) == 1 { return true }
        return name == "localhost" || publicHosts.contains(name)
    }

    private static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
    }

    private static func normalised(_ name: String) -> String {
        let lower = name.lowercased()
        return lower.hasSuffix(".") ? String(lower.dropLast()) : lower
    }
}
