import XCTest
import TestSupport
@testable import EventLoop

/// TLSStream on its own: one loop, a listener, a server stream and a client stream in this
/// process. Covers what the APNs tests do not reach: writes that would block, a host name
/// resolved through evdns, and what each side hears when the other closes.
final class TLSStreamTests: XCTestCase {
    /// Records what a stream reports; optionally echoes nothing and just counts.
    final class Recorder: TLSStreamDelegate {
        var connected = false
        var received = 0
        var checksum: UInt64 = 0
        var drains = 0
        var closed = false
        var closeReason: String?
        var onConnect: (TLSStream) -> Void = { _ in }
        var onDrain: (TLSStream) -> Void = { _ in }

        func tlsStreamDidConnect(_ stream: TLSStream) {
            connected = true
            onConnect(stream)
        }
        func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer) {
            for b in bytes { checksum = checksum &* 31 &+ UInt64(b) }
            received += bytes.count
        }
        func tlsStreamDidDrainOutput(_ stream: TLSStream) {
            drains += 1
            onDrain(stream)
        }
        func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?) {
            closed = true
            closeReason = reason
        }
    }

    private var pki: TestPKI!

    override func setUpWithError() throws {
        pki = try TestPKI.shared()
    }

    /// A listener whose accepted sockets become server streams reporting to `server`; its
    /// certificate is the PKI's server certificate unless told otherwise.
    private func listen(_ loop: EventLoop, _ server: Recorder, certificate: (cert: String, key: String)? = nil,
                        keep: @escaping (TLSStream) -> Void) throws -> TCPListener {
        let context = try TLSContext.server(certFile: certificate?.cert ?? pki.serverCert, keyFile: certificate?.key ?? pki.serverKey)
        return try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { fd in
            if let stream = try? TLSStream.accept(loop: loop, context: context, fd: fd, delegate: server) { keep(stream) }
        }
    }

    func testBulkTransferThroughBlockedWritesThenOrderlyClose() throws {
        let loop = EventLoop()
        let server = Recorder()
        var serverStream: TLSStream?
        let listener = try listen(loop, server) { serverStream = $0 }
        let client = Recorder()
        let context = try TLSContext.client(caFile: pki.caCert)

        // 24 MiB in 64 KiB pieces, all queued at once: far more than the socket buffers hold,
        // so writes block, wait for EV_WRITE and resume.
        let piece = (0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }
        let pieces = 384
        var expected: UInt64 = 0
        for _ in 0..<pieces { for b in piece { expected = expected &* 31 &+ UInt64(b) } }
        client.onConnect = { stream in
            piece.withUnsafeBytes { bytes in
                for _ in 0..<pieces { stream.write(bytes) }
            }
        }
        let stream = try TLSStream.connect(loop: loop, context: context, host: "127.0.0.1", port: listener.port,
                                           delegate: client)
        loop.run(waitingFor: "24 MiB at the server, or a close", timeoutMs: 60_000) {
            server.received == pieces * piece.count || server.closed || client.closed
        }
        XCTAssertTrue(client.connected)
        XCTAssertEqual(stream.negotiatedALPN, "h2")
        XCTAssertEqual(server.received, pieces * piece.count, "every byte arrives")
        XCTAssertEqual(server.checksum, expected, "in order and intact")
        XCTAssertEqual(stream.pendingOutputBytes, 0)
        XCTAssertGreaterThan(client.drains, 0, "the writer hears that its output drained")

        // The client closes: the server hears an orderly close (close_notify), reason nil.
        stream.close()
        XCTAssertFalse(stream.isOpen)
        loop.run(waitingFor: "the server to hear the client's close") { server.closed }
        XCTAssertNil(server.closeReason)
        XCTAssertFalse(client.closed, "closing a stream oneself brings no callback")

        serverStream?.close()
        listener.close()
        loop.close()
    }

    func testOutputQueuedBeforeCloseIsDeliveredBeforeCloseNotify() throws {
        let loop = EventLoop()
        let server = Recorder()
        var serverStream: TLSStream?
        let listener = try listen(loop, server) { serverStream = $0 }
        let client = Recorder()
        let context = try TLSContext.client(caFile: pki.caCert)
        var stream: TLSStream!
        let message = Array("a last word before the close".utf8)
        client.onConnect = { s in
            // Written and closed within one callback: the bytes must still go out first.
            message.withUnsafeBytes { s.write($0) }
            s.close()
        }
        stream = try TLSStream.connect(loop: loop, context: context, host: "127.0.0.1", port: listener.port,
                                       delegate: client)
        loop.run(waitingFor: "the server to hear the close after the last word") { server.closed }
        XCTAssertEqual(server.received, message.count)
        XCTAssertNil(server.closeReason, "close_notify after the data")
        XCTAssertFalse(stream.isOpen)
        serverStream?.close()
        listener.close()
        loop.close()
    }

    func testHostNameIsResolvedAndVerified() throws {
        let loop = EventLoop()
        let server = Recorder()
        var serverStream: TLSStream?
        let listener = try listen(loop, server) { serverStream = $0 }
        let client = Recorder()
        let context = try TLSContext.client(caFile: pki.caCert)
        // "localhost" goes through evdns (which reads /etc/hosts) and is checked against the
        // certificate's DNS name.
        let stream = try TLSStream.connect(loop: loop, context: context, host: "localhost", port: listener.port,
                                           delegate: client)
        loop.run(waitingFor: "the handshake with localhost to end") { client.connected || client.closed }
        XCTAssertTrue(client.connected, "localhost resolved and verified: \(client.closeReason ?? "")")
        stream.close()
        serverStream?.close()
        listener.close()
        loop.close()
    }

    func testACertificateForAnotherNameIsRefusedAndTheReasonSaysSo() throws {
        let loop = EventLoop()
        let server = Recorder()
        var serverStreams: [TLSStream] = []
        // Signed by the CA the client trusts, for elsewhere.example only: only the name is wrong.
        let listener = try listen(loop, server, certificate: (pki.otherHostCert, pki.otherHostKey)) { serverStreams.append($0) }
        let context = try TLSContext.client(caFile: pki.caCert)
        for (host, why) in [("127.0.0.1", "IP address mismatch"), ("localhost", "hostname mismatch")] {
            let client = Recorder()
            let stream = try TLSStream.connect(loop: loop, context: context, host: host, port: listener.port, delegate: client)
            loop.run(waitingFor: "the handshake with \(host) to end") { client.connected || client.closed }
            XCTAssertFalse(client.connected, "a certificate for elsewhere.example is refused when connecting to \(host)")
            XCTAssertFalse(stream.isOpen)
            XCTAssertTrue(client.closeReason?.contains(why) ?? false, "the reason names the mismatch: \(client.closeReason ?? "nil")")
            stream.close()
        }
        serverStreams.forEach { $0.close() }
        listener.close()
        loop.close()
    }

    func testFailuresAreReportedWithAReason() throws {
        let loop = EventLoop()
        let context = try TLSContext.client(caFile: pki.caCert)

        // Nothing listens on the port: refused, reported on a later loop iteration.
        let refused = Recorder()
        let probe = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { Glibc.close($0) }
        let deadPort = probe.port
        probe.close()
        let a = try TLSStream.connect(loop: loop, context: context, host: "127.0.0.1", port: deadPort, delegate: refused)
        XCTAssertFalse(refused.closed, "no callback from inside connect")
        loop.run(waitingFor: "the refused connect to be reported") { refused.closed }
        XCTAssertFalse(refused.connected)
        XCTAssertTrue(refused.closeReason?.contains("refused") ?? false, refused.closeReason ?? "nil")
        XCTAssertFalse(a.isOpen)

        // A server certificate the client's CA did not sign: the handshake fails.
        let server = Recorder()
        var serverStream: TLSStream?
        let listener = try listen(loop, server) { serverStream = $0 }
        let untrusting = try TLSContext.client(caFile: pki.clientCert)
        let rejected = Recorder()
        // Kept: libevent holds only an unretained pointer to a stream (its owner must keep it).
        let b = try TLSStream.connect(loop: loop, context: untrusting, host: "127.0.0.1", port: listener.port,
                                      delegate: rejected)
        loop.run(waitingFor: "the untrusted handshake to fail") { rejected.closed }
        XCTAssertFalse(b.isOpen)
        XCTAssertFalse(rejected.connected)
        XCTAssertTrue(rejected.closeReason?.contains("certificate verify failed") ?? false, rejected.closeReason ?? "nil")
        serverStream?.close()
        listener.close()
        loop.close()
    }
}
