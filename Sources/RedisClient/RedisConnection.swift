import CHiredis
import CLibEvent
import EventLoop
import Glibc

/// One Redis connection on the process's loop that keeps itself connected, over TCP, a unix
/// socket or TLS (`redis://`, `unix://`, `rediss://`), to a fixed address or to the primary
/// that sentinels name.
///
/// One I/O path for every transport: the bytes travel on a `TLSStream` (plain for TCP and unix
/// sockets), commands are written in Redis' protocol by `RedisCommand.writeRESP`, hiredis parses the
/// replies (`redisReader`), and nothing else of hiredis is used (its async API has no TLS in 0.14).
///
/// What it guarantees:
/// - **Exactly one completion per command.** A reply completes `.success`, an error reply
///   `.failure(.server(message))`; a lost connection completes every command in flight with
///   `.failure(.disconnected)`. Completions run on the loop, in command order, except that a
///   command refused at once (closed connection, full queue) completes before `send` returns.
/// - **Handshake on every (re)connect**: `AUTH [user] password` when the URL has a password,
///   `CLIENT SETNAME` when configured, `SELECT db` when db ≠ 0, `ROLE` (must be `master`)
///   through sentinels, then `onReady`, and only then are the commands that waited for the
///   connection sent, in order. Commands sent from `onReady` go out first.
/// - **While not ready, commands wait** in a queue bounded by `Config.maxQueued` (beyond it:
///   `.disconnected` at once). A failed connection attempt (no address, refused, TLS refused,
///   no answer within the watchdog time, a handshake step refused) completes every waiting
///   command with `.connectFailed(reason)`: callers retry, paced by the reconnect backoff.
/// - **Reconnects** with capped exponential backoff and jitter (`ReconnectBackoff`).
/// - **Watchdog**: when the oldest unanswered command has waited longer than
///   `Config.watchdogMs` (plus the `blockMs` it declared), or an attempt has not become
///   ready within `watchdogMs`, the connection is taken as hung: it is closed (its commands
///   complete `.disconnected`) and a new one is made.
/// - **Through sentinels** (`Config.sentinel`): every attempt asks them for the primary's
///   address; a `READONLY` or `LOADING` answer, a lost connection, the watchdog or a
///   `+switch-master` announcement sends the connection back to them. No sentinel
///   answering is a failed attempt like a refused connection.
///
/// Its life is `StateMachine` (`RedisConnection+StateMachine.swift`): every event goes to the
/// machine, and `run(_:)` performs the action it returns, in one place.
///
/// Re-entrancy: a completion may send, or `close()` the connection; the replies after it in
/// the same read are then not delivered (their commands complete `.disconnected`). The
/// object outlives every callback that refers to it: it holds itself until `close()`, and a
/// `close()` from inside a callback lets go of itself on the next loop turn.
///
/// Lifecycle and threading: loop-owned; every method must be called on the loop thread.
/// Create, set `onReady`/`onEvent`, `start()`, and `close()` when done. The password is never
/// logged nor put in an error.
public final class RedisConnection: TLSStreamDelegate {
    /// How to connect and how patient to be.
    public struct Config: Sendable {
        /// Scheme (TLS or not), credentials, database, and the address unless `sentinel` is set.
        public var url: RedisURL
        /// Trust and client certificate for `rediss://` (and for sentinels with `tls`).
        public var tls: RedisTLSOptions
        /// Sentinels that name the primary; the URL's host and port are then not used.
        public var sentinel: RedisSentinelOptions?
        /// How long the oldest unanswered command (or a connection attempt) may wait before
        /// the connection is declared hung. Milliseconds, > 0.
        public var watchdogMs: Int64
        public var backoff: ReconnectBackoff
        /// How many commands may wait for a connection; beyond it they fail at once.
        public var maxQueued: Int
        /// `CLIENT SETNAME` value, sent on every connect (shows in `CLIENT LIST`).
        public var clientName: String?

        public init(url: RedisURL, tls: RedisTLSOptions = RedisTLSOptions(), sentinel: RedisSentinelOptions? = nil,
                    watchdogMs: Int64 = 5000, backoff: ReconnectBackoff = ReconnectBackoff(),
                    maxQueued: Int = 100_000, clientName: String? = nil) {
            precondition(watchdogMs > 0, "watchdogMs must be positive")
            self.url = url
            self.tls = tls
            self.sentinel = sentinel
            self.watchdogMs = watchdogMs
            self.backoff = backoff
            self.maxQueued = maxQueued
            self.clientName = clientName
        }

        /// How a connection is described in logs: the redacted URL, and the sentinels.
        public var redactedTarget: String {
            sentinel.map { "\(url.redacted) via \($0)" } ?? url.redacted
        }
    }

    /// What happened to the connection, for logs and metrics. Texts never hold the password.
    public enum Event: Equatable, Sendable {
        /// Connected, handshake done, `onReady` ran.
        case ready
        /// An attempt failed; the next one follows after a backoff.
        case connectFailed(String)
        /// A ready connection was lost (server closed it, I/O error, the watchdog, a failover).
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

        public init(ready: Int = 0, connectFailures: Int = 0, lost: Int = 0, watchdogFirings: Int = 0) {
            self.ready = ready
            self.connectFailures = connectFailures
            self.lost = lost
            self.watchdogFirings = watchdogFirings
        }
    }

    public typealias Completion = (Result<RedisReply, RedisError>) -> Void

    /// Reads a non-error reply in place, before the reply is freed, and completes the command
    /// itself (`send(command:blockMs:decodingInPlace:completion:)`); errors and lost
    /// connections go to the command's `completion` as usual.
    typealias InPlaceDecoder = (HiredisReply) -> Void

    /// A command written and not answered yet.
    private struct Pending {
        enum Kind {
            /// A step of the handshake: its answer goes to the state machine.
            case handshake(HandshakeStep)
            case command(Completion, InPlaceDecoder?)
        }
        let kind: Kind
        /// How long it may wait for its reply (the watchdog plus its declared block time), ms.
        let allowanceMs: Int64
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
    /// Receives the messages of the channels this connection subscribed to (`subscribe`).
    var onMessage: ((_ channel: String, _ payload: String) -> Void)?

    public var stats: Stats { machine.stats }
    /// Error replies that refused a write (`RedisError.writeRefusal`), by why, since creation:
    /// every command's and script's, whoever sent it, for the refusal metrics.
    public private(set) var writeRefusals: [RedisError.WriteRefusal: Int] = [:]
    /// The last connection problem, redacted; nil once ready again.
    public var lastProblem: String? { machine.lastProblem }

    private var machine: StateMachine
    /// Where attempts go: the URL's address, each sentinel in turn, or the primary the
    /// sentinels name.
    private let addresses: AddressSource
    private var stream: TLSStream?
    private var reader: ReplyReader?
    private var tlsContext: TLSContext?
    private var pending = FIFO<Pending>()
    /// Monotonic ms since which the head of `pending` has been the oldest unanswered command.
    private var headSinceMs: Int64 = 0
    private var waiting = FIFO<Waiting>()
    /// Bumped whenever an attempt ends, so a sentinel's answer to an older one is ignored.
    private var attemptID = 0
    /// True once a SUBSCRIBE was sent: messages then arrive between replies.
    private var subscribed = false
    /// > 0 while a callback of this connection runs (its transport, a timer, a completion).
    private var callbackDepth = 0
    private var keepAlive: Unmanaged<RedisConnection>?
    private var watchdog: LoopTimer!
    private var reconnectTimer: LoopTimer!
    private let random: () -> Double

    /// Where a connection's attempts go.
    enum AddressSource {
        /// The URL's host and port, or its unix socket.
        case url
        /// Each sentinel in turn (the connection that watches them).
        case eachSentinel(RedisSentinelOptions)
        /// The primary the sentinels name.
        case primary(RedisSentinels, owned: Bool)
    }

    /// Creates a connection; nothing happens until `start()`. `random` gives numbers in
    /// [0, 1) for the backoff jitter (tests may inject their own). With `config.sentinel`,
    /// `sentinels` may share one watch of the sentinels among the process's connections;
    /// without it the connection makes its own.
    public convenience init(loop: EventLoop, config: Config, sentinels: RedisSentinels? = nil,
                            random: @escaping () -> Double = { Double.random(in: 0..<1) }) {
        let source: AddressSource
        if let options = config.sentinel {
            source = .primary(sentinels ?? RedisSentinels(loop: loop, options: options, tls: config.tls,
                                                          watchdogMs: config.watchdogMs),
                              owned: sentinels == nil)
        } else {
            source = .url
        }
        self.init(loop: loop, config: config, addresses: source, random: random)
    }

    init(loop: EventLoop, config: Config, addresses: AddressSource, random: @escaping () -> Double) {
        self.loop = loop
        self.config = config
        self.addresses = addresses
        self.random = random
        let viaSentinels: Bool
        if case .primary = addresses { viaSentinels = true } else { viaSentinels = false }
        machine = StateMachine(watchdogMs: config.watchdogMs, viaSentinels: viaSentinels,
                               handshake: HandshakeStep.steps(url: config.url, named: config.clientName != nil,
                                                              viaSentinels: viaSentinels))
        watchdog = LoopTimer(loop: loop) { [unowned self] in
            self.inCallback {
                let oldest = self.pending.first.map { (sinceMs: self.headSinceMs, allowanceMs: $0.allowanceMs) }
                self.run(self.machine.onWatchdogFired(nowMs: Clock.monotonicMs(), oldestUnanswered: oldest))
            }
        }
        reconnectTimer = LoopTimer(loop: loop) { [unowned self] in
            self.inCallback { self.run(self.machine.onBackoffElapsed(nowMs: Clock.monotonicMs())) }
        }
        keepAlive = Unmanaged.passRetained(self)
    }

    /// A second connection to the same Redis: this one's settings and address (through
    /// sentinels, the same watch of them), named `clientName` in Redis. Not started; its owner
    /// starts and closes it. For a link whose commands must not wait behind this one's (a
    /// blocking read holds up its connection). When this connection made its own watch of the
    /// sentinels, close the sibling first: closing this one ends the watch.
    public func sibling(clientName: String) -> RedisConnection {
        var settings = config
        settings.clientName = clientName
        let source: AddressSource
        switch addresses {
        case .url: source = .url
        case .eachSentinel(let options): source = .eachSentinel(options)
        case .primary(let sentinels, _): source = .primary(sentinels, owned: false)
        }
        return RedisConnection(loop: loop, config: settings, addresses: source, random: random)
    }

    /// Whether commands are sent at once (connected, handshake done).
    public var isReady: Bool { machine.isReady }
    /// The address the connection is connected to while ready (through sentinels: the primary
    /// they named), `host:port` or `unix:PATH`; nil while it is not.
    public var connectedTo: String? {
        switch machine.readyHost {
        case .tcp(let host, let port)?: return Endpoint(host: host, port: port).description
        case .unix(let path)?: return "unix:" + path
        case nil: return nil
        }
    }
    /// Commands sent and not answered yet.
    public var inFlightCount: Int { pending.count }
    /// Commands waiting for a connection (a cluster client closes a node's connection only when
    /// none waits or is in flight).
    public var waitingCount: Int { waiting.count }

    /// Starts connecting. Commands sent before are queued.
    public func start() {
        loop.assertInLoop()
        let action = machine.onStart(nowMs: Clock.monotonicMs())
        if action != .none, case .primary(let sentinels, _) = addresses { sentinels.follow(self) }
        run(action)
    }

    /// Sends a command (`args[0]` is its name). `blockMs` is how long the command may
    /// legitimately hold the connection (`BLOCK`), added to the watchdog's patience.
    public func send(_ args: [String], blockMs: Int64 = 0, completion: @escaping Completion) {
        send(command: RedisCommand(args), blockMs: blockMs, completion: completion)
    }

    public func send(command: RedisCommand, blockMs: Int64, completion: @escaping Completion) {
        send(command: command, blockMs: blockMs, inPlace: nil, completion: completion)
    }

    /// Sends a command whose reply `decode` reads in place, before the reply is freed, instead
    /// of from a `RedisReply` copy: for large replies on the hot path (the router's reads).
    /// `decode` must not keep the `HiredisReply`; what it returns or throws completes the
    /// command, as does any error Redis or the connection gives.
    package func send<T>(command: RedisCommand, blockMs: Int64, decodingInPlace decode: @escaping (HiredisReply) throws -> T,
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
        switch machine.onSend(waiting: waiting.count, maxQueued: config.maxQueued) {
        case .write:
            write(command, .command(completion, inPlace), allowanceMs: allowance)
        case .wait:
            waiting.push(Waiting(command: command, allowanceMs: allowance, completion: completion, inPlace: inPlace))
        case .refuse(let error):
            completion(.failure(error))
        }
    }

    /// Subscribes to `channels` (from `onReady`, so every reconnect subscribes again);
    /// their messages go to `onMessage`. Afterwards only `PING` may be sent.
    func subscribe(_ channels: [String]) {
        subscribed = true
        for channel in channels {
            send(["SUBSCRIBE", channel]) { _ in }
        }
    }

    /// Frees the connection: commands in flight complete `.disconnected`, waiting ones
    /// `.closed`, later sends `.closed`. Safe to call from a completion.
    public func close() {
        loop.assertInLoop()
        run(machine.onCloseRequested())
    }

    /// The sentinels announced a new primary at `host:port`.
    func primaryMoved(host: String, port: Int) {
        let url = config.url.with(host: host, port: port)
        inCallback { run(machine.onPrimaryMoved(to: url.endpoint, nowMs: Clock.monotonicMs())) }
    }

    // MARK: Performing the machine's actions

    /// Performs `action`: the only place where the connection's state turns into I/O.
    private func run(_ action: StateMachine.Action) {
        switch action {
        case .none:
            return
        case .locate(let watchdogMs):
            watchdog.schedule(afterMs: watchdogMs)
            locate()
        case .openTransport(let host):
            openTransport(host)
        case .sendHandshake(let steps):
            for step in steps { write(handshakeCommand(step), .handshake(step), allowanceMs: config.watchdogMs) }
        case .becomeReady:
            becomeReady()
        case .failAttempt(let reason, let reconnect):
            closeTransport()
            failPending(with: .disconnected)
            onEvent?(.connectFailed(reason))
            scheduleReconnect(reconnect)
            failWaiting(with: .connectFailed(reason))
        case .dropConnection(let reason, let reconnect):
            closeTransport()
            failPending(with: .disconnected)
            onEvent?(.lost(reason))
            scheduleReconnect(reconnect)
        case .restartAttempt:
            closeTransport()
            failPending(with: .disconnected)
            watchdog.schedule(afterMs: config.watchdogMs)
            locate()
        case .armWatchdog(let ms):
            watchdog.schedule(afterMs: ms)
        case .shutDown:
            closeTransport()
            failPending(with: .disconnected)
            failWaiting(with: .closed)
            watchdog.close()
            reconnectTimer.close()
            if case .primary(let sentinels, let owned) = addresses {
                sentinels.unfollow(self)
                if owned { sentinels.close() }
            }
            letGo()
        }
    }

    private func locate() {
        switch addresses {
        case .url:
            run(machine.onLocated(config.url.endpoint, target: config.url.redacted))
        case .eachSentinel(let options):
            let url = options.url(of: machine.stats.connectFailures + machine.stats.lost)
            run(machine.onLocated(url.endpoint, target: url.redacted))
        case .primary(let sentinels, _):
            let id = attemptID
            sentinels.locatePrimary { [weak self] result in
                guard let self, id == self.attemptID else { return }
                self.inCallback {
                    switch result {
                    case let .success(address):
                        let url = self.config.url.with(host: address.host, port: address.port)
                        self.run(self.machine.onLocated(url.endpoint, target: "\(url.redacted) (primary of '\(sentinels.options.master)')"))
                    case let .failure(.connectFailed(reason)):
                        self.run(self.machine.onLocateFailed(reason: reason))
                    case let .failure(error):
                        self.run(self.machine.onLocateFailed(reason: error.description))
                    }
                }
            }
        }
    }

    private func openTransport(_ host: RedisURL.Endpoint) {
        reader = ReplyReader()
        let usesTLS: Bool
        switch addresses {
        case .url, .primary: usesTLS = config.url.usesTLS
        case .eachSentinel(let options): usesTLS = options.tls
        }
        switch host {
        case .unix(let path):
            stream = TLSStream.connectUnix(loop: loop, path: path, delegate: self)
        case .tcp(let hostName, let port) where !usesTLS:
            stream = TLSStream.connectPlain(loop: loop, host: hostName, port: port, delegate: self)
        case .tcp(let hostName, let port):
            do {
                let context = try tlsContext ?? RedisConnection.makeTLSContext(config.tls)
                tlsContext = context
                stream = try TLSStream.connect(loop: loop, context: context, host: hostName, port: port,
                                               serverName: config.tls.serverName, delegate: self)
            } catch {
                run(machine.onTransportClosed(reason: "TLS: \(error)"))
            }
        }
    }

    /// The client context of a `rediss://` connection: TLS 1.2+, no ALPN, verification against
    /// the CA file or the system store, and the client certificate when configured.
    static func makeTLSContext(_ options: RedisTLSOptions) throws(TLSError) -> TLSContext {
        var certificate: ClientCertificate?
        if let cert = options.certFile, let key = options.keyFile { certificate = .pem(certFile: cert, keyFile: key) }
        return try TLSContext.client(caFile: options.caFile, certificate: certificate, alpn: nil)
    }

    private func handshakeCommand(_ step: HandshakeStep) -> RedisCommand {
        switch step {
        case .authenticate(let user?): return RedisCommand(["AUTH", user, config.url.password ?? ""])
        case .authenticate(nil): return RedisCommand(["AUTH", config.url.password ?? ""])
        case .setName: return RedisCommand(["CLIENT", "SETNAME", config.clientName ?? ""])
        case .selectDatabase(let db): return RedisCommand(["SELECT", String(db)])
        case .checkPrimary: return RedisCommand(["ROLE"])
        }
    }

    private func becomeReady() {
        let id = attemptID
        onEvent?(.ready)
        onReady?(self)
        // Release the commands that waited, in order, unless onReady changed things.
        while machine.isReady, id == attemptID, let next = waiting.popFirst() {
            write(next.command, .command(next.completion, next.inPlace), allowanceMs: next.allowanceMs)
        }
    }

    private func closeTransport() {
        attemptID += 1
        stream?.close()
        stream = nil
        reader = nil   // a read in progress holds its own reference until it stops
    }

    private func scheduleReconnect(_ reconnect: Reconnect) {
        switch reconnect {
        case .afterBackoff(let attempt):
            reconnectTimer.schedule(afterMs: config.backoff.delayMs(attempt: attempt, unit: random()))
        case .now:
            reconnectTimer.schedule(afterMs: 0)
        }
    }

    /// Lets go of the reference the connection holds on itself: at once, or on the next loop
    /// turn when inside one of its callbacks (the caller up the stack may be this object).
    private func letGo() {
        guard let held = keepAlive else { return }
        keepAlive = nil
        guard callbackDepth > 0 else {
            held.release()
            return
        }
        var now = timeval(tv_sec: 0, tv_usec: 0)
        event_base_once(loop.base, -1, Int16(EV_TIMEOUT), { _, _, arg in
            Unmanaged<RedisConnection>.fromOpaque(arg!).release()
        }, held.toOpaque(), &now)
    }

    /// Runs `body` as a callback of this connection.
    @inline(__always)
    private func inCallback(_ body: () -> Void) {
        callbackDepth += 1
        body()
        callbackDepth -= 1
    }

    // MARK: Commands and replies

    /// Writes `command` to the transport and remembers what waits for its reply.
    private func write(_ command: RedisCommand, _ kind: Pending.Kind, allowanceMs: Int64) {
        guard let stream else {
            preconditionFailure("redis connection: writing without a transport in state \(machine.state)")
        }
        // Written in place (`RedisCommand.writeRESP`), not formatted by hiredis: its
        // `redisFormatCommandArgv` prints with sprintf, and even its sds formatter, with the
        // argv arrays it needs and a copy of its buffer, cost more per event (callgrind of a
        // whole drain).
        stream.withReservedOutput(capacity: command.respCapacity) { command.writeRESP(to: $0) }
        if pending.isEmpty { headSinceMs = Clock.monotonicMs() }
        pending.push(Pending(kind: kind, allowanceMs: allowanceMs))
        if !watchdog.isScheduled { watchdog.schedule(afterMs: allowanceMs) }
    }

    public func tlsStreamDidConnect(_ stream: TLSStream) {
        inCallback { run(machine.onTransportConnected()) }
    }

    /// Bytes handed to hiredis's reader at a time: what hiredis's own reads take. After each
    /// KiB it parses, the reader moves what it has not parsed yet to the front of its buffer,
    /// so a larger feed moves more bytes; measured with callgrind (20k events end to end), 4, 16
    /// and 64 KiB differ by under 0.5 % of the router's instructions, 16 KiB the fewest.
    static let feedSize = 16 * 1024

    public func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer) {
        guard let reader else { return }
        inCallback {
            var offset = 0
            // A completion may close the transport (close(), or a READONLY answer): stop then.
            while offset < bytes.count, stream === self.stream {
                let end = min(bytes.count, offset + Self.feedSize)
                guard reader.feed(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) else {
                    return run(machine.onTransportClosed(reason: "reply buffer: out of memory"))
                }
                offset = end
                while stream === self.stream {
                    switch reader.next() {
                    case .none:
                        break
                    case .reply(let reply):
                        received(reply)
                        freeReplyObject(reply)
                        continue
                    case .protocolError(let message):
                        return run(machine.onTransportClosed(reason: "protocol error: \(message)"))
                    }
                    break
                }
            }
        }
    }

    public func tlsStreamDidDrainOutput(_ stream: TLSStream) {}

    public func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?) {
        inCallback { run(machine.onTransportClosed(reason: reason ?? "connection closed by the server")) }
    }

    /// One complete reply, valid during the call.
    private func received(_ raw: UnsafeMutableRawPointer) {
        let reply = raw.assumingMemoryBound(to: redisReply.self)
        if subscribed, let (channel, payload) = RedisConnection.message(reply) {
            onMessage?(channel, payload)
            return
        }
        guard let head = pending.popFirst() else {
            return run(machine.onTransportClosed(reason: "protocol error: a reply with no command waiting for it"))
        }
        headSinceMs = Clock.monotonicMs()
        let isError = reply.pointee.type == REDIS_REPLY_ERROR
        switch head.kind {
        case .handshake(let step):
            let answer: Result<RedisReply, RedisError>
            let copy = RedisReply(copying: reply)
            if case .error(let message) = copy { answer = .failure(.server(scrub(message))) } else { answer = .success(copy) }
            run(machine.onHandshakeAnswered(refusal: step.refusal(of: answer)))
        case .command(_, let inPlace?) where !isError:
            inPlace(HiredisReply(reply))  // completes the command itself
        case .command(let completion, _):
            let value = RedisReply(copying: reply)
            if case .error(let message) = value {
                let error = RedisError.server(message)
                if let refusal = error.writeRefusal { writeRefusals[refusal, default: 0] += 1 }
                completion(.failure(error))
                if stream != nil, machine.isReady { run(machine.onErrorReplied(code: error.serverCode)) }
            } else {
                completion(.success(value))
            }
        }
    }

    /// `(channel, payload)` of a pub/sub message (`["message", channel, payload]`), else nil.
    private static func message(_ reply: UnsafePointer<redisReply>) -> (String, String)? {
        let node = HiredisReply(reply)
        guard node.elementCount == 3, node.element(at: 0).string == "message",
              let channel = node.element(at: 1).string, let payload = node.element(at: 2).string else { return nil }
        return (channel, payload)
    }

    private func failPending(with error: RedisError) {
        while let p = pending.popFirst() {
            if case .command(let completion, _) = p.kind { completion(.failure(error)) }
        }
    }

    private func failWaiting(with error: RedisError) {
        // Take them all first: a completion may queue a retry, which waits for the next attempt.
        for w in waiting.takeAll() {
            w.completion(.failure(error))
        }
    }

    // MARK: Texts

    /// Removes the password from a text that came from elsewhere (defence in depth: Redis
    /// does not echo it).
    private func scrub(_ text: String) -> String {
        guard let password = config.url.password, !password.isEmpty else { return text }
        return text.replacing(password, with: "***")
    }
}

/// hiredis's reply parser for one transport: fed the bytes as they arrive, it hands out each
/// complete reply (a `redisReply` tree the caller frees with `freeReplyObject`). Bounded by
/// hiredis (nesting depth); after a protocol error it is not used again.
final class ReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    enum Next {
        /// No complete reply yet.
        case none
        case reply(UnsafeMutableRawPointer)
        /// The bytes are not RESP; the connection must go.
        case protocolError(String)
    }

    init() {
        guard let reader = redisReaderCreate() else { preconditionFailure("redisReaderCreate: out of memory") }
        self.reader = reader
    }

    deinit { redisReaderFree(reader) }

    /// Appends bytes; false when out of memory.
    func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return true }
        return redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) == REDIS_OK
    }

    func next() -> Next {
        var reply: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &reply) == REDIS_OK else {
            let text = withUnsafeBytes(of: reader.pointee.errstr) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            return .protocolError(text.isEmpty ? "unreadable reply" : text)
        }
        return reply.map(Next.reply) ?? .none
    }
}
