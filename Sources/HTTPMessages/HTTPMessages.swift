// HTTPMessages: the one request and response pair of the admin endpoint, as plain values.
// `AdminServer` (AdminEndpoint) turns evhttp's requests into `HTTPRequest`s and sends
// `HTTPResponse`s; its routes and the operators' console (OperatorsConsole) answer them. It
// owns the values, their ordered headers (`HTTPHeaders`, repeats kept) and the form encoding
// of queries and bodies (`FormData`); it must not know a server, a route or a page.

/// One header line.
public struct HTTPHeader: Equatable, Sendable {
    public var name: String
    public var value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// Header lines in order, a name as often as it came or is sent (two `Set-Cookie` stay two).
/// Names compare without case. A dictionary literal is a list too: `["Set-Cookie": a,
/// "Set-Cookie": b]` holds both.
public struct HTTPHeaders: Equatable, Sendable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var lines: [HTTPHeader]

    public init(_ lines: [HTTPHeader] = []) { self.lines = lines }

    public init(dictionaryLiteral elements: (String, String)...) {
        lines = elements.map { HTTPHeader($0.0, $0.1) }
    }

    /// The first value of `name`, nil when absent. Setting it replaces every line of `name`
    /// with one (nil removes them), where the first was, or at the end.
    public subscript(name: String) -> String? {
        get { lines.first { HTTPHeaders.same($0.name, name) }?.value }
        set {
            let at = lines.firstIndex { HTTPHeaders.same($0.name, name) }
            lines.removeAll { HTTPHeaders.same($0.name, name) }
            guard let newValue else { return }
            lines.insert(HTTPHeader(name, newValue), at: Swift.min(at ?? lines.count, lines.count))
        }
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        lines.filter { HTTPHeaders.same($0.name, name) }.map(\.value)
    }

    /// Adds a line at the end, whatever lines of its name there are.
    public mutating func add(_ name: String, _ value: String) { lines.append(HTTPHeader(name, value)) }

    public static func + (a: HTTPHeaders, b: HTTPHeaders) -> HTTPHeaders { HTTPHeaders(a.lines + b.lines) }
    public static func += (a: inout HTTPHeaders, b: HTTPHeaders) { a.lines += b.lines }

    public func makeIterator() -> IndexingIterator<[HTTPHeader]> { lines.makeIterator() }

    private static func same(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a.lowercased() == b.lowercased()
    }
}

/// One request to the admin endpoint, as much of it as its routes and the console need.
public struct HTTPRequest: Equatable, Sendable {
    /// `GET`, `HEAD`, `POST`, …
    public var method: String
    /// The path without query, as sent (not percent-decoded: only exact paths match).
    public var path: String
    /// The query after `?`, undecoded; empty when absent.
    public var query: String
    /// Every header line of the request, in order.
    public var headers: HTTPHeaders
    /// The body (the console's forms, `application/x-www-form-urlencoded`).
    public var body: [UInt8]
    /// `address:port` of the client, for the audit trail, the guess limits and the log; nil
    /// when unknown.
    public var peer: String?

    public init(method: String, path: String, query: String = "", headers: HTTPHeaders = [:], body: [UInt8] = [],
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

    /// The value of cookie `name` in the (first) `Cookie` header, nil when absent.
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

/// The answer to an `HTTPRequest`.
public struct HTTPResponse: Equatable, Sendable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// The headers beyond `Content-Type`, in order, repeats kept (`Set-Cookie`, `Location`,
    /// `WWW-Authenticate`, the console's security headers).
    public var headers: HTTPHeaders
    /// The request proved the admin token or a console session: its connection is trusted,
    /// kept longest under a connection flood (`AdminServer`).
    public var trusted = false

    public init(status: Int, contentType: String, body: String, headers: HTTPHeaders = [:]) {
        self.init(status: status, contentType: contentType, bytes: Array(body.utf8), headers: headers)
    }

    /// A body already encoded (a rendered page).
    public init(status: Int, contentType: String, bytes: [UInt8], headers: HTTPHeaders = [:]) {
        self.status = status
        self.contentType = contentType
        body = bytes
        self.headers = headers
    }

    /// The value of header `name` (case-insensitive), the first one.
    public func header(_ name: String) -> String? { headers[name] }

    /// The HTTP reason phrase of `status`.
    public var reasonPhrase: String {
        switch status {
        case 200: return "OK"
        case 202: return "Accepted"
        case 303: return "See Other"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 409: return "Conflict"
        case 413: return "Content Too Large"
        case 421: return "Misdirected Request"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}

/// `application/x-www-form-urlencoded`, the encoding of queries and of the console's forms.
/// Pure.
public enum FormData {
    /// `a=1&b=x%20y` as `[("a", "1"), ("b", "x y")]`; `+` is a space; a bad escape is kept as
    /// written; bytes that are not UTF-8 become U+FFFD.
    public static func decode(_ text: String) -> [(String, String)] {
        text.split(separator: "&", omittingEmptySubsequences: true).prefix(10_000).map { pair in
            if let eq = pair.firstIndex(of: "=") {
                return (unescape(pair[..<eq]), unescape(pair[pair.index(after: eq)...]))
            }
            return (unescape(pair), "")
        }
    }

    public static func unescape(_ text: Substring) -> String {
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
    public static func encode(_ items: [(String, String)]) -> String {
        items.filter { !$0.1.isEmpty }.map { component($0.0) + "=" + component($0.1) }.joined(separator: "&")
    }

    /// One component of a query string or path (`app=…`, `/console/dead/APP/ID`): every byte
    /// but `A–Z a–z 0–9 - . _ ~` percent-encoded, so a value cannot add a parameter, a path
    /// segment or a scheme (`javascript:` stays `javascript%3A`).
    public static func component(_ text: String) -> String {
        var out = ""
        for b in text.utf8 {
            switch b {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(b))
            default:
                let hex = String(b, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" + hex : hex)
            }
        }
        return out
    }
}
