import CHiredis
import Foundation
import Glibc
import TestSupport
@testable import RedisClient

/// A hostile or misconfigured Redis node for trust tests: a TCP listener on one loopback
/// address (`127.0.0.2`, … : another host as far as pushgw can tell) that records every
/// connection and every command it gets, and answers each command with the RESP text `answer`
/// gives (`+OK`, a `-MOVED`, a slot map). Its requests are read with hiredis's reader, as
/// pushgw reads replies. Blocking sockets on threads of its own, so it answers while the test
/// drives pushgw's loop.
final class RecordingRedisNode: @unchecked Sendable {
    let host: String
    let port: Int
    private let listener: Int32
    private let lock = NSLock()
    private var accepted = 0
    private var received: [[String]] = []
    private var clients: [Int32] = []
    private var stopped = false
    private let answer: @Sendable (_ args: [String], _ node: RecordingRedisNode) -> String

    /// Binds `host` (an IPv4 loopback address) on a free port and starts answering.
    init(host: String, answer: @escaping @Sendable (_ args: [String], _ node: RecordingRedisNode) -> String) throws {
        self.host = host
        self.answer = answer
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, host, &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            throw TestSupportError("cannot listen on \(host): \(String(cString: strerror(errno)))")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Connections accepted so far (a refused node must see none).
    var connections: Int { lock.withLock { accepted } }
    /// Every command received, in order (`AUTH` included: what a refused node must never see).
    var commands: [[String]] { lock.withLock { received } }

    func stop() {
        lock.withLock {
            stopped = true
            for client in clients { shutdown(client, Int32(SHUT_RDWR)) }
        }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let keep = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                accepted += 1
                clients.append(client)
                return true
            }
            guard keep else {
                close(client)
                return
            }
            Thread.detachNewThread { [self] in serve(client) }
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        guard let reader = redisReaderCreate() else { return }
        defer { redisReaderFree(reader) }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return }
            _ = buffer.withUnsafeBytes { redisReaderFeed(reader, $0.baseAddress!.assumingMemoryBound(to: CChar.self), n) }
            while true {
                var request: UnsafeMutableRawPointer?
                guard redisReaderGetReply(reader, &request) == REDIS_OK else { return }
                guard let request else { break }
                let parsed = RedisReply(copying: request.assumingMemoryBound(to: redisReply.self))
                freeReplyObject(request)
                let args = parsed.array?.map { $0.string ?? "" } ?? []
                lock.withLock { received.append(args) }
                let reply = Array(answer(args, self).utf8)
                _ = reply.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }

    // MARK: Answers

    /// What a cluster node answers to the handshake pushgw sends (`AUTH`, `CLIENT SETNAME`,
    /// `SELECT`, `PING`, `ROLE`), or nil for any other command.
    static func handshake(_ args: [String]) -> String? {
        switch args.first?.uppercased() {
        case "AUTH", "CLIENT", "SELECT": return "+OK\r\n"
        case "PING": return "+PONG\r\n"
        case "ROLE": return "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
        // As Redis 6.2 answers `HELLO 2`: the nodes answer `CLUSTER SLOTS`, not `SHARDS`.
        case "HELLO": return "*4\r\n" + bulk("server") + bulk("redis") + bulk("version") + bulk("6.2.14")
        default: return nil
        }
    }

    /// A `CLUSTER SLOTS` answer: every slot to `owner`, then `replicas` as its replicas.
    static func slots(owner: (host: String, port: Int), replicas: [(host: String, port: Int)] = []) -> String {
        let nodes = [owner] + replicas
        var text = "*1\r\n*\(2 + nodes.count)\r\n:0\r\n:16383\r\n"
        for node in nodes { text += "*3\r\n\(bulk(node.host)):\(node.port)\r\n\(bulk("0123456789abcdef"))" }
        return text
    }

    static func bulk(_ text: String) -> String { "$\(text.utf8.count)\r\n\(text)\r\n" }
}

