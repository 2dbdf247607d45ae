import CHiredis
import CLibEvent
import EventLoop
import Glibc

/// One Redis connection: hiredis 0.14 async, attached to the process's libevent loop, that
/// keeps itself connected.
///
/// What it guarantees:
/// - **Exactly one completion per command.** A reply completes `.success`, an error reply
///   `.failure(.server(message))`; a lost connection completes every command in flight with
///   `.failure(.disconnected)` (hiredis's NULL reply). Completions run on the loop, in
///   command order, except that a command refused at once (closed connection, full queue)
///   completes before `send` returns.
/// - **Handshake on every (re)connect**: `AUTH [user] password` when the URL has a password,
///   `CLIENT SETNAME` when configured, `SELECT db` when db ≠ 0, then `onReady`, and only then
///   are the commands that waited for the connection sent, in order. Commands sent from
///   `onReady` go out first.
/// - **While not ready, commands wait** in a queue bounded by `Config.maxQueued` (beyond it:
///   `.disconnected` at once). A failed connection attempt (refused, no answer within the
///   watchdog time, AUTH or SELECT rejected) completes every waiting command with
///   `.connectFailed(reason)`: callers retry, paced by the reconnect backoff.
/// - **Reconnects** with capped exponential backoff and jitter (`ReconnectBackoff`).
/// - **Watchdog**: when the oldest unanswered command has waited longer than
///   `Config.watchdogMs` (plus the `blockMs` it declared), or an attempt has not become
///   ready within `watchdogMs`, the connection is taken as hung: it is freed (its commands
///   complete `.disconnected`) and a new one is made.
///
/// hiredis 0.14 rules it follows (reference/c-libraries.md): the context pointer is cleared
/// in the connect-failure and disconnect callbacks (hiredis frees the context after them);
/// replies are copied out before the callback returns; a free requested while a hiredis
/// callback runs (`callbackDepth > 0`) is deferred to the next loop turn.
///
/// Lifecycle and threading: loop-owned; every method must be called on the loop thread.
/// Create, set `onReady`/`onEvent`, `start()`, and `close()` when done: the connection keeps
/// itself alive (and so the object behind `ac->data` outlives every context) until `close()`
/// has freed its context. The password is never logged nor put in an error.
public final class RedisConnection {
    /// How to connect and how patient to be.
    public struct Config: Sendable {
        public var url: RedisURL
        /// How long the oldest unanswered command (or a connection attempt) may wait before
        /// the connection is declared hung. Milliseconds, > 0.
        public var watchdogMs: Int64
        public var backoff: ReconnectBackoff
        /// How many commands may wait for a connection; beyond it they fail at once.
        public var maxQueued: Int
        /// `CLIENT SETNAME` value, sent on every connect (shows in `CLIENT LIST`).
        public var clientName: String?

        public init(url: RedisURL, watchdogMs: Int64 = 5000, backoff: ReconnectBackoff = ReconnectBackoff(),
                    maxQueued: Int = 100_000, clientName: String? = nil) {
            precondition(watchdogMs > 0, "watchdogMs must be positive")
            self.url = url
            self.watchdogMs = watchdogMs
            self.backoff = backoff
            self.maxQueued = maxQueued
            self.clientName = clientName
        }
    }

    /// What happened to the connection, for logs and metrics. Texts never hold the password.
    public enum Event: Equatable, Sendable {
        /// Connected, handshake done, `onReady` ran.
        case ready
        /// An attempt failed; the next one follows after a backoff.
        case connectFailed(String)
        /// A ready connection was lost (server closed it, I/O error, or the watchdog).
        case lost(String)
    }

    /// Counters since creation.
    public struct Stats: Equatable, Sendable {
        /// Times the connection became ready.
        public var ready = 0
        /// Failed connection attempts.
        public var connectFailures = 0
        /// Ready connections lost.
        public var lost = 0
        /// Times the watchdog declared the connection hung.
        public var watchdogFirings = 0
    }

    public typealias Completion = (Result<RedisReply, RedisError>) -> Void

    private enum Phase {
        case idle, connecting, handshaking, ready
        /// The context is being freed (NULL replies seen, or a free deferred out of a callback).
        case dropping
        case backingOff, closed
    }

    /// Reads a non-error reply inside hiredis's callback and completes the command itself
    /// (`send(command:blockMs:decodingInPlace:completion:)`); errors and lost connections go
    /// to the command's `completion` as usual.
    typealias InPlaceDecoder = (HiredisReply) -> Void

    private struct Pending {
        let seq: UInt64
        let allowanceMs: Int64
        let completion: Completion
        let inPlace: InPlaceDecoder?
    }

    private struct Waiting {
        let command: RedisCommand
        let allowanceMs: Int64
        let completion: Completion
        let inPlace: InPlaceDecoder?
    }

    public let loop: EventLoop
    public let config: Config
    /// Runs after every (re)connect's handshake, before waiting commands are released.
    /// Commands it sends go out ahead of them (e.g. re-creating consumer groups).
    public var onReady: ((RedisConnection) -> Void)?
    /// Observes connects, failures and losses.
    public var onEvent: ((Event) -> Void)?
    public private(set) var stats = Stats()
    /// The last connection problem, redacted; nil once ready again.
    public private(set) var lastProblem: String?

    private var ac: UnsafeMutablePointer<redisAsyncContext>?
    private var phase: Phase = .idle
    /// Bumped for every context, so late handshake completions of an old one are ignored.
    private var generation = 0
    private var contextWasReady = false
    private var pending = FIFO<Pending>()
    /// Monotonic ms since which the head of `pending` has been the oldest unanswered command.
    private var headSinceMs: Int64 = 0
    private var waiting = FIFO<Waiting>()
    private var nextSeq: UInt64 = 1
    private var attempt = 0
    private var attemptStartedMs: Int64 = 0
    /// > 0 while a hiredis callback (or a completion called from one) runs: no free then.
    private var callbackDepth = 0
    private var deferred: [(RedisConnection) -> Void] = []
    private var teardownDeferred = false
    private var keepAlive: Unmanaged<RedisConnection>?
    private var watchdog: LoopTimer!
    private var reconnectTimer: LoopTimer!
    private let random: () -> Double

    /// Creates a connection; nothing happens until `start()`. `random` gives numbers in
    /// [0, 1) for the backoff jitter (tests may inject their own).
    public init(loop: EventLoop, config: Config, random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        self.loop = loop
        self.config = config
        self.random = random
        watchdog = LoopTimer(loop: loop) { [unowned self] in self.watchdogFired() }
        reconnectTimer = LoopTimer(loop: loop) { [unowned self] in
            if self.phase == .backingOff { self.startAttempt() }
        }
        keepAlive = Unmanaged.passRetained(self)
    }

    /// Whether commands are sent at once (connected, handshake done).
    public var isReady: Bool { phase == .ready }
    /// Commands sent and not answered yet.
    public var inFlightCount: Int { pending.count }
    /// Commands waiting for a connection.
    public var waitingCount: Int { waiting.count }

    /// Starts connecting. Commands sent before are queued.
    public func start() {
        loop.assertInLoop()
        guard phase == .idle else { return }
        startAttempt()
    }

    /// Sends a command (`args[0]` is its name). `blockMs` is how long the command may
    /// legitimately hold the connection (`BLOCK`), added to the watchdog's patience.
    public func send(_ args: [String], blockMs: Int64 = 0, completion: @escaping Completion) {
        send(command: RedisCommand(args), blockMs: blockMs, completion: completion)
    }

    /// `send` with binary arguments.
    public func send(bytes args: [[UInt8]], blockMs: Int64 = 0, completion: @escaping Completion) {
        send(command: RedisCommand(args), blockMs: blockMs, completion: completion)
    }

    func send(command: RedisCommand, blockMs: Int64, completion: @escaping Completion) {
        send(command: command, blockMs: blockMs, inPlace: nil, completion: completion)
    }

    /// Sends a command whose reply `decode` reads in place, during hiredis's callback, instead
    /// of from a `RedisReply` copy: for large replies on the hot path (the router's reads).
    /// `decode` must not keep the `HiredisReply`; what it returns or throws completes the
    /// command, as does any error Redis or the connection gives.
    func send<T>(command: RedisCommand, blockMs: Int64, decodingInPlace decode: @escaping (HiredisReply) throws -> T,
                 completion: @escaping (Result<T, RedisError>) -> Void) {
        send(command: command, blockMs: blockMs, inPlace: { reply in
            do {
                completion(.success(try decode(reply)))
            } catch {
                completion(.failure(error as? RedisError ?? .unexpectedReply("\(error)")))
            }
        }, completion: { result in
            switch result {
            case let .failure(error): completion(.failure(error))
            case let .success(reply): completion(.failure(.unexpectedReply("\(command.name) \(reply)")))
            }
        })
    }

    private func send(command: RedisCommand, blockMs: Int64, inPlace: InPlaceDecoder?, completion: @escaping Completion) {
        loop.assertInLoop()
        let allowance = config.watchdogMs + max(0, blockMs)
        switch phase {
        case .ready:
            issue(command, allowanceMs: allowance, inPlace: inPlace, completion: completion)
        case .closed:
            completion(.failure(.closed))
        case .idle, .connecting, .handshaking, .dropping, .backingOff:
            if waiting.count >= config.maxQueued {
                completion(.failure(.disconnected))
            } else {
                waiting.push(Waiting(command: command, allowanceMs: allowance, completion: completion, inPlace: inPlace))
            }
        }
    }

    /// Frees the connection: commands in flight complete `.disconnected`, waiting ones
    /// `.closed`, later sends `.closed`. Safe to call from a completion (then the free
    /// happens on the next loop turn).
    public func close() {
        loop.assertInLoop()
        guard phase != .closed else { return }
        phase = .closed
        if callbackDepth > 0 {
            deferToLoop { $0.finishClose() }
        } else {
            finishClose()
        }
    }

    private func finishClose() {
        if let current = ac {
            ac = nil
            redisAsyncFree(current)
        }
        failPending(with: .disconnected)
        failWaiting(with: .closed)
        watchdog.close()
        reconnectTimer.close()
        // Safe: the caller of close() or the deferred-action trampoline holds a reference.
        keepAlive?.release()
        keepAlive = nil
    }

    // MARK: Connecting

    private func startAttempt() {
        guard phase != .closed else { return }
        generation += 1
        contextWasReady = false
        attemptStartedMs = Clock.monotonicMs()
        phase = .connecting
        let url = config.url
        let created: UnsafeMutablePointer<redisAsyncContext>?
        switch url.endpoint {
        case .tcp(let host, let port): created = redisAsyncConnect(host, Int32(port))
        case .unix(let path): created = redisAsyncConnectUnix(path)
        }
        guard let created else {
            attemptFailed("\(url.redacted): out of memory")
            return
        }
        if created.pointee.err != 0 {
            let why = RedisConnection.errorText(created)
            redisAsyncFree(created)   // never attached, no callbacks: safe here
            attemptFailed("\(url.redacted): \(why)")
            return
        }
        created.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        guard redisLibeventAttach(created, loop.base) == REDIS_OK else {
            redisAsyncFree(created)
            attemptFailed("\(url.redacted): cannot attach to the event loop")
            return
        }
        redisAsyncSetConnectCallback(created) { ac, status in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue().connected(ac, status: status)
        }
        redisAsyncSetDisconnectCallback(created) { ac, status in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue().disconnected(ac)
        }
        ac = created
        watchdog.schedule(afterMs: config.watchdogMs)
    }

    private func isCurrent(_ context: UnsafePointer<redisAsyncContext>) -> Bool {
        guard let ac else { return false }
        return UnsafePointer(ac) == context
    }

    private func connected(_ context: UnsafePointer<redisAsyncContext>, status: Int32) {
        guard isCurrent(context) else { return }
        callbackDepth += 1
        defer { callbackDepth -= 1 }
        if status == REDIS_OK {
            beginHandshake()
        } else {
            // hiredis frees the context after this callback returns: forget it now.
            let why = RedisConnection.errorText(context)
            ac = nil
            attemptFailed("\(config.url.redacted): \(why)")
        }
    }

    private func disconnected(_ context: UnsafePointer<redisAsyncContext>) {
        // Our own redisAsyncFree cleared `ac` first, so only losses we did not cause get past.
        guard isCurrent(context) else { return }
        callbackDepth += 1
        defer { callbackDepth -= 1 }
        let why = context.pointee.err != 0 ? RedisConnection.errorText(context) : "connection closed"
        ac = nil   // hiredis frees the context after this callback returns
        failPending(with: .disconnected)
        contextGone("\(config.url.redacted): \(why)", wasReady: contextWasReady)
    }

    private func beginHandshake() {
        phase = .handshaking
        let url = config.url
        var steps: [(RedisCommand, String)] = []
        if let password = url.password {
            if let user = url.user {
                steps.append((RedisCommand(["AUTH", user, password]), "AUTH as user '\(user)'"))
            } else {
                steps.append((RedisCommand(["AUTH", password]), "AUTH"))
            }
        }
        if let name = config.clientName {
            steps.append((RedisCommand(["CLIENT", "SETNAME", name]), "CLIENT SETNAME"))
        }
        if url.db != 0 {
            steps.append((RedisCommand(["SELECT", String(url.db)]), "SELECT \(url.db)"))
        }
        guard !steps.isEmpty else {
            becomeReady()
            return
        }
        let gen = generation
        var remaining = steps.count
        var failure: String?
        for (command, what) in steps {
            issue(command, allowanceMs: config.watchdogMs) { [unowned self] result in
                remaining -= 1
                switch result {
                case .success:
                    break
                case .failure(.disconnected), .failure(.closed):
                    return   // the context is going away; its loss is handled there
                case .failure(let error):
                    if failure == nil { failure = "\(what) refused by \(url.redacted): \(self.scrub(Self.text(of: error)))" }
                }
                guard remaining == 0, gen == self.generation, self.phase == .handshaking else { return }
                if let failure {
                    self.dropContext(reason: failure, attemptFailed: true)
                } else {
                    self.becomeReady()
                }
            }
        }
    }

    private func becomeReady() {
        phase = .ready
        contextWasReady = true
        attempt = 0
        lastProblem = nil
        stats.ready += 1
        let gen = generation
        onEvent?(.ready)
        onReady?(self)
        // Release the commands that waited, in order, unless onReady changed things.
        while phase == .ready, gen == generation, let next = waiting.popFirst() {
            issue(next.command, allowanceMs: next.allowanceMs, inPlace: next.inPlace, completion: next.completion)
        }
    }

    // MARK: Commands

    private func issue(_ command: RedisCommand, allowanceMs: Int64, inPlace: InPlaceDecoder? = nil,
                       completion: @escaping Completion) {
        guard let ac else {
            completion(.failure(.disconnected))
            return
        }
        let seq = nextSeq
        nextSeq += 1
        let status = command.withArgv { argc, argv, argvlen in
            redisAsyncCommandArgv(ac, { ac, reply, privdata in
                guard let ac, let data = ac.pointee.data else { return }
                Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
                    .replied(ac, reply, seq: UInt64(UInt(bitPattern: privdata)))
            }, UnsafeMutableRawPointer(bitPattern: UInt(seq)), argc, argv, argvlen)
        }
        guard status == REDIS_OK else {
            // hiredis refuses commands on a context that is disconnecting or being freed.
            completion(.failure(.disconnected))
            return
        }
        if pending.isEmpty { headSinceMs = Clock.monotonicMs() }
        pending.push(Pending(seq: seq, allowanceMs: allowanceMs, completion: completion, inPlace: inPlace))
        if !watchdog.isScheduled { watchdog.schedule(afterMs: allowanceMs) }
    }

    private func replied(_ context: UnsafeMutablePointer<redisAsyncContext>, _ reply: UnsafeMutableRawPointer?, seq: UInt64) {
        guard let head = pending.popFirst() else {
            assertionFailure("redis reply with no command pending")
            return
        }
        assert(head.seq == seq, "hiredis answered out of order")
        headSinceMs = Clock.monotonicMs()
        if let reply, let decode = head.inPlace {
            let node = HiredisReply(reply.assumingMemoryBound(to: redisReply.self))
            if !node.isError {
                callbackDepth += 1
                decode(node)
                callbackDepth -= 1
                return
            }
        }
        let result: Result<RedisReply, RedisError>
        if let reply {
            // Copy now: hiredis frees the reply when this callback returns.
            let value = RedisReply(copying: reply.assumingMemoryBound(to: redisReply.self))
            if case .error(let message) = value {
                result = .failure(.server(message))
            } else {
                result = .success(value)
            }
        } else {
            // NULL reply: the context is being freed. Later sends must wait for a new one.
            if isCurrent(UnsafePointer(context)), phase == .ready || phase == .handshaking { phase = .dropping }
            result = .failure(.disconnected)
        }
        callbackDepth += 1
        head.completion(result)
        callbackDepth -= 1
    }

    // MARK: Losing the connection

    /// Frees the current context (now, or on the next loop turn when inside a callback) and
    /// reconnects. `attemptFailed`: the context never became ready (fail waiting commands).
    private func dropContext(reason: String, attemptFailed isAttemptFailure: Bool) {
        guard ac != nil, phase != .closed else { return }
        guard callbackDepth == 0 else {
            phase = .dropping
            if !teardownDeferred {
                teardownDeferred = true
                deferToLoop { conn in
                    conn.teardownDeferred = false
                    conn.dropContext(reason: reason, attemptFailed: isAttemptFailure)
                }
            }
            return
        }
        guard let current = ac else { return }
        let wasReady = contextWasReady && !isAttemptFailure
        ac = nil
        phase = .dropping
        redisAsyncFree(current)   // runs every pending callback with a NULL reply
        failPending(with: .disconnected)
        contextGone(reason, wasReady: wasReady)
    }

    private func contextGone(_ reason: String, wasReady: Bool) {
        guard phase != .closed else { return }
        if wasReady {
            stats.lost += 1
            lastProblem = reason
            onEvent?(.lost(reason))
            scheduleReconnect()
        } else {
            attemptFailed(reason)
        }
    }

    private func attemptFailed(_ reason: String) {
        guard phase != .closed else { return }
        stats.connectFailures += 1
        lastProblem = reason
        onEvent?(.connectFailed(reason))
        scheduleReconnect()
        failWaiting(with: .connectFailed(reason))
    }

    private func scheduleReconnect() {
        guard phase != .closed else { return }
        phase = .backingOff
        let delay = config.backoff.delayMs(attempt: attempt, unit: random())
        attempt += 1
        reconnectTimer.schedule(afterMs: delay)
    }

    private func watchdogFired() {
        let now = Clock.monotonicMs()
        switch phase {
        case .connecting, .handshaking:
            let deadline = attemptStartedMs + config.watchdogMs
            if now >= deadline {
                stats.watchdogFirings += 1
                dropContext(reason: "\(config.url.redacted): not ready within \(config.watchdogMs) ms", attemptFailed: true)
            } else {
                watchdog.schedule(afterMs: deadline - now)
            }
        case .ready, .dropping:
            guard let head = pending.first, ac != nil else { return }
            let deadline = headSinceMs + head.allowanceMs
            if now >= deadline {
                stats.watchdogFirings += 1
                dropContext(reason: "\(config.url.redacted): no reply within \(head.allowanceMs) ms (watchdog)", attemptFailed: false)
            } else {
                watchdog.schedule(afterMs: deadline - now)
            }
        case .idle, .backingOff, .closed:
            return
        }
    }

    private func failPending(with error: RedisError) {
        while let p = pending.popFirst() {
            callbackDepth += 1
            p.completion(.failure(error))
            callbackDepth -= 1
        }
    }

    private func failWaiting(with error: RedisError) {
        // Take them all first: a completion may queue a retry, which waits for the next attempt.
        for w in waiting.takeAll() {
            callbackDepth += 1
            w.completion(.failure(error))
            callbackDepth -= 1
        }
    }

    // MARK: Deferring out of callbacks

    /// Runs `action` on the next loop turn, outside any hiredis callback. The pending
    /// `event_base_once` holds a reference, so the connection outlives it.
    private func deferToLoop(_ action: @escaping (RedisConnection) -> Void) {
        deferred.append(action)
        guard deferred.count == 1 else { return }
        var now = timeval(tv_sec: 0, tv_usec: 0)
        let ctx = Unmanaged.passRetained(self).toOpaque()
        event_base_once(loop.base, -1, Int16(EV_TIMEOUT), { _, _, arg in
            let conn = Unmanaged<RedisConnection>.fromOpaque(arg!).takeRetainedValue()
            conn.runDeferred()
        }, ctx, &now)
    }

    private func runDeferred() {
        let actions = deferred
        deferred = []
        for action in actions { action(self) }
    }

    // MARK: Texts

    private static func errorText(_ context: UnsafePointer<redisAsyncContext>) -> String {
        guard let errstr = context.pointee.errstr else { return "error \(context.pointee.err)" }
        return String(cString: errstr)
    }

    private static func text(of error: RedisError) -> String {
        if case .server(let message) = error { return message }
        return error.description
    }

    /// Removes the password from a text that came from elsewhere (defence in depth: Redis
    /// does not echo it).
    private func scrub(_ text: String) -> String {
        guard let password = config.url.password, !password.isEmpty else { return text }
        return text.replacing(password, with: "***")
    }
}
