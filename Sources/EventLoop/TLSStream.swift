import CLibEvent
import COpenSSL
import CMacros
import Glibc

/// What a `TLSStream` reports to the protocol on top of it (HTTP/2 client or server).
/// All calls happen on the loop thread.
public protocol TLSStreamDelegate: AnyObject {
    /// The TCP connection is up and the TLS handshake finished.
    func tlsStreamDidConnect(_ stream: TLSStream)
    /// Decrypted bytes arrived. The bytes are valid only during the call.
    func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer)
    /// The output buffer drained below its low-water mark: a good time to produce more.
    func tlsStreamDidDrainOutput(_ stream: TLSStream)
    /// The connection is gone (peer close, error, or handshake failure). `reason` is nil
    /// for an orderly close by the peer. No callback follows.
    func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?)
}

/// A TLS byte stream on the loop: a libevent `bufferevent_openssl` with a delegate.
///
/// Why a wrapper: libevent's callbacks are C function pointers; this type turns them into
/// delegate calls, applies the OpenSSL 3 EOF quirk and the close_notify that
/// `bufferevent_free` does not send (reference/c-libraries.md), and lets a producer fill
/// one reserved region of the output buffer so that many small frames become one TLS record.
public final class TLSStream {
    /// Receives this stream's events. Not retained: the delegate owns the stream and must
    /// `close()` it before going away (a weak reference cost a side-table lookup per read).
    public unowned(unsafe) var delegate: TLSStreamDelegate
    private var bev: OpaquePointer?
    private var didConnect = false

    private init(bev: OpaquePointer, delegate: TLSStreamDelegate) {
        self.bev = bev
        self.delegate = delegate
    }

    /// Starts connecting to `host:port` (DNS through the loop's evdns), verifying the server's
    /// certificate for `host`. The delegate hears `didConnect` or `didClose`.
    public static func connect(loop: EventLoop, context: TLSContext, host: String, port: Int,
                               delegate: TLSStreamDelegate) throws(TLSError) -> TLSStream {
        guard let ssl = SSL_new(context.ctx) else { throw TLSError("SSL_new: \(TLSError.drainOpenSSL())") }
        if isIPAddress(host) {
            X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host)
        } else {
            _ = pushgw_ssl_set_sni(ssl, host)
            SSL_set1_host(ssl, host)
        }
        guard let bev = bufferevent_openssl_socket_new(loop.base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            SSL_free(ssl)
            throw TLSError("bufferevent_openssl_socket_new failed")
        }
        let stream = TLSStream(bev: bev, delegate: delegate)
        stream.install()
        if bufferevent_socket_connect_hostname(bev, loop.dns, AF_UNSPEC, host, Int32(port)) != 0 {
            stream.close()
            throw TLSError("cannot start connecting to \(host):\(port)")
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
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                       Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)) else {
            SSL_free(ssl)
            Glibc.close(fd)
            throw TLSError("bufferevent_openssl_socket_new failed")
        }
        let stream = TLSStream(bev: bev, delegate: delegate)
        stream.install()
        stream.setNoDelay()
        return stream
    }

    /// Disables Nagle: HTTP/2 writes small frames and waits for answers, and Nagle's wait for
    /// the peer's delayed ACK would add ~40 ms to a request written alone.
    private func setNoDelay() {
        guard let bev else { return }
        var one: Int32 = 1
        setsockopt(bufferevent_getfd(bev), Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    private func install() {
        guard let bev else { return }
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1)
        // libevent reads and writes 16 KiB per callback by default: one HTTP/2 burst of
        // answers then takes several trips around the loop. Larger slices, fewer wake-ups.
        bufferevent_set_max_single_read(bev, 128 * 1024)
        bufferevent_set_max_single_write(bev, 128 * 1024)
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setcb(bev, { _, arg in
            Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue().readable()
        }, { _, arg in
            let stream = Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue()
            stream.delegate.tlsStreamDidDrainOutput(stream)
        }, { _, what, arg in
            Unmanaged<TLSStream>.fromOpaque(arg!).takeUnretainedValue().event(what)
        }, ctx)
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
    }

    /// True until `close()` or the peer's close.
    public var isOpen: Bool { bev != nil }

    /// The ALPN protocol the server picked (`"h2"`), or nil when none was negotiated.
    public var negotiatedALPN: String? {
        guard let bev, let ssl = bufferevent_openssl_get_ssl(bev) else { return nil }
        var data: UnsafePointer<UInt8>?
        var len: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &len)
        guard let data, len > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(len)), as: UTF8.self)
    }

    /// A field of the verified peer certificate's subject (for example `NID_userId` or
    /// `NID_commonName`), or nil when the peer sent no certificate.
    public func peerCertificateSubject(nid: Int32) -> String? {
        guard let bev, let ssl = bufferevent_openssl_get_ssl(bev),
              let cert = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(cert) }
        guard SSL_get_verify_result(ssl) == X509_V_OK, let name = X509_get_subject_name(cert) else { return nil }
        var buf = [CChar](repeating: 0, count: 256)
        let n = X509_NAME_get_text_by_NID(name, nid, &buf, Int32(buf.count))
        return n > 0 ? stringFromCBuffer(buf) : nil
    }

    /// Bytes written but not yet handed to the kernel.
    public var pendingOutputBytes: Int {
        guard let bev else { return 0 }
        return evbuffer_get_length(bufferevent_get_output(bev))
    }

    /// Appends a copy of `bytes` to the output.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard let bev, bytes.count > 0 else { return }
        evbuffer_add(bufferevent_get_output(bev), bytes.baseAddress, bytes.count)
    }

    /// Reserves `capacity` bytes at the end of the output, lets `fill` write into them and
    /// commits what it reports. Filling one region with many frames yields one TLS record
    /// instead of one per frame (bufferevent_openssl writes one record per buffer chain).
    public func withReservedOutput(capacity: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Int) {
        guard let bev else { return }
        let out = bufferevent_get_output(bev)
        var vec = iovec()
        guard evbuffer_reserve_space(out, capacity, &vec, 1) >= 1, let base = vec.iov_base else { return }
        let used = fill(UnsafeMutableRawBufferPointer(start: base, count: min(vec.iov_len, capacity)))
        vec.iov_len = used
        evbuffer_commit_space(out, &vec, used > 0 ? 1 : 0)
    }

    /// Sends close_notify and frees the connection. No delegate call follows.
    public func close() {
        guard let bev else { return }
        self.bev = nil
        if didConnect, let ssl = bufferevent_openssl_get_ssl(bev) {
            SSL_set_quiet_shutdown(ssl, 0)
            SSL_shutdown(ssl)
        }
        bufferevent_setcb(bev, nil, nil, nil, nil)
        bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        bufferevent_free(bev)
    }

    private func readable() {
        guard let bev else { return }
        let input = bufferevent_get_input(bev)
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 8) { vecs in
            while self.bev != nil {
                let total = evbuffer_get_length(input)
                if total == 0 { break }
                let n = Int(evbuffer_peek(input, -1, nil, vecs.baseAddress, 8))
                var consumed = 0
                for i in 0..<min(n, 8) {
                    let v = vecs[i]
                    delegate.tlsStream(self, didRead: UnsafeRawBufferPointer(start: v.iov_base, count: v.iov_len))
                    consumed += v.iov_len
                    if self.bev == nil { return }
                }
                evbuffer_drain(input, consumed)
            }
        }
    }

    private func event(_ what: Int16) {
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            didConnect = true
            setNoDelay()
            delegate.tlsStreamDidConnect(self)
            return
        }
        guard let bev else { return }
        var reason: String?
        if what & Int16(BEV_EVENT_ERROR) != 0 {
            var parts: [String] = []
            let sslErr = bufferevent_get_openssl_error(bev)
            if sslErr != 0 {
                var buf = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(sslErr, &buf, buf.count)
                parts.append(stringFromCBuffer(buf))
            }
            let err = errno
            if err != 0 { parts.append(String(cString: strerror(err))) }
            let dnsErr = bufferevent_socket_get_dns_error(bev)
            if dnsErr != 0 { parts.append("DNS: \(String(cString: evutil_gai_strerror(dnsErr)))") }
            reason = parts.isEmpty ? "connection error" : parts.joined(separator: "; ")
        } else if what & Int16(BEV_EVENT_EOF) != 0 {
            reason = didConnect ? nil : "closed during the TLS handshake"
        } else {
            return
        }
        // Deliver what is still buffered before reporting the close.
        readable()
        guard self.bev != nil else { return }
        close()
        delegate.tlsStream(self, didCloseWithReason: reason)
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
