import CLibEvent
import COpenSSL
import CMacros
import Glibc

/// What a `TLSStream` reports to the protocol on top of it (HTTP/2 client or server, a Redis
/// connection). All calls happen on the loop thread.
public protocol TLSStreamDelegate: AnyObject {
    /// The connection is up (and, over TLS, the handshake finished).
    func tlsStreamDidConnect(_ stream: TLSStream)
    /// Bytes arrived (decrypted, over TLS). The bytes are valid only during the call.
    func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer)
    /// The output was handed to the kernel completely: a good time to produce more.
    func tlsStreamDidDrainOutput(_ stream: TLSStream)
    /// The connection is gone (peer close, error, or handshake failure). `reason` is nil
    /// for an orderly close by the peer. No callback follows.
    func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?)
}

/// A byte stream on the loop: OpenSSL on a non-blocking socket, driven by plain libevent
/// events, with a delegate. The same stream carries plain bytes over TCP or a unix socket
/// (`connectPlain`, `connectUnix`: Redis without TLS), so a protocol on top has one I/O path
/// whatever the transport; only the read and write calls differ (`read`/`write` instead of
/// `SSL_read`/`SSL_write`).
///
/// Why not `bufferevent_openssl` (which this replaced): it writes output only when a later
/// loop iteration reports the socket writable, so every answer → request round trip of an
/// HTTP/2 client cost an extra `epoll_wait` plus an `epoll_ctl` to arm and disarm EV_WRITE.
/// Measured with 1 connection × 100 streams against nghttpd (200k requests): 9.0k epoll_wait,
/// 16.6k epoll_ctl, 16.6k read and 12.7k write for pushgw against h2load's 4.0k / 4.0k / 14.0k
/// / 8.0k, and 0.74× h2load's requests/s. This type writes the output produced while the
/// delegate handles a read batch in the same callback (every `midBatchWrite` bytes, and the
/// rest right after the batch), arms EV_WRITE only while a write would block, and lets
/// OpenSSL cut the contiguous output into records instead of one record per buffer chain.
/// Same benchmark afterwards: 2.2k epoll_wait, 5 epoll_ctl, 4.6k read, 13.8k write.
///
/// Output produced outside a callback of this stream (a `send` from another connection's read,
/// a timer) is written on the same loop iteration through an activated event, so writes made
/// one after another share records and syscalls.
///
/// Its life (resolving, connecting, handshaking, open, a failure waiting to be reported,
/// closed) is `TLSStream.Life` (`TLSStream+Life.swift`), performed by `run(_:)`.
public final class TLSStream {
    /// Receives this stream's events. Not retained: the delegate owns the stream and must
    /// `close()` it before going away (a weak reference cost a side-table lookup per read).
    public unowned(unsafe) var delegate: TLSStreamDelegate

    /// Resolving, connecting, handshaking, open, failing, closed (`Life`): every change
    /// through `run(_:)`.
    private var life: Life
    private let base: OpaquePointer
    /// The TLS connection; nil for a plain stream, and after `close()`.
    private var ssl: OpaquePointer?
    /// False for a plain stream (TCP or unix socket without TLS).
    private let isTLS: Bool
    /// The name the server's certificate is verified against, for failure messages.
    private var verifiedName: String?
    private var fd: Int32 = -1
    /// EV_READ | EV_PERSIST on the socket, from TCP connect (or accept) to close.
    private var readEvent: OpaquePointer?
    /// One-shot EV_WRITE, armed only while the TCP connect, the handshake or a write waits.
    private var writeEvent: OpaquePointer?
    /// No fd: activated to write output produced outside this stream's callbacks, and to
    /// report a failure found while `connect` was still running.
    private var flushEvent: OpaquePointer?
    private var resolve: PendingResolve?
    private var output = OutputBuffer()
    private let input: UnsafeMutableRawPointer
    /// True while one of this stream's libevent callbacks runs: failures are reported at once.
    private var inEvent = false
    /// True while the delegate is called from a callback that writes the output afterwards.
    private var batching = false
    private var flushScheduled = false
    /// True while a write would block and waits for EV_WRITE.
    private var writeBlocked = false
    /// SSL_read asked to write first (TLS 1.2 renegotiation): read again once writable.
    private var readWantsWrite = false

    /// Bytes handed to the delegate per `didRead` at most: one TLS record's plaintext.
    private static let inputCapacity = 16 * 1024
    /// Bytes read per readable event at most, so one busy peer cannot hold the loop: what a
    /// stream read is worked (an HTTP/2 connection's answers, a Redis reply) before the loop
    /// polls the others. One record's worth: with 1 MB, a flooded app's APNs connection
    /// handed the router ~1,000 answers to work in one go while a quiet app's answer waited
    /// on the next connection (docs/architecture.md, "Scheduling").
    private static let maxReadPerEvent = inputCapacity

    private init(base: OpaquePointer, ssl: OpaquePointer?, phase: Life.State, delegate: TLSStreamDelegate) {
        self.base = base
        self.ssl = ssl
        self.isTLS = ssl != nil
        self.life = Life(phase)
        self.delegate = delegate
        input = UnsafeMutableRawPointer.allocate(byteCount: Self.inputCapacity, alignment: 16)
        if let ssl {
            // Partial writes: SSL_write returns after each record, so what it took leaves the
            // buffer at once. Moving buffer: a retried write may start at a compacted address.
            _ = pushgw_ssl_set_mode(ssl, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))
            // Read ahead: one read() takes what the socket holds instead of a record header and
            // then its body. 1×100 against nghttpd: 28.4k read calls per 200k requests → 4.8k.
            SSL_set_read_ahead(ssl, 1)
        }
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        flushEvent = event_new(base, -1, 0, { _, _, arg in
            let stream = Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue()
            withExtendedLifetime(stream) { stream.event { stream.flushNow() } }
        }, ctx)
    }

    deinit {
        input.deallocate()
        output.release()
    }

    /// Starts connecting to `host:port` (DNS through the loop's evdns), verifying the server's
    /// certificate for `serverName` (default: `host`), which is also sent as SNI unless it is an
    /// IP address. The delegate hears `didConnect` or `didClose`.
    public static func connect(loop: EventLoop, context: TLSContext, host: String, port: Int, serverName: String? = nil,
                               delegate: TLSStreamDelegate) throws(TLSError) -> TLSStream {
        guard let ssl = SSL_new(context.ctx) else { throw TLSError("SSL_new: \(TLSError.drainOpenSSL())") }
        let name = serverName ?? host
        if isIPAddress(name) {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
        } else {
            _ = pushgw_ssl_set_sni(ssl, name)
            SSL_set1_host(ssl, name)
        }
        SSL_set_connect_state(ssl)
        let stream = TLSStream(base: loop.base, ssl: ssl, phase: .resolving, delegate: delegate)
        stream.verifiedName = name
        stream.startResolving(dns: loop.dns, host: host, port: port)
        return stream
    }

    /// Starts connecting to `host:port` without TLS (DNS through the loop's evdns). The
    /// delegate hears `didConnect` once the TCP connection is up, or `didClose`.
    public static func connectPlain(loop: EventLoop, host: String, port: Int, delegate: TLSStreamDelegate) -> TLSStream {
        let stream = TLSStream(base: loop.base, ssl: nil, phase: .resolving, delegate: delegate)
        stream.startResolving(dns: loop.dns, host: host, port: port)
        return stream
    }

    /// Starts connecting to the unix socket at `path`, without TLS. The delegate hears
    /// `didConnect` or `didClose` (never from inside this call).
    public static func connectUnix(loop: EventLoop, path: String, delegate: TLSStreamDelegate) -> TLSStream {
        let stream = TLSStream(base: loop.base, ssl: nil, phase: .connecting, delegate: delegate)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            stream.fail("unix socket path longer than \(MemoryLayout.size(ofValue: address.sun_path) - 1) bytes")
            return stream
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                stream.openSocket(family: AF_UNIX, address: sa, length: socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return stream
    }

    /// Wraps a socket accepted by a `TCPListener` and starts the server side of the handshake.
    public static func accept(loop: EventLoop, context: TLSContext, fd: Int32,
                              delegate: TLSStreamDelegate) throws(TLSError) -> TLSStream {
        guard let ssl = SSL_new(context.ctx) else {
            Glibc.close(fd)
            throw TLSError("SSL_new: \(TLSError.drainOpenSSL())")
        }
        guard evutil_make_socket_nonblocking(fd) == 0, SSL_set_fd(ssl, fd) == 1 else {
            SSL_free(ssl)
            Glibc.close(fd)
            throw TLSError("cannot use the accepted socket: \(TLSError.drainOpenSSL())")
        }
        SSL_set_accept_state(ssl)
        let stream = TLSStream(base: loop.base, ssl: ssl, phase: .handshaking, delegate: delegate)
        stream.attachSocket(fd)
        stream.setNoDelay()
        event_add(stream.readEvent, nil)
        return stream
    }

    /// Disables Nagle: HTTP/2 writes small frames and waits for answers, and Nagle's wait for
    /// the peer's delayed ACK would add ~40 ms to a request written alone.
    private func setNoDelay() {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Takes ownership of `fd` and creates its read and write events (not yet added).
    private func attachSocket(_ fd: Int32) {
        self.fd = fd
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        readEvent = event_new(base, fd, Int16(EV_READ | EV_PERSIST), { _, _, arg in
            let stream = Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue()
            withExtendedLifetime(stream) { stream.event { stream.run(stream.life.onReadable()) } }
        }, ctx)
        writeEvent = event_new(base, fd, Int16(EV_WRITE), { _, _, arg in
            let stream = Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue()
            withExtendedLifetime(stream) { stream.event { stream.run(stream.life.onWritable()) } }
        }, ctx)
    }

    /// Runs `body` as one of this stream's event callbacks.
    private func event(_ body: () -> Void) {
        inEvent = true
        body()
        inEvent = false
    }

    // MARK: Connecting

    /// An evdns lookup in flight. evdns keeps a retained reference until its callback, which
    /// always comes (with EVUTIL_EAI_CANCEL after `close`), so the stream may go away first.
    private final class PendingResolve {
        var stream: TLSStream?
        var request: OpaquePointer?
        init(_ stream: TLSStream) { self.stream = stream }
    }

    private func startResolving(dns: OpaquePointer, host: String, port: Int) {
        let pending = PendingResolve(self)
        resolve = pending
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        // A literal address or a cached answer comes back inside this call (request nil).
        let request = evdns_getaddrinfo(dns, host, String(port), &hints, { result, ai, arg in
            let pending = Unmanaged<PendingResolve>.fromOpaque(arg!).takeRetainedValue()
            pending.request = nil
            guard let stream = pending.stream else {
                if let ai { evutil_freeaddrinfo(ai) }
                return
            }
            pending.stream = nil
            stream.resolve = nil
            stream.resolved(result, ai)
        }, Unmanaged.passRetained(pending).toOpaque())
        if pending.stream != nil { pending.request = request }
    }

    /// Opens the socket to the first address found (as `bufferevent_socket_connect_hostname` did).
    private func resolved(_ result: Int32, _ ai: UnsafeMutablePointer<addrinfo>?) {
        defer { if let ai { evutil_freeaddrinfo(ai) } }
        guard result == 0, let ai, let addr = ai.pointee.ai_addr else {
            let code = result != 0 ? result : EVUTIL_EAI_FAIL
            return run(life.onResolved(failure: "DNS: \(String(cString: evutil_gai_strerror(code)))", inEvent: inEvent))
        }
        let action = life.onResolved(failure: nil, inEvent: inEvent)
        guard action == .openSocket else { return run(action) }
        openSocket(family: ai.pointee.ai_family, address: addr, length: ai.pointee.ai_addrlen)
    }

    /// Creates a non-blocking socket and starts connecting it to `address`.
    private func openSocket(family: Int32, address: UnsafePointer<sockaddr>, length: socklen_t) {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return fail(String(cString: strerror(errno))) }
        attachSocket(fd)
        if family != AF_UNIX { setNoDelay() }
        // Even a connect that succeeds at once (a unix socket) is reported from the write event,
        // so the delegate never hears from inside `connect…` (this may run inside it).
        if Glibc.connect(fd, address, length) == 0 || errno == EINPROGRESS || (family == AF_UNIX && errno == EAGAIN) {
            run(life.onConnectStarted())
            event_add(writeEvent, nil)
        } else {
            fail(String(cString: strerror(errno)))
        }
    }

    /// The socket's connect answered (EV_WRITE while connecting).
    private func checkConnect() {
        var soError: Int32 = 0
        var len = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
        if soError != 0 { return fail(String(cString: strerror(soError))) }
        event_add(readEvent, nil)
        run(life.onSocketConnected(isTLS: isTLS))
    }

    /// Tells the delegate the stream is up; it may write (and close) from inside the call.
    private func reportConnected() {
        batching = true
        delegate.tlsStreamDidConnect(self)
        batching = false
        if isTLS {
            // Application data may have come with the handshake's last flight: OpenSSL holds
            // it, and epoll will not report it again.
            run(life.onReadable())
        } else {
            writeOutput()
        }
    }

    /// One step of the TLS handshake; on success the delegate hears `didConnect`.
    private func handshake() {
        guard let ssl else { return }
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 { return run(life.onHandshakeDone()) }
        let code = SSL_get_error(ssl, rc)
        let err = errno
        switch code {
        case SSL_ERROR_WANT_READ: break
        case SSL_ERROR_WANT_WRITE: event_add(writeEvent, nil)
        default:
            let verdict = SSL_get_verify_result(ssl)
            if verdict != X509_V_OK {
                ERR_clear_error()
                return fail("TLS handshake: certificate verify failed: \(certificateProblem(verdict))")
            }
            fail("TLS handshake: " + (Self.reason(code, errno: err) ?? "closed by the server"))
        }
    }

    /// OpenSSL's text for a failed verification, with the cause spelled out where OpenSSL's
    /// words do not say it: an untrusted issuer, another host's certificate ("certificate has
    /// expired" says its own).
    private func certificateProblem(_ verdict: Int) -> String {
        let text = String(cString: X509_verify_cert_error_string(verdict))
        switch Int32(verdict) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
             X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
            return "\(text) (the server's certificate is not signed by a trusted CA)"
        case X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH:
            return "\(text) (the server's certificate is not for \(verifiedName ?? "this host"))"
        default:
            return text
        }
    }

    // MARK: Events

    /// Reads what the socket holds (`.read`: open) and hands it to the delegate in batches.
    private func readable() {
        batching = true
        if isTLS { ERR_clear_error() }
        var filled = 0
        var total = 0
        var ended = false
        var endReason: String?
        reading: while true {
            switch readSome(into: input + filled, count: Self.inputCapacity - filled) {
            case let .bytes(n, mayHaveMore):
                filled += n
                if filled == Self.inputCapacity {
                    delegate.tlsStream(self, didRead: UnsafeRawBufferPointer(start: input, count: filled))
                    guard life.isOpen else { return }
                    filled = 0
                    total += Self.inputCapacity
                    if total >= Self.maxReadPerEvent {
                        // What is left in the socket epoll reports again (the read event is
                        // level-triggered), after the loop polled the others. Bytes OpenSSL
                        // already read it cannot see: only then come back at once.
                        if let ssl, SSL_has_pending(ssl) == 1 { event_active(readEvent, Int32(EV_READ), 0) }
                        break reading
                    }
                } else if !mayHaveMore {
                    break reading
                }
            case .drained:
                break reading
            case let .ended(reason):
                ended = true
                endReason = reason
                break reading
            }
        }
        if filled > 0 {
            delegate.tlsStream(self, didRead: UnsafeRawBufferPointer(start: input, count: filled))
            guard life.isOpen else { return }
        }
        batching = false
        if ended { return fail(endReason) }
        writeOutput()
    }

    /// What one read call gave.
    private enum ReadResult {
        /// `count` bytes; `mayHaveMore` is false when a plain socket gave less than asked (it
        /// is empty then: no need for a read that would only say so).
        case bytes(Int, mayHaveMore: Bool)
        /// Nothing more for now (or TLS wants to write first: EV_WRITE is armed).
        case drained
        /// The peer closed (reason nil: orderly) or the connection failed.
        case ended(String?)
    }

    /// One `SSL_read`, or `read` for a plain stream, into `buffer`.
    @inline(__always)
    private func readSome(into buffer: UnsafeMutableRawPointer, count: Int) -> ReadResult {
        if let ssl {
            let n = SSL_read(ssl, buffer, Int32(count))
            if n > 0 { return .bytes(Int(n), mayHaveMore: true) }
            let code = SSL_get_error(ssl, n)
            let err = errno
            switch code {
            case SSL_ERROR_WANT_READ:
                return .drained
            case SSL_ERROR_WANT_WRITE:
                readWantsWrite = true
                event_add(writeEvent, nil)
                return .drained
            case SSL_ERROR_ZERO_RETURN:
                return .ended(nil)  // close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF)
            default:
                return .ended(Self.reason(code, errno: err) ?? "connection error")
            }
        }
        while true {
            let n = Glibc.read(fd, buffer, count)
            if n > 0 { return .bytes(n, mayHaveMore: n == count) }
            if n == 0 { return .ended(nil) }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .drained }
            return .ended(String(cString: strerror(errno)))
        }
    }

    /// Writes up to `count` bytes of the output with `write` (plain) or `SSL_write`: how many
    /// were taken, 0 when the socket is full (EV_WRITE is armed), nil after a failure (reported
    /// when `report`, else left for the next write to meet again).
    private func writeSome(_ count: Int, report: Bool) -> Int? {
        if let ssl {
            ERR_clear_error()
            let n = SSL_write(ssl, output.bytes, Int32(clamping: count))
            if n > 0 { return Int(n) }
            let code = SSL_get_error(ssl, n)
            let err = errno
            switch code {
            case SSL_ERROR_WANT_WRITE:
                writeBlocked = true
                event_add(writeEvent, nil)
                return 0
            case SSL_ERROR_WANT_READ:
                return nil  // renegotiation: the next readable event writes again
            default:
                if report { fail(Self.reason(code, errno: err) ?? "connection error") } else { ERR_clear_error() }
                return nil
            }
        }
        while true {
            let n = Glibc.write(fd, output.bytes, count)
            if n > 0 { return n }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                writeBlocked = true
                event_add(writeEvent, nil)
                return 0
            }
            if report { fail(n < 0 ? String(cString: strerror(errno)) : "connection closed") }
            return nil
        }
    }

    /// The socket is writable again (`.resumeWriting`: open).
    private func resumeWriting() {
        writeBlocked = false
        if readWantsWrite {
            readWantsWrite = false
            readable()
        } else {
            writeOutput()
        }
    }

    private func flushNow() {
        flushScheduled = false
        run(life.onFlush())
    }

    /// Writes the output now unless a write is already waiting for EV_WRITE. After the output
    /// drained, the delegate may add more (it hears `didDrainOutput`), which is written too.
    private func writeOutput() {
        guard life.isOpen, !writeBlocked else { return }
        var wrote = false
        while true {
            while output.count > 0 {
                guard let n = writeSome(output.count, report: true), n > 0 else { return }
                output.consume(n)
                wrote = true
            }
            guard wrote else { return }
            wrote = false
            batching = true
            delegate.tlsStreamDidDrainOutput(self)
            batching = false
            guard life.isOpen, output.count > 0 else { return }
        }
    }

    /// Makes sure output added outside a batch is written on this loop iteration; inside a
    /// batch, writes it early once `midBatchWrite` bytes are waiting.
    private func scheduleFlush() {
        if batching {
            if output.count >= Self.midBatchWrite { writeDuringBatch() }
            return
        }
        guard !flushScheduled, !writeBlocked, life.isOpen else { return }
        flushScheduled = true
        event_active(flushEvent, 0, 0)
    }

    /// Output that waits inside a read batch is written once it reaches this size.
    ///
    /// Why: writing only after the batch made 1×100 against nghttpd a strict ping-pong (all
    /// 100 answers read, then all 100 requests written; client and server each idle while the
    /// other works): ~168k req/s against h2load's ~212k. Writing every ~8 KiB (about 15
    /// requests) lets the server start on them while the client still completes answers:
    /// ~209k–224k in the same runs. Later, with the client's per-request work trimmed, medians
    /// of 21 alternating h2load/pushgw pairs, ratio to h2load: end of batch only 0.94, every
    /// 8 KiB 1.06 (1.00–1.08 over five such series on a shared machine), 16 KiB 1.03, 6 KiB
    /// and 12 KiB 1.07 in a series where 8 KiB gave 1.07; writing the first 12–20 KiB early
    /// and holding the rest to the end of the batch 1.04–1.06 where 8 KiB gave 1.08.
    static let midBatchWrite = 8 * 1024
    static let recordSize = 16 * 1024

    /// Writes the output now, while the delegate is still producing: the peer starts on it
    /// before the batch ends. Never calls the delegate; a failure is left for the write at the
    /// end of the batch, which meets it again.
    private func writeDuringBatch() {
        guard life.isOpen, !writeBlocked else { return }
        while output.count > 0 {
            // Errors surface again at the end-of-batch write.
            guard let n = writeSome(min(Self.recordSize, output.count), report: false), n > 0 else { return }
            output.consume(n)
        }
    }

    /// Closes and tells the delegate; from outside a callback (the DNS answer to a literal
    /// address comes inside `connect`), on this loop iteration through `flushEvent` instead.
    private func fail(_ reason: String?) {
        run(life.onFailure(reason, inEvent: inEvent))
    }

    /// Performs what the stream's `Life` returned: the one place its phase's I/O happens
    /// (`.openSocket` excepted: the caller of `onResolved` holds the address).
    private func run(_ action: Life.Action) {
        switch action {
        case .none, .openSocket:
            break
        case .checkConnect:
            checkConnect()
        case .startHandshake:
            guard let ssl, SSL_set_fd(ssl, fd) == 1 else { return fail("SSL_set_fd: \(TLSError.drainOpenSSL())") }
            handshake()
        case .handshakeStep:
            handshake()
        case .reportConnected:
            reportConnected()
        case .read:
            readable()
        case .resumeWriting:
            resumeWriting()
        case .writeOutput:
            writeOutput()
        case .scheduleFailureReport:
            event_active(flushEvent, 0, 0)
        case let .closeAndReport(reason, wasOpen):
            release(wasOpen: wasOpen)
            delegate.tlsStream(self, didCloseWithReason: reason)
        case let .release(wasOpen):
            release(wasOpen: wasOpen)
        }
    }

    /// OpenSSL's error queue, else errno, as one line; nil when neither says anything.
    private static func reason(_ code: Int32, errno err: Int32) -> String? {
        var parts: [String] = []
        let sslErr = ERR_get_error()
        if sslErr != 0 {
            var buf = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(sslErr, &buf, buf.count)
            parts.append(stringFromCBuffer(buf))
            ERR_clear_error()
        }
        if code == SSL_ERROR_SYSCALL, err != 0 { parts.append(String(cString: strerror(err))) }
        return parts.isEmpty ? nil : parts.joined(separator: "; ")
    }

    // MARK: Public API

    /// True until `close()` or the peer's close.
    public var isOpen: Bool { !life.isClosed }

    /// The ALPN protocol the server picked (`"h2"`), or nil when none was negotiated.
    public var negotiatedALPN: String? {
        guard let ssl else { return nil }
        var data: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

    /// A field of the verified peer certificate's subject (for example `NID_userId` or
    /// `NID_commonName`), or nil when the peer sent no certificate.
    public func peerCertificateSubject(nid: Int32) -> String? {
        guard let ssl, let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        guard SSL_get_verify_result(ssl) == X509_V_OK, let name = X509_get_subject_name(cert) else { return nil }
        var buf = [CChar](repeating: 0, count: 256)
        let n = X509_NAME_get_text_by_NID(name, nid, &buf, Int32(buf.count))
        return n > 0 ? stringFromCBuffer(buf) : nil
    }

    /// Bytes written but not yet handed to the kernel.
    public var pendingOutputBytes: Int { output.count }

    /// Appends a copy of `bytes` to the output.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !life.isClosed, let src = bytes.baseAddress, bytes.count > 0 else { return }
        output.reserve(bytes.count).copyMemory(from: src, byteCount: bytes.count)
        output.commit(bytes.count)
        scheduleFlush()
    }

    /// Reserves `capacity` bytes at the end of the output, lets `fill` write into them and
    /// commits what it reports. The output is one contiguous buffer that OpenSSL cuts into
    /// full records, so many small frames share a record.
    public func withReservedOutput(capacity: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) {
        guard !life.isClosed else { return }
        let region = output.reserve(capacity)
        let used = min(fill(UnsafeMutableRawBufferPointer(start: region, count: capacity)), capacity)
        guard used > 0 else { return }
        output.commit(used)
        scheduleFlush()
    }

    /// Writes what the kernel takes of the pending output, sends close_notify and frees the
    /// connection. No delegate call follows.
    public func close() {
        run(life.onClose())
    }

    /// Frees the connection; when it was open, first writes what the kernel takes of the
    /// pending output and sends close_notify.
    private func release(wasOpen: Bool) {
        if let pending = resolve {
            pending.stream = nil
            if let request = pending.request { evdns_getaddrinfo_cancel(request) }
            resolve = nil
        }
        for ev in [readEvent, writeEvent, flushEvent] { if let ev { event_free(ev) } }
        readEvent = nil
        writeEvent = nil
        flushEvent = nil
        if let ssl {
            if wasOpen {
                // Best effort and non-blocking: a GOAWAY queued just before must not be cut
                // off by the close_notify that follows it.
                while output.count > 0 {
                    let n = SSL_write(ssl, output.bytes, Int32(clamping: output.count))
                    if n <= 0 { break }
                    output.consume(Int(n))
                }
                SSL_set_quiet_shutdown(ssl, 0)
                SSL_shutdown(ssl)
                ERR_clear_error()
            }
            SSL_free(ssl)
        } else if wasOpen {
            // Best effort and non-blocking, as above.
            while output.count > 0 {
                let n = Glibc.write(fd, output.bytes, output.count)
                if n <= 0 { break }
                output.consume(n)
            }
        }
        ssl = nil
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        output.release()
    }
}

/// The pending output of a `TLSStream`: one contiguous growable buffer, so that `SSL_write`
/// of all of it yields full-size records.
struct OutputBuffer {
    private var storage: UnsafeMutableRawPointer?
    private var capacity = 0
    private var head = 0
    private var tail = 0

    var count: Int { tail - head }
    /// The first pending byte; valid only while `count > 0`.
    var bytes: UnsafeMutableRawPointer { storage! + head }

    /// Room for `n` more bytes at the end (moves or grows the storage when needed).
    mutating func reserve(_ n: Int) -> UnsafeMutableRawPointer {
        if capacity - tail < n {
            if head > 0 {
                if tail > head { memmove(storage!, storage! + head, tail - head) }
                tail -= head
                head = 0
            }
            if capacity - tail < n {
                let newCapacity = max(capacity * 2, tail + n, 64 * 1024)
                storage = realloc(storage, newCapacity)
                precondition(storage != nil, "out of memory")
                capacity = newCapacity
            }
        }
        return storage! + tail
    }

    mutating func commit(_ n: Int) { tail += n }

    mutating func consume(_ n: Int) {
        head += n
        if head == tail {
            head = 0
            tail = 0
            // After a burst, give back a buffer far above what HTTP/2 flushes normally hold.
            if capacity > 1024 * 1024 { release() }
        }
    }

    mutating func release() {
        free(storage)
        storage = nil
        capacity = 0
        head = 0
        tail = 0
    }
}

/// Whether `host` is a literal IPv4 or IPv6 address (no SNI, IP SAN verification).
func isIPAddress(_ host: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
}

/// A listening TCP socket on the loop; hands each accepted socket to `onAccept`.
public final class TCPListener {
    private var listener: OpaquePointer?
    private let onAccept: (Int32) -> Void
    /// The bound port (useful when asked for port 0).
    public private(set) var port: Int = 0

    /// Binds `host:port` (an IPv4 literal; 0 picks a free port) and starts accepting.
    public init(loop: EventLoop, host: String, port: Int, onAccept: @escaping (Int32) -> Void) throws(TLSError) {
        self.onAccept = onAccept
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else { throw TLSError("\(host) is not an IPv4 address") }
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE)
        listener = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                evconnlistener_new_bind(loop.base, { _, fd, _, _, arg in
                    Unmanaged<TCPListener>.fromOpaque(arg!).takeUnretainedValue().onAccept(fd)
                }, ctx, flags, 1024, sa, Int32(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard let listener else { throw TLSError("cannot listen on \(host):\(port): \(String(cString: strerror(errno)))") }
        var bound = sockaddr_in()
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &bound) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                _ = getsockname(evconnlistener_get_fd(listener), sa, &len)
            }
        }
        self.port = Int(UInt16(bigEndian: bound.sin_port))
    }

    /// Stops accepting and closes the socket.
    public func close() {
        if let listener { evconnlistener_free(listener) }
        listener = nil
    }
}
