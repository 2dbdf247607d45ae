// OperatorsConsole: the operators' web console on the admin endpoint (docs/operations.md,
// "Console"). It knows nothing of the gateway's HTTP server: requests and responses cross its
// seam as the plain values below, and the gateway passes in the dead-letter operations and a
// way to read its figures.

/// One request to a `/console/…` path, as the console needs it.
public struct ConsoleRequest: Equatable, Sendable {
    /// `GET`, `HEAD`, `POST`, …
    public var method: String
    /// The path without query, as sent (`/console/dead`).
    public var path: String
    /// The query after `?`, undecoded; empty when absent.
    public var query: String
    /// The request headers the console reads, by lower-case name: `cookie`, `origin`, `host`,
    /// `content-type`, `sec-fetch-site`, `x-forwarded-proto`.
    public var headers: [String: String]
    /// The body (a form, `application/x-www-form-urlencoded`).
    public var body: [UInt8]
    /// `host:port` of the client, for the audit trail and the log; nil when unknown.
    public var peer: String?

    /// The header names a server must copy into `headers`.
    public static let headerNames = ["cookie", "origin", "host", "content-type", "sec-fetch-site", "x-forwarded-proto"]

    public init(method: String, path: String, query: String = "", headers: [String: String] = [:], body: [UInt8] = [],
                peer: String? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.peer = peer
    }

    /// The decoded query parameters, in order.
    public var queryItems: [(String, String)] { FormData.decode(query) }

    /// The decoded form fields of a POST body, in order.
    public var formItems: [(String, String)] { FormData.decode(String(decoding: body, as: UTF8.self)) }

    /// True when the request reached us over TLS: the admin endpoint itself speaks plain HTTP,
    /// so only a TLS-terminating proxy in front of it says so (`X-Forwarded-Proto: https`).
    public var isTLS: Bool { headers["x-forwarded-proto"]?.lowercased() == "https" }

    /// The value of cookie `name`, nil when absent.
    public func cookie(_ name: String) -> String? {
        guard let header = headers["cookie"] else { return nil }
        for part in header.split(separator: ";") {
            let pair = part.drop { $0 == " " }
            guard let eq = pair.firstIndex(of: "=") else { continue }
            if pair[..<eq] == name { return String(pair[pair.index(after: eq)...]) }
        }
        return nil
    }
}

/// The console's answer.
public struct ConsoleResponse: Equatable, Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// Extra headers, in order (`Set-Cookie`, `Location`, the security headers).
    public var headers: [(String, String)]
    /// The request came with a live session, or signed in: the server may trust its connection.
    public var signedIn = false

    public init(status: Int, contentType: String, body: String, headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = Array(body.utf8)
        self.headers = headers
    }

    public static func == (a: ConsoleResponse, b: ConsoleResponse) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.body == b.body
            && a.headers.map(\.0) == b.headers.map(\.0) && a.headers.map(\.1) == b.headers.map(\.1)
    }

    /// The value of header `name` (case-insensitive), the first one.
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    static func html(_ status: Int, _ page: Node, headers: [(String, String)] = []) -> ConsoleResponse {
        ConsoleResponse(status: status, contentType: "text/html; charset=utf-8", body: page.rendered, headers: headers)
    }

    /// 303 See Other to `location` (after a POST, so a reload does not post again).
    static func redirect(_ location: String, headers: [(String, String)] = []) -> ConsoleResponse {
        ConsoleResponse(status: 303, contentType: "text/plain; charset=utf-8", body: "see \(location)\n",
                        headers: [("Location", location)] + headers)
    }
}

/// `application/x-www-form-urlencoded`, the encoding of queries and of the console's forms.
/// Pure.
enum FormData {
    /// `a=1&b=x%20y` as `[("a", "1"), ("b", "x y")]`; `+` is a space; a bad escape is kept as
    /// written; bytes that are not UTF-8 become U+FFFD.
    static func decode(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).prefix(10_000).map { pair in
            if let eq = pair.firstIndex(of: "=") {
                return (unescape(pair[..<eq]), unescape(pair[pair.index(after: eq)...]))
            }
            return (unescape(pair), "")
        }
    }

    static func unescape(_ text: Substring) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var input = Array(text.utf8)[...]
        while let b = input.popFirst() {
            if b == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if b == UInt8(ascii: "%"), input.count >= 2, let hi = hexValue(input[input.startIndex]),
                      let lo = hexValue(input[input.startIndex + 1]) {
                bytes.append(hi << 4 | lo)
                input = input.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    /// `items` as a query string (`a=1&b=x%20y`); empty values are left out.
    static func encode(_ items: [(String, String)]) -> String {
        items.filter { !$0.1.isEmpty }.map { ConsoleEscaping.queryComponent($0.0) + "=" + ConsoleEscaping.queryComponent($0.1) }
            .joined(separator: "&")
    }
}
