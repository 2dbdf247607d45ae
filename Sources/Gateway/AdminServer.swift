import CLibEvent
import EventLoop
import Glibc

/// The admin endpoint's HTTP server: libevent's evhttp on the process's one loop
/// (DESIGN.md §4, reference/c-libraries.md: `/metrics` answered in ≤ 6 ms under full load).
///
/// It only carries bytes: each request becomes an `AdminRequest`, `handler` (normally
/// `AdminRoutes.handle`) returns the `AdminResponse`, and the reply is sent at once. No
/// headers are logged (one of them is the token).
///
/// Loop-owned. The owner keeps the server alive while it is bound (evhttp holds an unretained
/// pointer to it) and calls `close()` before dropping it.
public final class AdminServer {
    public typealias Handler = (AdminRequest) -> AdminResponse

    private let handler: Handler
    private var http: OpaquePointer?
    /// The port actually bound (useful with port 0); nil until `bind` succeeds.
    public private(set) var boundPort: Int?

    /// Largest request header block and body accepted; beyond, evhttp answers an error itself.
    public static let maxHeadersBytes = 8 * 1024
    public static let maxBodyBytes = 64 * 1024
    /// Idle connections and slow requests are dropped after this many seconds (by default).
    public static let timeoutSeconds: Int32 = 10

    /// Creates the server on `loop`; it listens after `bind`. `timeoutSeconds` is for tests,
    /// which cannot wait the real 10 s for every idle-close check.
    public init(loop: EventLoop, timeoutSeconds: Int32 = AdminServer.timeoutSeconds, handler: @escaping Handler) {
        self.handler = handler
        guard let http = evhttp_new(loop.base) else { fatalError("evhttp_new failed: out of memory") }
        self.http = http
        evhttp_set_max_headers_size(http, AdminServer.maxHeadersBytes)
        evhttp_set_max_body_size(http, AdminServer.maxBodyBytes)
        evhttp_set_timeout(http, timeoutSeconds)
        let context = Unmanaged.passUnretained(self).toOpaque()
        evhttp_set_gencb(http, { request, context in
            guard let request, let context else { return }
            Unmanaged<AdminServer>.fromOpaque(context).takeUnretainedValue().serve(request)
        }, context)
    }

    /// Listens on `endpoint` (a host name or address, port 0 for any free port) and returns
    /// the bound port.
    @discardableResult
    public func bind(_ endpoint: Endpoint) throws(AdminServerError) -> Int {
        guard let http else { throw AdminServerError(endpoint: endpoint, problem: "the server is closed") }
        errno = 0
        guard let socket = evhttp_bind_socket_with_handle(http, endpoint.host, UInt16(endpoint.port)) else {
            let why = errno != 0 ? String(cString: strerror(errno)) : "cannot bind"
            throw AdminServerError(endpoint: endpoint, problem: why)
        }
        let port = AdminServer.localPort(evhttp_bound_socket_get_fd(socket)) ?? endpoint.port
        boundPort = port
        return port
    }

    /// Stops listening, closes open connections and frees evhttp. Idempotent.
    public func close() {
        if let http { evhttp_free(http) }
        http = nil
        boundPort = nil
    }

    // MARK: Requests

    private func serve(_ request: OpaquePointer) {
        let method = AdminServer.methodName(evhttp_request_get_command(request))
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let p = evhttp_uri_get_path(uri), p.pointee != 0 {
            path = String(cString: p)
        }
        var authorization: String?
        if let headers = evhttp_request_get_input_headers(request),
           let value = evhttp_find_header(headers, "Authorization") {
            authorization = String(cString: value)
        }
        let response = handler(AdminRequest(method: method, path: path, authorization: authorization))
        if let out = evhttp_request_get_output_headers(request) {
            evhttp_add_header(out, "Content-Type", response.contentType)
            evhttp_add_header(out, "Cache-Control", "no-store")
            for (name, value) in response.headers { evhttp_add_header(out, name, value) }
        }
        guard let buffer = evbuffer_new() else {
            evhttp_send_error(request, 500, nil)
            return
        }
        defer { evbuffer_free(buffer) }
        response.body.withUnsafeBytes { raw in
            if let base = raw.baseAddress { _ = evbuffer_add(buffer, base, raw.count) }
        }
        // evhttp sends no body for HEAD, but still Content-Length.
        evhttp_send_reply(request, Int32(response.status), response.reasonPhrase, buffer)
    }

    private static func methodName(_ command: evhttp_cmd_type) -> String {
        switch command {
        case EVHTTP_REQ_GET: return "GET"
        case EVHTTP_REQ_HEAD: return "HEAD"
        case EVHTTP_REQ_POST: return "POST"
        case EVHTTP_REQ_PUT: return "PUT"
        case EVHTTP_REQ_DELETE: return "DELETE"
        case EVHTTP_REQ_OPTIONS: return "OPTIONS"
        case EVHTTP_REQ_TRACE: return "TRACE"
        case EVHTTP_REQ_CONNECT: return "CONNECT"
        case EVHTTP_REQ_PATCH: return "PATCH"
        default: return "OTHER"
        }
    }

    /// The local port of a bound socket (IPv4 or IPv6).
    private static func localPort(_ fd: Int32) -> Int? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        switch Int32(storage.ss_family) {
        case AF_INET:
            return withUnsafePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
            }
        case AF_INET6:
            return withUnsafePointer(to: &storage) { p in
                p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
        default:
            return nil
        }
    }
}

/// The admin endpoint could not listen.
public struct AdminServerError: Error, Equatable, CustomStringConvertible {
    public let endpoint: Endpoint
    public let problem: String
    public var description: String { "cannot listen on \(endpoint): \(problem)" }
}
