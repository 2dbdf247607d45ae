import HTTPMessages
import CLibEvent
import EventLoop
import GatewayConfiguration
import GatewayRoles
import Glibc

/// The admin endpoint's HTTP server: libevent's evhttp on the process's one loop
/// (docs/architecture.md: `/metrics` answered within milliseconds under full load).
///
/// It only carries bytes: each request becomes an `HTTPRequest`, the handler (normally
/// `AdminRoutes.handle`, or the operators' console for `/console/…`) gives the `HTTPResponse`,
/// at once or after a few Redis round trips, and the reply is sent then. A request whose
/// connection closes before its answer is forgotten (the late answer is dropped). No headers
/// are logged (one of them is the token).
///
/// Its connections are bounded, because an open endpoint must not take the descriptors
/// APNs and Redis need, and a flood of idle connections must not keep the probes out
/// (docs/operations.md, "Limits"):
/// - at most `Limits.maxConnections` at once, and `Limits.maxConnectionsPerClient` from one
///   client address (`ClientAddress`). A new connection beyond either cap takes the place of
///   an idle one (no request being answered): first one that never proved a token, oldest
///   activity first, then a trusted one (`HTTPResponse.trusted`); the newcomer is closed at
///   once only when every connection of its share is answering. So `/healthz` and `/readyz`
///   always get in, whatever a client without the token holds open;
/// - connections are accepted at most `Limits.acceptsPerSecond` (the listener pauses between)
///   and `Limits.acceptsPerTurn` per loop turn, and a kept-alive connection is closed after an
///   answer once it asked more than `Limits.requestsPerConnectionPerSecond`: a client that
///   floods the endpoint with requests (scrapes back to back) or connections costs the loop a
///   bounded share, however fast it is, and routing keeps its share;
/// - a request must arrive complete within `Limits.requestDeadlineMs` of its connection's
///   start or of the previous answer, whether the client is idle or trickles bytes; a trusted
///   connection may wait `Limits.trustedIdleMs` between requests;
/// - a connection whose descriptor falls within `Limits.reservedDescriptors` of the process's
///   limit is closed at once, and a failing `accept` (EMFILE, ENFILE) pauses the listener
///   instead of spinning on it.
/// evhttp 2.1 counts none of this itself (`evhttp_set_max_connections` came with 2.2): each
/// connection is seen at its creation (`evhttp_set_bevcb`, the server makes the bufferevent),
/// placed once evhttp knows its peer (later in the same loop turn, before any read), and seen
/// at its end (`evhttp_connection_set_closecb`).
///
/// Loop-owned. The owner keeps the server alive while it is bound (evhttp holds an unretained
/// pointer to it) and calls `close()` before dropping it.
package final class AdminServer {
    package typealias Handler = (HTTPRequest) -> HTTPResponse
    /// A handler that answers through its second argument, once, now or later on the loop.
    package typealias AnsweringHandler = (HTTPRequest, @escaping (HTTPResponse) -> Void) -> Void

    /// The bounds on connections (docs/operations.md, "Limits").
    package struct Limits: Sendable {
        /// Connections open at once, at most.
        package var maxConnections = 64
        /// Connections from one client address (an IPv6 /64) at once, at most.
        package var maxConnectionsPerClient = 32
        /// Time for a request to arrive whole (headers and body), from the connection's start
        /// or the previous answer; an idle or trickling connection is closed at the end of it.
        package var requestDeadlineMs: Int64 = 10_000
        /// Time a trusted connection (its last request proved the admin token or a console
        /// session) may stay idle between requests.
        package var trustedIdleMs: Int64 = 60_000
        /// Connections accepted per second at most, and at once.
        package var acceptsPerSecond = 1_000
        package var acceptBurst = 16
        /// Requests one kept-alive connection may make per second before its answer closes it
        /// (the client then reconnects, under `acceptsPerSecond`).
        package var requestsPerConnectionPerSecond = 10
        /// Connections accepted in one loop turn, at most: a connection accepted in one turn is
        /// read in the next, and fewer newcomers than a client's share cannot push it out
        /// before its request is read.
        package var acceptsPerTurn = 8
        /// Descriptors left to APNs and Redis: a new connection whose descriptor number is
        /// within this many of the process's limit is closed at once.
        package var reservedDescriptors = 128
        /// How long accepting pauses after a failed accept or a connection refused for the reserve.
        var pauseMs: Int64 = 1_000
        /// The listen backlog asked of the kernel (which caps it at `net.core.somaxconn`).
        var listenBacklog: Int32 = 4_096

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
        /// Idle connections closed to make room for a new one.
        package var evicted = 0
        /// New connections closed at once: their client's share was all answering.
        package var refusedAtCap = 0
    }

    private let handler: AnsweringHandler
    private let screen: RequestScreen
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
    private var connectionSerial = 0
    private var sweepTimer: LoopTimer!
    private var resumeTimer: LoopTimer!
    /// Ends the turn's accepts (`Limits.acceptsPerTurn`) on the next loop turn.
    private var turnTimer: LoopTimer!
    private var acceptedThisTurn = 0
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
    /// `publicHosts` are the names a request's `Host` may give besides IP addresses and
    /// `localhost` (`RequestScreen`).
    package convenience init(loop: EventLoop, timeoutSeconds: Int32 = AdminServer.timeoutSeconds, limits: Limits = Limits(),
                            publicHosts: [String] = [], log: Log? = nil, handler: @escaping Handler) {
        self.init(loop: loop, timeoutSeconds: timeoutSeconds, limits: limits, publicHosts: publicHosts, log: log,
                  answering: { request, answer in answer(handler(request)) })
    }

    /// As above, with a handler that may answer later (`AnsweringHandler`).
    package init(loop: EventLoop, timeoutSeconds: Int32 = AdminServer.timeoutSeconds, limits: Limits = Limits(),
                publicHosts: [String] = [], log: Log? = nil, answering handler: @escaping AnsweringHandler) {
        self.handler = handler
        self.screen = RequestScreen(publicHosts: publicHosts)
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
        turnTimer = LoopTimer(loop: loop) { [unowned self] in
            self.acceptedThisTurn = 0
            self.updateListener()
        }
    }

    /// Connections open now.
    package var openConnections: Int { starting + open.count }

    /// Listens on `endpoint` (a host name or address, port 0 for any free port) and returns
    /// the bound port.
    ///
    /// The listener is libevent's own (`evconnlistener_new_bind`) handed to evhttp
    /// (`evhttp_bind_listener`) rather than `evhttp_bind_socket`, for its listen backlog:
    /// evhttp listens with 128, and a flood of more connections than the cap and 128 fills
    /// the kernel's accept queue, which then drops a probe's SYN (the client retries only
    /// after a second). With `Limits.listenBacklog` a probe waits in the queue and is
    /// accepted in its turn (docs/operations.md, "Limits").
    @discardableResult
    package func bind(_ endpoint: Endpoint) throws(AdminServerError) -> Int {
        guard let http else { throw AdminServerError(endpoint: endpoint, problem: "the server is closed") }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE
        var found: UnsafeMutablePointer<addrinfo>?
        let resolved = evutil_getaddrinfo(endpoint.host, String(endpoint.port), &hints, &found)
        guard resolved == 0, let first = found else {
            throw AdminServerError(endpoint: endpoint, problem: String(cString: evutil_gai_strerror(resolved)))
        }
        defer { evutil_freeaddrinfo(first) }
        errno = 0
        let flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_REUSEABLE
        guard let made = evconnlistener_new_bind(loop.base, nil, nil, flags, limits.listenBacklog, first.pointee.ai_addr,
                                                 Int32(first.pointee.ai_addrlen)) else {
            let why = errno != 0 ? String(cString: strerror(errno)) : "cannot bind"
            throw AdminServerError(endpoint: endpoint, problem: why)
        }
        guard let socket = evhttp_bind_listener(http, made) else {
            evconnlistener_free(made)
            throw AdminServerError(endpoint: endpoint, problem: "evhttp cannot take the listener (out of memory)")
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
        turnTimer.close()
        // evhttp_free frees the listener before it ends the connections, whose close hooks
        // would otherwise turn the freed listener on again.
        listener = nil
        if let http {
            AdminServer.byHTTP[UnsafeMutableRawPointer(http)] = nil
            evhttp_free(http)  // ends every connection: their close hooks run now
        }
        http = nil
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
        acceptedThisTurn += 1
        if !turnTimer.isScheduled { turnTimer.schedule(afterMs: 0) }
        if let waitMs = admission.takeAccept(nowMs: Clock.monotonicMs()) {
            pause(forMs: waitMs)  // the accept rate is spent: stops within this accept loop
        }
        let pending = Unmanaged.passRetained(StartingConnection(server: self, bev: bev)).toOpaque()
        event_base_once(base, -1, Int16(EV_TIMEOUT), { _, _, arg in
            let started = Unmanaged<StartingConnection>.fromOpaque(arg!).takeRetainedValue()
            started.server?.connectionStarted(started.bev)
            bufferevent_decref(started.bev)
        }, pending, nil)
        updateListener()  // stops accepting within this accept loop when nothing can give way
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
        var address: UnsafeMutablePointer<CChar>?
        var port: UInt16 = 0
        evhttp_connection_get_peer(connection, &address, &port)
        let client = ClientAddress(address: address.map { String(cString: $0) } ?? "?")
        let now = Clock.monotonicMs()
        let placement = admission.place(client, among: open.values.map(\.candidate))
        connectionSerial += 1
        let tracked = AdminConnection(evcon: connection, serial: connectionSerial, client: client, nowMs: now,
                                      deadlineMs: now + limits.requestDeadlineMs)
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
            pause(forMs: limits.pauseMs)
            evhttp_connection_free(connection)
            return
        }
        switch placement {
        case .keep(closing: nil):
            break
        case let .keep(closing: serial?):
            if let victim = open.values.first(where: { $0.serial == serial }) {
                stats.evicted += 1
                evhttp_connection_free(victim.evcon)  // its close hook forgets it
            }
        case .refuse:
            stats.refusedAtCap += 1
            log?.warn("admin connection refused: every connection of its share is answering",
                      ["client": client.key, "per_client": limits.maxConnectionsPerClient, "limit": limits.maxConnections],
                      limited: true)
            evhttp_connection_free(connection)
            return
        }
        if !sweepTimer.isScheduled { sweepTimer.schedule(afterMs: 1_000) }
        updateListener()
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
        pause(forMs: limits.pauseMs)
    }

    private var pausedUntilMs: Int64 = 0

    /// Stops accepting for `ms` (or longer, if a pause runs already).
    private func pause(forMs ms: Int64) {
        let until = Clock.monotonicMs() + ms
        guard until > pausedUntilMs else { return }
        pausedUntilMs = until
        updateListener()
        resumeTimer.schedule(afterMs: ms)
    }

    /// Enables or disables the listener as the caps and any pause say: at the cap it accepts
    /// only while some connection could give way (`AdminAdmission.canMakeRoom`).
    private func updateListener() {
        guard let listener else { return }
        // A pause's timer may fire a little before the pause's end by this clock (libevent
        // measures from its cached time): then it waits out the rest.
        let now = Clock.monotonicMs()
        if now < pausedUntilMs && !resumeTimer.isScheduled { resumeTimer.schedule(afterMs: pausedUntilMs - now) }
        // Connections still starting are idle and untrusted: they could give way too.
        let room = openConnections < limits.maxConnections
            || (openConnections < limits.maxConnections + limits.acceptsPerTurn
                && (starting > 0 || admission.canMakeRoom(among: open.values.map(\.candidate))))
        let wanted = room && now >= pausedUntilMs && acceptedThisTurn < limits.acceptsPerTurn
        guard wanted != listening else { return }
        listening = wanted
        if wanted {
            evconnlistener_enable(listener)
        } else {
            if !room { stats.stopsAtCap += 1 }
            evconnlistener_disable(listener)
        }
    }

    // MARK: Requests

    private func serve(_ request: OpaquePointer) {
        // Refused before anything else (`RequestScreen`): the routes never see such a request.
        let lines = AdminServer.headerLines(request)
        if let refusal = screen.refusal(headers: lines) {
            var response = HTTPResponse.error(refusal.status, refusal.message)
            if refusal.closes { response.headers["Connection"] = "close" }
            return send(response, to: request)
        }
        let method = AdminServer.methodName(evhttp_request_get_command(request))
        var path = "/"
        if let uri = evhttp_request_get_evhttp_uri(request), let p = evhttp_uri_get_path(uri), p.pointee != 0 {
            path = String(cString: p)
        }
        var query = ""
        if let uri = evhttp_request_get_evhttp_uri(request), let q = evhttp_uri_get_query(uri) { query = String(cString: q) }
        let headers = HTTPHeaders(lines.map { HTTPHeader($0.name, $0.value) })
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
        if let evcon, let connection = open[evcon] {
            connection.answering += 1
            updateListener()  // with every connection answering, nothing can give way
        }
        handler(HTTPRequest(method: method, path: path, query: query, headers: headers, body: body, peer: peer)) { [weak self] response in
            guard let self, let w = self.waiting.removeValue(forKey: serial) else { return }
            var response = response
            if let evcon = w.evcon, self.answered(evcon, trusted: response.trusted) == .close {
                response.headers["Connection"] = "close"
            }
            self.send(response, to: w.request)
        }
    }

    enum AfterAnswer { case keepAlive, close }

    /// A request of `evcon` is answered now: the connection has the request deadline again for
    /// its next one, or the trusted time once a request proved the token; idle, it may give
    /// way to a new connection again. `.close` when it asked more than its requests per
    /// second: the answer ends it.
    private func answered(_ evcon: OpaquePointer, trusted: Bool) -> AfterAnswer {
        guard let connection = open[evcon] else { return .keepAlive }
        let now = Clock.monotonicMs()
        connection.answering -= 1
        connection.lastActivityMs = now
        if now - connection.windowStartMs >= 1_000 {
            connection.windowStartMs = now
            connection.requestsInWindow = 0
        }
        connection.requestsInWindow += 1
        if trusted && !connection.trusted {
            connection.trusted = true
            evhttp_connection_set_timeout(evcon, Int32(limits.trustedIdleMs / 1000))
        }
        connection.deadlineMs = now + (connection.trusted ? limits.trustedIdleMs : limits.requestDeadlineMs)
        updateListener()
        return connection.requestsInWindow > limits.requestsPerConnectionPerSecond ? .close : .keepAlive
    }

    private func send(_ response: HTTPResponse, to request: OpaquePointer) {
        if let out = evhttp_request_get_output_headers(request) {
            evhttp_add_header(out, "Content-Type", response.contentType)
            evhttp_add_header(out, "Cache-Control", "no-store")
            for header in response.headers { evhttp_add_header(out, header.name, header.value) }
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

    /// Every header line of `request`, in order, repeats included (`evhttp_find_header`
    /// gives only the first of a name).
    private static func headerLines(_ request: OpaquePointer) -> [(name: String, value: String)] {
        guard let headers = evhttp_request_get_input_headers(request) else { return [] }
        var lines: [(name: String, value: String)] = []
        var node = headers.pointee.tqh_first
        while let header = node {
            if let key = header.pointee.key, let value = header.pointee.value {
                lines.append((String(cString: key), String(cString: value)))
            }
            node = header.pointee.next.tqe_next
        }
        return lines
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
    /// Its number, in the order connections were made.
    let serial: Int
    let client: ClientAddress
    /// Monotonic ms by which its next request must have arrived whole.
    var deadlineMs: Int64
    /// Monotonic ms of its start or its last answer.
    var lastActivityMs: Int64
    /// Requests of it waiting for their answer.
    var answering = 0
    /// A request of it proved the admin token or a console session.
    var trusted = false
    /// Requests answered since `windowStartMs` (a one-second window).
    var requestsInWindow = 0
    var windowStartMs: Int64 = 0

    init(evcon: OpaquePointer, serial: Int, client: ClientAddress, nowMs: Int64, deadlineMs: Int64) {
        self.evcon = evcon
        self.serial = serial
        self.client = client
        self.lastActivityMs = nowMs
        self.deadlineMs = deadlineMs
    }

    var candidate: AdminAdmission.Candidate {
        AdminAdmission.Candidate(serial: serial, client: client, trusted: trusted, answering: answering > 0,
                                 lastActivityMs: lastActivityMs)
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

/// Whether the admin endpoint takes a new connection, and whose place it takes: the caps per
/// client and in all, the rate of accepts, and the descriptors kept for APNs and Redis.
/// Pure but for the rate's state; the caller passes the time.
struct AdminAdmission {
    /// An open connection as the decision sees it.
    struct Candidate: Equatable {
        let serial: Int
        let client: ClientAddress
        let trusted: Bool
        /// A request of it waits for its answer: it never gives way.
        let answering: Bool
        let lastActivityMs: Int64
    }

    enum Placement: Equatable {
        /// Keep the new connection, after closing connection `closing` (nil: there is room).
        case keep(closing: Int?)
        /// Close the new connection at once: every connection of its share is answering.
        case refuse
    }

    let limits: AdminServer.Limits
    /// The process's descriptor limit (the soft `RLIMIT_NOFILE`).
    let descriptorLimit: Int
    /// Accepts that may be made now, refilled at `limits.acceptsPerSecond`.
    private var accepts: Double
    private var refilledMs: Int64?

    init(limits: AdminServer.Limits, descriptorLimit: Int) {
        self.limits = limits
        self.descriptorLimit = descriptorLimit
        accepts = Double(limits.acceptBurst)
    }

    /// Where `newcomer` goes among the `open` connections (itself not among them): its
    /// client's cap first, then the global one; each full share gives up its first idle
    /// connection (`giveWay`).
    func place(_ newcomer: ClientAddress, among open: [Candidate]) -> Placement {
        let own = open.filter { $0.client == newcomer }
        if own.count >= limits.maxConnectionsPerClient {
            return AdminAdmission.giveWay(own).map { .keep(closing: $0.serial) } ?? .refuse
        }
        if open.count >= limits.maxConnections {
            return AdminAdmission.giveWay(open).map { .keep(closing: $0.serial) } ?? .refuse
        }
        return .keep(closing: nil)
    }

    /// Whether some connection of `open` could give way to a new one.
    func canMakeRoom(among open: [Candidate]) -> Bool { AdminAdmission.giveWay(open) != nil }

    /// The connection that gives way first: idle, never trusted before trusted, least recent
    /// activity first; nil when all are answering.
    static func giveWay(_ connections: [Candidate]) -> Candidate? {
        connections.filter { !$0.answering }.min { ($0.trusted ? 1 : 0, $0.lastActivityMs, $0.serial) < ($1.trusted ? 1 : 0, $1.lastActivityMs, $1.serial) }
    }

    /// Counts one accept at `nowMs`: nil while the rate allows more, else the milliseconds
    /// until the next may be made (accepting pauses that long).
    mutating func takeAccept(nowMs: Int64) -> Int64? {
        let perMs = Double(limits.acceptsPerSecond) / 1000
        if let refilledMs { accepts = min(Double(limits.acceptBurst), accepts + Double(nowMs - refilledMs) * perMs) }
        refilledMs = nowMs
        accepts -= 1
        return accepts >= 1 ? nil : Int64(((1 - accepts) / perMs).rounded(.up))
    }

    /// True when a new connection's descriptor is within the reserve: the kernel gives the
    /// lowest free number, so every descriptor below it is in use and fewer than the reserve
    /// are left.
    func isWithinReserve(descriptor: Int32) -> Bool {
        Int(descriptor) >= descriptorLimit - limits.reservedDescriptors
    }
}

extension AdminServer.Limits: Equatable {}
