import CLibEvent
import EventLoop
import GatewayConfiguration
import GatewayRoles
import Glibc

/// The admin endpoint's HTTP server: libevent's evhttp on the process's one loop
/// (docs/architecture.md: `/metrics` answered within milliseconds under full load).
///
/// It only carries bytes: each request becomes an `AdminRequest`, the handler (normally
/// `AdminRoutes.handle`, or the operators' console for `/console/…`) gives the `AdminResponse`,
/// at once or after a few Redis round trips, and the reply is sent then. A request whose
/// connection closes before its answer is forgotten (the late answer is dropped). No headers
/// are logged (one of them is the token).
///
/// Its connections are bounded, because an open endpoint must not take the descriptors
/// APNs and Redis need (docs/operations.md, "Limits"): at most `Limits.maxConnections` at once
/// (at the cap the listener stops accepting and further connections wait in the kernel's
/// backlog, holding no descriptor of ours, until one closes); a request must arrive complete
/// within `Limits.requestDeadlineMs` of its connection's start or of the previous answer,
/// whether the client is idle or trickles bytes; a connection whose descriptor falls within
/// `Limits.reservedDescriptors` of the process's limit is closed at once, and a failing
/// `accept` (EMFILE, ENFILE) pauses the listener instead of spinning on it. evhttp 2.1 counts
/// none of this itself: each connection is seen at its creation (`evhttp_set_bevcb`, the
/// server makes the bufferevent) and at its end (`evhttp_connection_set_closecb`).
///
/// Loop-owned. The owner keeps the server alive while it is bound (evhttp holds an unretained
/// pointer to it) and calls `close()` before dropping it.
package final class AdminServer {
    package typealias Handler = (AdminRequest) -> AdminResponse
    /// A handler that answers through its second argument, once, now or later on the loop.
    package typealias AnsweringHandler = (AdminRequest, @escaping (AdminResponse) -> Void) -> Void

    /// The bounds on connections (docs/operations.md, "Limits").
    package struct Limits: Sendable {
        /// Connections open at once, at most.
        package var maxConnections = 64
        /// Time for a request to arrive whole (headers and body), from the connection's start
        /// or the previous answer; an idle or trickling connection is closed at the end of it.
        package var requestDeadlineMs: Int64 = 10_000
        /// Descriptors left to APNs and Redis: a new connection whose descriptor number is
        /// within this many of the process's limit is closed at once.
        package var reservedDescriptors = 128
        /// How long accepting pauses after a failed accept or a connection refused for the reserve.
        var pauseMs: Int64 = 1_000

        package init() {}
    }

    /// Counters, for tests and the log.
    package struct Stats: Equatable, Sendable {
        package var accepted = 0
        /// Connections closed because no whole request arrived in time.
        package var closedAtDeadline = 0
        /// Connections closed at once to keep the descriptor reserve.
        var refusedForReserve = 0
        /// `accept` failures (the listener then pauses).
        var acceptFailures = 0
        /// Times the listener stopped at the connection cap.
        package var stopsAtCap = 0
    }

    private let handler: AnsweringHandler
    private let loop: EventLoop
    private let log: Log?
    package let limits: Limits
    private var http: OpaquePointer?
    private var listener: OpaquePointer?
    private var admission: AdminAdmission
    /// Connections created by evhttp whose end-of-life hook is not set yet (set on this same
    /// loop turn, before any of their I/O).
    private var starting = 0
    /// Open connections by their evhttp connection.
    private var open: [OpaquePointer: AdminConnection] = [:]
    /// Requests waiting for their answer, by serial number: the request and its connection.
    private var waiting: [Int: (request: OpaquePointer, evcon: OpaquePointer?)] = [:]
    private var requestSerial = 0
    private var sweepTimer: LoopTimer!
    private var resumeTimer: LoopTimer!
    private var listening = true
    package private(set) var stats = Stats()
    /// The port actually bound (useful with port 0); nil until `bind` succeeds.
    private(set) var boundPort: Int?

    /// Largest request header block and body accepted; beyond, evhttp answers an error itself.
    static let maxHeadersBytes = 8 * 1024
    static let maxBodyBytes = 64 * 1024
    /// Idle connections and slow requests or replies are dropped after this many seconds (by
    /// default; evhttp's own timeout, beside the request deadline of `Limits`).
    package static let timeoutSeconds: Int32 = 10

    /// Creates the server on `loop`; it listens after `bind`. `timeoutSeconds` is for tests,
    /// which cannot wait the real 10 s for every idle-close check. `log` receives the warnings
    /// of refused connections (limited: they can repeat by the thousand).
    package convenience init(loop: EventLoop, timeoutSeconds: Int32 = AdminServer.timeoutSeconds, limits: Limits = Limits(),
                            log: Log? = nil, handler: @escaping Handler) {
        self.init(loop: loop, timeoutSeconds: timeoutSeconds, limits: limits, log: log, answering: { request, answer in
            answer(handler(request))
        })
    }

    /// As above, with a handler that may answer later (`AnsweringHandler`).
    package init(loop: EventLoop, timeoutSeconds: Int32 = AdminServer.timeoutSeconds, limits: Limits = Limits(),
                log: Log? = nil, answering handler: @escaping AnsweringHandler) {
        self.handler = handler
        self.loop = loop
        self.log = log
        self.limits = limits
        self.admission = AdminAdmission(limits: limits, descriptorLimit: DescriptorLimit.current().soft)
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
        evhttp_set_bevcb(http, { base, context in
            Unmanaged<AdminServer>.fromOpaque(context!).takeUnretainedValue().connectionStarting(base: base!)
        }, context)
        sweepTimer = LoopTimer(loop: loop) { [unowned self] in self.closeLateConnections() }
        resumeTimer = LoopTimer(loop: loop) { [unowned self] in self.updateListener() }
    }

    /// Connections open now.
    package var openConnections: Int { starting + open.count }

    /// Listens on `endpoint` (a host name or address, port 0 for any free port) and returns
    /// the bound port.
    @discardableResult
    package func bind(_ endpoint: Endpoint) throws(AdminServerError) -> Int {
        guard let http else { throw AdminServerError(endpoint: endpoint, problem: "the server is closed") }
        errno = 0
        guard let socket = evhttp_bind_socket_with_handle(http, endpoint.host, UInt16(endpoint.port)) else {
            let why = errno != 0 ? String(cString: strerror(errno)) : "cannot bind"
            throw AdminServerError(endpoint: endpoint, problem: why)
        }
        let port = AdminServer.localPort(evhttp_bound_socket_get_fd(socket)) ?? endpoint.port
        boundPort = port
        if let listener = evhttp_bound_socket_get_listener(socket) {
            self.listener = listener
            AdminServer.byHTTP[UnsafeMutableRawPointer(http)] = Unmanaged.passUnretained(self)
            // evhttp made the listener with the evhttp as its callbacks' argument, so the error
            // callback finds this server through it.
            evconnlistener_set_error_cb(listener) { _, http in
                guard let http, let server = AdminServer.byHTTP[http] else { return }
                server.takeUnretainedValue().acceptFailed(errno)
            }
        }
        return port
    }

    /// Stops listening, closes open connections and frees evhttp. Idempotent.
    package func close() {
        sweepTimer.close()
        resumeTimer.close()
        if let http {
            AdminServer.byHTTP[UnsafeMutableRawPointer(http)] = nil
            evhttp_free(http)  // ends every connection: their close hooks run now
        }
        http = nil
        listener = nil
        boundPort = nil
    }

    /// The servers by their evhttp, for the listener's error callback (loop thread only).
    nonisolated(unsafe) private static var byHTTP: [UnsafeMutableRawPointer: Unmanaged<AdminServer>] = [:]

    // MARK: Connections

    /// evhttp accepted a connection and asks for its bufferevent. The connection's evhttp
    /// object exists only once this returns, so its close hook is set by `connectionStarted`,
    /// made active now: it runs in this loop turn, before any read on the new descriptor.
    /// The extra reference keeps the bufferevent's memory valid until then even if evhttp
    /// freed the connection meanwhile.
    private func connectionStarting(base: OpaquePointer) -> OpaquePointer? {
        guard let bev = bufferevent_socket_new(base, -1, Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else { return nil }
        bufferevent_incref(bev)
        starting += 1
        stats.accepted += 1
        let pending = Unmanaged.passRetained(StartingConnection(server: self, bev: bev)).toOpaque()
        event_base_once(base, -1, Int16(EV_TIMEOUT), { _, _, arg in
            let started = Unmanaged<StartingConnection>.fromOpaque(arg!).takeRetainedValue()
            started.server?.connectionStarted(started.bev)
            bufferevent_decref(started.bev)
        }, pending, nil)
        if admission.verdict(open: openConnections) == .stopAtCap {
            stats.stopsAtCap += 1
            updateListener()  // stops accepting within this accept loop
        }
        return bev
    }

    private func connectionStarted(_ bev: OpaquePointer) {
        starting -= 1
        var readCallback: bufferevent_data_cb?
        var evcon: UnsafeMutableRawPointer?
        bufferevent_getcb(bev, &readCallback, nil, nil, &evcon)
        // evhttp freed it already (out of memory), or the server closed: nothing to track.
        guard readCallback != nil, let evcon, http != nil else { return updateListener() }
        // evhttp's bufferevent callbacks carry the connection as their argument.
        let connection = OpaquePointer(evcon)
        let tracked = AdminConnection(evcon: connection, deadlineMs: Clock.monotonicMs() + limits.requestDeadlineMs)
        open[connection] = tracked
        evhttp_connection_set_closecb(connection, { evcon, context in
            guard let evcon, let context else { return }
            Unmanaged<AdminServer>.fromOpaque(context).takeUnretainedValue().connectionClosed(evcon)
        }, Unmanaged.passUnretained(self).toOpaque())
        if admission.isWithinReserve(descriptor: bufferevent_getfd(bev)) {
            stats.refusedForReserve += 1
            log?.warn("admin connection refused: file descriptors are short; accepting pauses",
                      ["descriptor": Int(bufferevent_getfd(bev)), "limit": admission.descriptorLimit,
                       "reserved": limits.reservedDescriptors], limited: true)
            pause()
            evhttp_connection_free(connection)
            return
        }
        if !sweepTimer.isScheduled { sweepTimer.schedule(afterMs: 1_000) }
    }

    private func connectionClosed(_ evcon: OpaquePointer) {
        open[evcon] = nil
        // evhttp frees (or detaches) the requests of a closing connection: their answers must
        // not touch them.
        for (serial, w) in waiting where w.evcon == evcon { waiting[serial] = nil }
        updateListener()
    }

    /// Ends the connections whose request did not arrive in time (idle or trickling).
    private func closeLateConnections() {
        let now = Clock.monotonicMs()
        let late = open.values.filter { $0.deadlineMs <= now }
        for connection in late {
            stats.closedAtDeadline += 1
            evhttp_connection_free(connection.evcon)  // its close hook forgets it
        }
        if !open.isEmpty { sweepTimer.schedule(afterMs: 1_000) }
    }

    private func acceptFailed(_ error: Int32) {
        stats.acceptFailures += 1
        log?.warn("admin endpoint cannot accept a connection; accepting pauses",
                  ["error": String(cString: strerror(error)), "pause_ms": limits.pauseMs], limited: true)
        pause()
    }

    private var pausedUntilMs: Int64 = 0

    /// Stops accepting for `Limits.pauseMs`.
    private func pause() {
        pausedUntilMs = Clock.monotonicMs() + limits.pauseMs
        updateListener()
        resumeTimer.schedule(afterMs: limits.pauseMs)
    }

    /// Enables or disables the listener as the cap and any pause say.
    private func updateListener() {
        guard let listener else { return }
        let wanted = admission.verdict(open: openConnections) == .accept && Clock.monotonicMs() >= pausedUntilMs
        guard wanted != listening else { return }
        listening = wanted
        if wanted { evconnlistener_enable(listener) } else { evconnlistener_disable(listener) }
    }

    // MARK: Requests

    private func serve(_ request: OpaquePointer) {
        let method = AdminServer.methodName(evhttp_request_get_command(request))
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let p = evhttp_uri_get_path(uri), p.pointee != 0 {
            path = String(cString: p)
        }
        var query = ""
        if let uri = evhttp_request_get_evhttp_uri(request), let q = evhttp_uri_get_query(uri) { query = String(cString: q) }
        var authorization: String?
        var headers: [String: String] = [:]
        if let input = evhttp_request_get_input_headers(request) {
            if let value = evhttp_find_header(input, "Authorization") { authorization = String(cString: value) }
            for name in AdminRequest.consoleHeaderNames {
                if let value = evhttp_find_header(input, name) { headers[name] = String(cString: value) }
            }
        }
        var body: [UInt8] = []
        if let input = evhttp_request_get_input_buffer(request) {
            let length = evbuffer_get_length(input)
            if length > 0 {
                body = [UInt8](repeating: 0, count: length)
                _ = body.withUnsafeMutableBytes { evbuffer_copyout(input, $0.baseAddress, length) }
            }
        }
        let evcon = evhttp_request_get_connection(request)
        var peer: String?
        if let evcon {
            var address: UnsafeMutablePointer<CChar>?
            var port: UInt16 = 0
            evhttp_connection_get_peer(evcon, &address, &port)
            if let address { peer = String(cString: address) + ":" + String(port) }
        }
        requestSerial += 1
        let serial = requestSerial
        waiting[serial] = (request, evcon)
        handler(AdminRequest(method: method, path: path, authorization: authorization, query: query, headers: headers, body: body,
                             peer: peer)) { [weak self] response in
            guard let self, let w = self.waiting.removeValue(forKey: serial) else { return }
            self.send(response, to: w.request)
        }
    }

    private func send(_ response: AdminResponse, to request: OpaquePointer) {
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
        let evcon = evhttp_request_get_connection(request)
        // evhttp sends no body for HEAD, but still Content-Length.
        evhttp_send_reply(request, Int32(response.status), response.reasonPhrase, buffer)
        // A kept-alive connection has the same time again for its next request.
        if let evcon { open[evcon]?.deadlineMs = Clock.monotonicMs() + limits.requestDeadlineMs }
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
package struct AdminServerError: Error, Equatable, CustomStringConvertible {
    package let endpoint: Endpoint
    package let problem: String
    package var description: String { "cannot listen on \(endpoint): \(problem)" }
}

/// One open connection of the admin endpoint.
private final class AdminConnection {
    let evcon: OpaquePointer
    /// Monotonic ms by which its next request must have arrived whole.
    var deadlineMs: Int64

    init(evcon: OpaquePointer, deadlineMs: Int64) {
        self.evcon = evcon
        self.deadlineMs = deadlineMs
    }
}

/// A connection between evhttp's creation of it and the setting of its close hook.
private final class StartingConnection {
    weak var server: AdminServer?
    let bev: OpaquePointer

    init(server: AdminServer, bev: OpaquePointer) {
        self.server = server
        self.bev = bev
    }
}

/// Whether the admin endpoint takes more connections: the cap, and the descriptors kept for
/// APNs and Redis. Pure.
struct AdminAdmission: Equatable {
    enum Verdict: Equatable {
        case accept
        /// The connection cap is reached: stop accepting until one closes.
        case stopAtCap
    }

    let limits: AdminServer.Limits
    /// The process's descriptor limit (the soft `RLIMIT_NOFILE`).
    let descriptorLimit: Int

    func verdict(open: Int) -> Verdict { open >= limits.maxConnections ? .stopAtCap : .accept }

    /// True when a new connection's descriptor is within the reserve: the kernel gives the
    /// lowest free number, so every descriptor below it is in use and fewer than the reserve
    /// are left.
    func isWithinReserve(descriptor: Int32) -> Bool {
        Int(descriptor) >= descriptorLimit - limits.reservedDescriptors
    }
}

extension AdminServer.Limits: Equatable {}
