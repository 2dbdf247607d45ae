import Foundation
import Glibc

/// Idle TCP connections to 127.0.0.1:`port`, held by a thread of their own and reopened as
/// soon as the server closes one, as an attacker without a token would hold them. They send
/// nothing.
public final class ConnectionFlood: @unchecked Sendable {
    private let lock = NSLock()
    private var stopping = false
    private var done = false
    private var reopened = 0

    /// Opens `count` connections (from loopback address `from`, or the system's choice) and
    /// keeps them open until `stop()`.
    public init(port: Int, count: Int, from: String? = nil) {
        Thread.detachNewThread { [self] in hold(port: port, count: count, from: from) }
    }

    /// Connections the server closed and the flood opened again, so far.
    public var reopenedCount: Int { lock.lock(); defer { lock.unlock() }; return reopened }

    /// Closes every connection and waits for the thread to end.
    public func stop() {
        lock.lock()
        stopping = true
        lock.unlock()
        while true {
            lock.lock()
            let finished = done
            lock.unlock()
            if finished { return }
            usleep(1_000)
        }
    }

    private func hold(port: Int, count: Int, from: String?) {
        var fds = (0..<count).map { _ in LoopbackHTTP.connectWithoutWaiting(port: port, from: from) ?? -1 }
        var buffer = [UInt8](repeating: 0, count: 4_096)
        while true {
            lock.lock()
            let stop = stopping
            lock.unlock()
            if stop { break }
            var polled = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            _ = poll(&polled, nfds_t(polled.count), 10)
            for i in polled.indices where polled[i].fd < 0 || polled[i].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                if polled[i].fd >= 0 {
                    let n = buffer.withUnsafeMutableBytes { recv(polled[i].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n > 0 || (n < 0 && errno == EAGAIN) { continue }  // not closed (yet)
                    close(polled[i].fd)
                }
                fds[i] = LoopbackHTTP.connectWithoutWaiting(port: port, from: from) ?? -1
                lock.lock()
                reopened += 1
                lock.unlock()
            }
        }
        for fd in fds where fd >= 0 { close(fd) }
        lock.lock()
        done = true
        lock.unlock()
    }

    /// Sends `GET path` to 127.0.0.1:`port` on a new connection and waits at most `limitMs`
    /// in all (connect, send, answer): the status and the milliseconds it took, or nil
    /// after the limit (a give-up bound, not a measurement). Blocks this thread.
    public static func probe(_ path: String, port: Int, limitMs: Int) -> (status: Int, ms: Int)? {
        let started = DispatchTime.now().uptimeNanoseconds
        func elapsedMs() -> Int { Int((DispatchTime.now().uptimeNanoseconds - started) / 1_000_000) }
        guard let fd = LoopbackHTTP.connectWithoutWaiting(port: port) else { return nil }
        defer { close(fd) }
        var writable = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&writable, 1, Int32(limitMs)) == 1 else { return nil }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4_096)
        while elapsedMs() < limitMs {
            var readable = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&readable, 1, Int32(max(1, limitMs - elapsedMs()))) == 1 else { break }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        let text = String(decoding: received, as: UTF8.self)
        guard elapsedMs() <= limitMs, text.hasPrefix("HTTP/1.1 "), let status = Int(text.dropFirst(9).prefix(3)) else { return nil }
        return (status, elapsedMs())
    }
}
