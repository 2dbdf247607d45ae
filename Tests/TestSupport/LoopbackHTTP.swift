import EventLoop
import Foundation
import Glibc

/// One HTTP answer as a client saw it on the wire.
public struct HTTPReply: Sendable {
    public let status: Int
    /// Header names in lower case.
    public let headers: [String: String]
    public let body: String
    /// Everything received, status line and headers included.
    public let raw: String

    /// Every value of header `name` (any case) in the order received: a repeated header
    /// (two `Set-Cookie`) gives each of its lines, where `headers` keeps only the last.
    public func values(_ name: String) -> [String] {
        guard let end = raw.range(of: "\r\n\r\n") else { return [] }
        return raw[..<end.lowerBound].components(separatedBy: "\r\n").dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name.lowercased() else { return nil }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }

    /// The server closed the connection without a byte (status 0).
    public static let closedWithoutAnswer = HTTPReply(status: 0, headers: [:], body: "", raw: "")
}

/// A plain HTTP/1.1 client over a loopback TCP socket: the real bytes an operator's curl or a
/// Prometheus scraper would send. It runs on a thread of its own while the test thread
/// drives the loop the server lives on (a blocking client on the loop thread would wait
/// forever for a server that cannot run).
public enum LoopbackHTTP {
    private final class Outcome: @unchecked Sendable {
        let lock = NSLock()
        var reply: Result<HTTPReply, TestSupportError>?
        var isDone: Bool { lock.lock(); defer { lock.unlock() }; return reply != nil }
        func set(_ r: Result<HTTPReply, TestSupportError>) { lock.lock(); reply = r; lock.unlock() }
    }

    /// Sends one request to 127.0.0.1:`port` and runs `loop` until the answer came (the
    /// client gives up after 10 s without a byte).
    /// `from` is the client's own loopback address (`127.0.0.2`: another client, as far as
    /// the server's per-address limits can tell); the system's choice when nil.
    public static func request(_ method: String = "GET", _ path: String, port: Int, headers: [String: String] = [:],
                        body: String = "", from: String? = nil, loop: EventLoop,
                        file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
        try exchange(text(method, path, port: port, headers: headers, body: body), port: port, from: from, on: loop, file: file, line: line)
    }

    /// Writes `bytes` as they are (a request of any shape) and runs `loop` until the server
    /// answered and closed, or closed without an answer.
    public static func exchange(_ bytes: String, port: Int, from: String? = nil, on loop: EventLoop,
                         file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
        let outcome = Outcome()
        Thread.detachNewThread { outcome.set(exchange(bytes, port: port, from: from)) }
        guard loop.run(waitingFor: "the HTTP exchange with port \(port)", file: file, line: line, until: { outcome.isDone }),
              let reply = outcome.reply else {
            throw TestSupportError("no HTTP answer from port \(port)")
        }
        return try reply.get()
    }

    /// Sends one request to a server in another process, blocking this thread (the client gives
    /// up after 10 s without a byte).
    public static func blockingRequest(_ path: String, method: String = "GET", port: Int,
                                headers: [String: String] = [:], body: String = "", from: String? = nil) throws -> HTTPReply {
        try exchange(text(method, path, port: port, headers: headers, body: body), port: port, from: from).get()
    }

    /// A request with `Connection: close` and, when `body` is not empty, its `Content-Length`.
    public static func text(_ method: String, _ path: String, port: Int, headers: [String: String], body: String = "") -> String {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { text += "\(name): \(value)\r\n" }
        if !body.isEmpty { text += "Content-Length: \(body.utf8.count)\r\n" }
        return text + "\r\n" + body
    }

    /// Connects, writes `request`, reads until the server closes, parses. A server that closes
    /// without a byte gives `HTTPReply.closedWithoutAnswer`.
    private static func exchange(_ request: String, port: Int, from: String? = nil) -> Result<HTTPReply, TestSupportError> {
        let fd: Int32
        switch connected(port: port, from: from) {
        case let .success(socket): fd = socket
        case let .failure(error): return .failure(error)
        }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bytes = Array(request.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            // A server refusing a request may answer and close before reading it all.
            guard n > 0 else { break }
            sent += n
        }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EAGAIN { return .failure(TestSupportError("no byte from port \(port) for 10 s")) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        if received.isEmpty { return .success(.closedWithoutAnswer) }
        return parse(received)
    }

    /// A blocking TCP socket connected to 127.0.0.1:`port`, from the loopback address `from`
    /// when given; the caller closes it.
    public static func connected(port: Int, from: String? = nil) -> Result<Int32, TestSupportError> {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(TestSupportError("socket: \(String(cString: strerror(errno)))")) }
        if let from, call(bind, fd, from, port: 0) != 0 {
            let why = String(cString: strerror(errno))
            close(fd)
            return .failure(TestSupportError("bind to \(from): \(why)"))
        }
        guard call(connect, fd, "127.0.0.1", port: port) == 0 else {
            let why = String(cString: strerror(errno))
            close(fd)
            return .failure(TestSupportError("connect to port \(port): \(why)"))
        }
        return .success(fd)
    }

    /// A non-blocking connect to 127.0.0.1:`port` (from the loopback address `from` when
    /// given); the socket, whether or not it completed.
    public static func connectWithoutWaiting(port: Int, from: String? = nil) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        if let from, call(bind, fd, from, port: 0) != 0 {
            close(fd)
            return nil
        }
        let rc = call(connect, fd, "127.0.0.1", port: port)
        guard rc == 0 || errno == EINPROGRESS else {
            close(fd)
            return nil
        }
        return fd
    }

    /// `socketCall` (`bind`, `connect`) on `fd` with the IPv4 address `host`:`port`; its result.
    private static func call(_ socketCall: (Int32, UnsafePointer<sockaddr>?, socklen_t) -> Int32, _ fd: Int32, _ host: String,
                             port: Int) -> Int32 {
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr(host)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketCall(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    private static func parse(_ bytes: [UInt8]) -> Result<HTTPReply, TestSupportError> {
        let raw = String(decoding: bytes, as: UTF8.self)
        guard let split = raw.range(of: "\r\n\r\n") else { return .failure(TestSupportError("no complete HTTP head: \(raw)")) }
        let head = raw[..<split.lowerBound].components(separatedBy: "\r\n")
        let parts = head.first?.split(separator: " ") ?? []
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .failure(TestSupportError("bad status line: \(head.first ?? "")"))
        }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return .success(HTTPReply(status: status, headers: headers, body: String(raw[split.upperBound...]), raw: raw))
    }
}
