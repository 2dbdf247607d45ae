import EventLoop

/// How a client proves itself to APNs.
public enum ApnsAuthentication {
    /// Token auth: an ES256 JWT from `source`, shared by every connection (and every pool) of the key.
    case token(ProviderTokenSource)
    /// Certificate auth: the client certificate is presented during the TLS handshake.
    case certificate(ClientCertificate)
    /// No credential of the pool's own: each `ProviderPost` carries its bearer token (FCM's
    /// OAuth 2.0 access token). APNs pushes sent on such a pool go without `authorization`.
    case perRequest
}

/// Settings of one `ApnsClient` (one connection pool).
public struct ApnsClientSettings {
    /// APNs host (or a simulator's), used for DNS, SNI, certificate checks and `:authority`.
    public var host: String
    /// 443, or 2197 where a firewall blocks other HTTPS.
    public var port: Int
    /// CA file to verify the server with; nil = the system trust store.
    public var caFile: String?
    public var authentication: ApnsAuthentication
    /// Connections kept open.
    public var connections: Int = 2
    /// Upper bound on streams per connection, whatever the server allows.
    public var maxStreamsPerConnection: Int = 1000
    /// A push's two budgets: the time from `send` within which it must be written (else it
    /// fails with `.timeout` without being sent), and the time from its write within which
    /// APNs must answer (else `.timeout`, and it may or may not have been delivered).
    public var requestTimeoutMs: Int64 = 10_000
    /// Pushes waiting for a stream, at most; beyond, `send` fails with `.queueFull` at once.
    public var maxQueued: Int = 10_000
    /// Of the pool's streams, the part one share (an app) may hold once more than one share has
    /// sent through the pool: a flood of slowly answered pushes of one app leaves streams for
    /// the others' (docs/architecture.md, "Scheduling").
    public var mostStreamsPerShare: Double = 0.75
    /// A connect (TCP, TLS, first SETTINGS) not done after this long is abandoned and retried.
    public var connectTimeoutMs: Int64 = 10_000
    /// A connection silent for this long gets a PING (Apple: keep connections, PING when idle).
    public var pingIdleMs: Int64 = 60_000
    /// An unanswered PING older than this marks the connection dead.
    public var pingTimeoutMs: Int64 = 5_000
    /// Reconnect backoff after failed connects: base and cap of the doubling delay.
    public var reconnectBaseMs: Int64 = 100
    public var reconnectCapMs: Int64 = 30_000
    /// The backoff's cap while pushes wait for a connection: a ringing call cannot wait 30 s
    /// for APNs to be tried again, so the first push goes out within about this long of APNs'
    /// return.
    public var reconnectCapWhileWaitingMs: Int64 = 1_000
    /// Who the pool talks to, as its failure reasons name it: `APNs`, or for another
    /// provider's pool `FCM` or `the token endpoint`.
    public var serverName = "APNs"

    public init(host: String, port: Int = ApnsEnvironment.defaultPort, caFile: String? = nil,
                authentication: ApnsAuthentication) {
        self.host = host
        self.port = port
        self.caFile = caFile
        self.authentication = authentication
    }

    /// The delay before the next connect after `failures` failed ones in a row (≥ 1): the
    /// reconnect backoff (base `reconnectBaseMs`, doubling, cap `reconnectCapMs`), capped at
    /// `reconnectCapWhileWaitingMs` while pushes wait. `unit` is a random number in [0, 1).
    ///
    /// | failures | 1 | 2 | 3 | 4 | 5 | 6 | … | 10+ |
    /// |---|---|---|---|---|---|---|---|---|
    /// | delay, ms (idle) | 50–100 | 100–200 | 200–400 | 400–800 | 800–1,600 | 1,600–3,200 | … | 15,000–30,000 |
    /// | delay, ms (pushes waiting) | 50–100 | 100–200 | 200–400 | 400–800 | 500–1,000 | 500–1,000 | … | 500–1,000 |
    public func reconnectDelayMs(failures: Int, unit: Double, pushesWaiting: Bool) -> Int64 {
        let cap = pushesWaiting ? min(reconnectCapMs, reconnectCapWhileWaitingMs) : reconnectCapMs
        return ReconnectBackoff(baseMs: min(reconnectBaseMs, cap), capMs: cap).delayMs(attempt: max(0, failures - 1), unit: unit)
    }
}

/// A push handed to `ApnsClient.send`, for `withdraw`. Holds the push, not the client.
public struct ApnsPushTicket {
    fileprivate let push: PendingPush

    /// Its completion ran (an answer, a failure, or `withdraw`).
    public var isAnswered: Bool { push.isCompleted }
}

/// Whether a pool reaches APNs, as its connects go: told to `ApnsClient.onReachability`.
public enum ApnsReachability: Equatable, Sendable {
    /// A connect failed while no connection of the pool was up: `failures` in a row, the pool
    /// unreachable for `unreachableForMs` so far (0 at the first).
    case connectFailed(reason: String, failures: Int, unreachableForMs: Int64)
    /// A connection is up again after `afterMs` unreachable and `failures` failed connects.
    case reachableAgain(afterMs: Int64, failures: Int)
}

/// Counters of one client, for metrics and tests.
public struct ApnsClientStats: Equatable, Sendable {
    public var sent = 0
    public var answered = 0
    public var timeouts = 0
    public var lost = 0
    /// Pushes resent because no server processed them (REFUSED_STREAM, GOAWAY).
    public var resentUnprocessed = 0
    /// Pushes resent after 403 ExpiredProviderToken with a new token.
    public var resentAfterTokenRenewal = 0
    public var connectionsOpened = 0
    public var connectFailures = 0
    public var goaways = 0
    public var deadConnections = 0
    public var queueFullRejections = 0
    /// Pushes whose time to be written ran out in the queue: failed unsent (also in `timeouts`).
    public var expiredUnsent = 0
    /// Most pushes ever in flight at once, across connections.
    public var peakInFlight = 0
    /// Highest MAX_CONCURRENT_STREAMS any connection announced.
    public var peakAnnouncedStreams = 0
}

/// A client for APNs' HTTP/2 provider API: one pool of connections for one credential and one
/// environment. The same pool carries another provider's requests (`ProviderPost`: FCM's
/// messages and token exchanges, docs/architecture.md "FCM") with the same queue, budgets,
/// resends and timeouts; such a pool has `.perRequest` authentication.
///
/// Lifecycle: create it on the loop, call `send` as often as needed (connections open on the
/// first send), and `close()` it when done. Loop-owned: every method runs on the loop thread,
/// and completions run there too. No push is left hanging: each `send` gets exactly one
/// completion, an answer from APNs or an `ApnsClientError`, within its two budgets of
/// `requestTimeoutMs` (one to be written, one to be answered).
/// A rejection (any non-200) is an answer, not an error.
public final class ApnsClient: ApnsConnectionDelegate {
    public let settings: ApnsClientSettings
    private let loop: EventLoop
    private let tls: TLSContext
    private var connections: [ApnsConnection] = []
    private var nextConnectionID = 0
    private var queue = PushQueue()
    /// Streams in use per share (`mostStreamsPerShare`).
    private let streamsByShare = StreamsByShare()
    private var consecutiveConnectFailures = 0
    private var lastConnectError: String?
    /// Monotonic ms of the first failed connect since a connection was last up; nil while
    /// APNs is reachable (or not tried yet).
    public private(set) var unreachableSinceMs: Int64?
    /// The last connect failure's reason while unreachable.
    public var unreachableReason: String? { unreachableSinceMs == nil ? nil : lastConnectError }
    /// Monotonic ms at which the pending reconnect fires.
    private var reconnectDueMs: Int64 = 0
    /// Told about connect failures and the return of APNs (for the log).
    public var onReachability: ((ApnsReachability) -> Void)?
    private var reconnectTimer: LoopTimer!
    private var sweepTimer: LoopTimer!
    private var closed = false
    private var dispatching = false
    /// True while a batch of answers is completed: `send` queues and the batch dispatches.
    private var deferringDispatch = false
    public private(set) var stats = ApnsClientStats()
    /// `settings.authentication`'s token source, read once: matching the enum per push
    /// copied it (a retain and release each time).
    private let tokenSource: ProviderTokenSource?

    /// Prepares the pool; opens nothing yet. Throws when the TLS setup fails (CA file or
    /// client certificate unreadable).
    public init(loop: EventLoop, settings: ApnsClientSettings) throws(TLSError) {
        self.loop = loop
        self.settings = settings
        var certificate: ClientCertificate?
        if case let .certificate(c) = settings.authentication { certificate = c }
        if case let .token(source) = settings.authentication { tokenSource = source } else { tokenSource = nil }
        tls = try TLSContext.client(caFile: settings.caFile, certificate: certificate)
        reconnectTimer = LoopTimer(loop: loop) { [unowned self] in self.ensureConnections() }
        sweepTimer = LoopTimer(loop: loop) { [unowned self] in self.sweep() }
    }

    /// Pushes waiting for a stream.
    public var queuedCount: Int { queue.count }
    /// Pushes of one share (`send`'s `share`: an app) waiting for a stream while the pool is
    /// reachable; 0 while it is not (they wait for APNs' return, not for streams).
    public func waitingForStreams(share: Int) -> Int { unreachableSinceMs == nil ? queue.count(share: share) : 0 }
    /// Pushes written and waiting for APNs' answer.
    public var inFlightCount: Int { connections.reduce(0) { $0 + $1.inFlight } }
    /// Connections that have exchanged SETTINGS and accept streams.
    public var activeConnections: Int { connections.filter { $0.state == .active }.count }
    /// Open connections by state: `connecting` (TCP/TLS), `awaiting_settings`, `active`,
    /// `going_away` (GOAWAY received, finishing its streams). For metrics.
    public var connectionsByState: [String: Int] {
        var counts = ["connecting": 0, "awaiting_settings": 0, "active": 0, "going_away": 0]
        for c in connections {
            switch c.state {
            case .connecting: counts["connecting"]! += 1
            case .awaitingSettings: counts["awaiting_settings"]! += 1
            case .active: counts["active"]! += 1
            case .goingAway: counts["going_away"]! += 1
            case .closed: break
            }
        }
        return counts
    }

    /// Sends `notification`; `completion` runs once on the loop with APNs' answer or the
    /// reason there was none. `writeByUnixMs` (unix ms) ends its time to be written earlier
    /// than the request timeout: the deadline of a VoIP push's call, after which it must never
    /// be sent. The ticket lets the caller take the push back while it is not written
    /// (`withdraw`). `lane` and `share` place it in the queue (`PushQueue`): lanes in order,
    /// shares (the caller's tenants, small numbers from 0) in turns within a lane.
    @discardableResult
    public func send(_ notification: PushNotification, writeByUnixMs: Int64? = nil, lane: PushLane = .live, share: Int = 0,
                     completion: @escaping (Result<PushNotificationResponse, ApnsClientError>) -> Void) -> ApnsPushTicket? {
        loop.assertInLoop()
        guard let (writeBy, now) = admit(failing: { completion(.failure($0)) }, writeByUnixMs: writeByUnixMs) else { return nil }
        return enqueue(PendingPush(notification, writeByMs: writeBy, lane: lane, share: share, completion: completion), now: now)
    }

    /// Sends another provider's request (`ProviderPost`) on this pool, with the same queue,
    /// budgets, resends and timeouts as a push; `completion` runs once with the server's
    /// answer (any status) or the reason there was none.
    @discardableResult
    public func send(_ post: ProviderPost, writeByUnixMs: Int64? = nil,
                     completion: @escaping (Result<ProviderPostAnswer, ApnsClientError>) -> Void) -> ApnsPushTicket? {
        loop.assertInLoop()
        guard let (writeBy, now) = admit(failing: { completion(.failure($0)) }, writeByUnixMs: writeByUnixMs) else { return nil }
        return enqueue(PendingPush(post, writeByMs: writeBy, completion: completion), now: now)
    }

    /// The monotonic ms by which a new request must be written and the monotonic now, or nil
    /// after failing it (the pool closed, or its queue full).
    private func admit(failing fail: (ApnsClientError) -> Void, writeByUnixMs: Int64?) -> (Int64, Int64)? {
        guard !closed else {
            fail(.clientClosed)
            return nil
        }
        guard queue.count < settings.maxQueued else {
            stats.queueFullRejections += 1
            fail(.queueFull)
            return nil
        }
        let now = Clock.monotonicMs()
        var writeBy = now + settings.requestTimeoutMs
        if let writeByUnixMs { writeBy = min(writeBy, now + (writeByUnixMs - Clock.unixMs())) }
        return (writeBy, now)
    }

    private func enqueue(_ push: PendingPush, now: Int64) -> ApnsPushTicket {
        streamsByShare.note(push.share)
        let wasWaiting = !queue.isEmpty
        queue.append(push)
        if !sweepTimer.isScheduled { sweepTimer.schedule(afterMs: sweepIntervalMs) }
        if !wasWaiting { pushesStartedWaiting(now: now) }
        ensureConnections()
        if !deferringDispatch { dispatch() }
        return ApnsPushTicket(push: push)
    }

    /// Takes back a push that is still waiting to be written: its completion runs at once, before
    /// this returns, with `.withdrawn`, and nothing of it ever reaches APNs. False when it was
    /// written already (its HEADERS are on a stream: APNs may have it, and its answer comes as
    /// usual) or has its completion already.
    @discardableResult
    public func withdraw(_ ticket: ApnsPushTicket) -> Bool {
        loop.assertInLoop()
        let push = ticket.push
        guard !push.isCompleted, push.streamID == 0, !push.headersSent else { return false }
        // The queue drops completed pushes as it reaches them (`dispatch`, `sweep`).
        push.fail(.withdrawn)
        return true
    }

    /// A push waits while the pool backs off from failed connects: bring the next connect
    /// forward to the cap for waiting pushes.
    private func pushesStartedWaiting(now: Int64) {
        guard reconnectTimer.isScheduled, reconnectDueMs - now > settings.reconnectCapWhileWaitingMs else { return }
        let delay = settings.reconnectDelayMs(failures: consecutiveConnectFailures, unit: Double.random(in: 0..<1),
                                                   pushesWaiting: true)
        reconnectDueMs = now + delay
        reconnectTimer.schedule(afterMs: delay)
    }

    /// Opens the pool's connections now instead of on the first send.
    public func connect() {
        ensureConnections()
        if !sweepTimer.isScheduled { sweepTimer.schedule(afterMs: sweepIntervalMs) }
    }

    /// Fails every queued and in-flight push with `.clientClosed` and closes the connections.
    public func close() {
        guard !closed else { return }
        closed = true
        reconnectTimer.close()
        sweepTimer.close()
        for c in connections { c.close(reason: "client closed", graceful: true) }
        connections.removeAll()
        while let push = queue.popFirst() { push.fail(.clientClosed) }
    }

    // MARK: Dispatch

    private var sweepIntervalMs: Int64 { max(10, min(250, settings.requestTimeoutMs / 4)) }

    /// Moves queued pushes onto free streams, spreading them over connections, then flushes
    /// each connection once so many requests share TLS records.
    private func dispatch() {
        // Called after every answer even when nothing waits (the answer's completion usually
        // sent the next push already): return before any work.
        guard !queue.isEmpty, !dispatching, !closed else { return }
        dispatching = true
        defer { dispatching = false }
        let now = Clock.monotonicMs()
        var sentAny = false
        while !queue.isEmpty {
            var submitted = 0
            let ready = connections.reduce(0) { $0 + ($1.freeStreams > 0 ? 1 : 0) }
            guard ready > 0 else { break }
            // A fair share per connection per round keeps every connection busy under load.
            let share = max(1, (queue.count + ready - 1) / ready)
            // With more than one share (app) on the pool, none holds more than its part of the streams.
            let shareCap = streamsByShare.seen > 1 ? max(1, Int(Double(streamCapacity) * settings.mostStreamsPerShare)) : Int.max
            for c in connections {
                var quota = min(share, c.freeStreams)
                guard quota > 0 else { continue }
                while quota > 0, let push = nextPush(shareCap: shareCap) {
                    if push.isCompleted { continue }
                    // Its budget is spent: fail it unsent, so a retry cannot make it arrive twice.
                    if push.writeByMs <= now {
                        expireUnsent(push)
                        continue
                    }
                    guard let token = bearerToken(for: push) else { continue }
                    let opened: Bool
                    do {
                        opened = try c.submit(push, bearerToken: token.isEmpty ? nil : token)
                    } catch {
                        push.fail(.unsendable(error.description))
                        continue
                    }
                    guard opened else {
                        queue.prepend(push)
                        break
                    }
                    // The answer's own time starts now, whatever the push waited in the queue.
                    push.deadlineMs = now + settings.requestTimeoutMs
                    push.holdStream(in: streamsByShare)
                    stats.sent += 1
                    submitted += 1
                    quota -= 1
                }
            }
            if submitted == 0 { break }
            sentAny = true
        }
        guard sentAny else { return }
        // Connections with new streams flag themselves (no per-dispatch array of them).
        for c in connections where c.hasUnflushedRequests { c.flush() }
        let inFlight = inFlightCount
        if inFlight > stats.peakInFlight { stats.peakInFlight = inFlight }
    }

    /// The pool's streams: in use and free, over the connections that take streams.
    private var streamCapacity: Int { connections.reduce(0) { $0 + ($1.freeStreams > 0 ? $1.inFlight + $1.freeStreams : $1.inFlight) } }

    /// The next queued push whose share holds fewer than `shareCap` streams (any, when
    /// `shareCap` is `Int.max`: one share, the common case, pays nothing for the check).
    private func nextPush(shareCap: Int) -> PendingPush? {
        if shareCap == .max { return queue.popFirst() }
        let held = streamsByShare.held
        return queue.popFirst { held[$0] < shareCap }
    }

    /// Fails a push whose time to be written ran out while it waited: a timeout, or the reason
    /// connects fail when they do.
    private func expireUnsent(_ push: PendingPush) {
        stats.timeouts += 1
        stats.expiredUnsent += 1
        push.fail(lastConnectError.map { .connectionFailed($0) } ?? .timeout)
    }

    /// The JWT for a push's `authorization` ("" for certificate auth and for a
    /// `ProviderPost`, which carries its own), or nil after failing the push because no token
    /// could be signed.
    private func bearerToken(for push: PendingPush) -> String? {
        guard let source = tokenSource, !push.isPost else { return "" }
        do {
            return try source.currentToken()
        } catch {
            push.fail(.credentialUnusable(error.description))
            return nil
        }
    }

    // MARK: Connections

    /// Keeps `settings.connections` live connections, honouring the reconnect backoff.
    private func ensureConnections() {
        guard !closed, !reconnectTimer.isScheduled else { return }
        // Runs on every send: count without building arrays, and rebuild only when needed.
        var live = 0
        var anyClosed = false
        for c in connections {
            if c.state.isLive { live += 1 } else if c.state == .closed { anyClosed = true }
        }
        if live >= settings.connections && !anyClosed { return }
        if anyClosed { connections.removeAll { $0.state == .closed } }
        for _ in live..<max(live, settings.connections) {
            nextConnectionID += 1
            let c = ApnsConnection(id: nextConnectionID, delegate: self, authority: settings.host,
                                   streamCap: settings.maxStreamsPerConnection, serverName: settings.serverName)
            connections.append(c)
            stats.connectionsOpened += 1
            c.start(loop: loop, tls: tls, host: settings.host, port: settings.port)
        }
    }

    func connectionHasCapacity(_ connection: ApnsConnection) {
        if connection.peakAnnouncedStreams > stats.peakAnnouncedStreams {
            stats.peakAnnouncedStreams = connection.peakAnnouncedStreams
        }
        if let since = unreachableSinceMs {
            unreachableSinceMs = nil
            onReachability?(.reachableAgain(afterMs: Clock.monotonicMs() - since, failures: consecutiveConnectFailures))
        }
        consecutiveConnectFailures = 0
        lastConnectError = nil
        dispatch()
    }

    func connection(_ connection: ApnsConnection, answered batch: [PendingPush]) {
        // Completions usually send the next push. Their sends queue while the batch runs and
        // go out every `refillEvery` answers: one dispatch and one nghttp2 flush for several
        // requests instead of one each, yet early enough that the first requests are on the
        // wire while later answers are still being completed (TLSStream writes mid-batch).
        let outer = deferringDispatch
        deferringDispatch = true
        var sinceDispatch = 0
        for push in batch {
            if push.status == 403, let source = tokenSource, !push.isPost, push.providerTokenResends < 2,
               push.response().reason == .expiredProviderToken {
                // Not an attempt (docs/protocol.md): sign a new token and send again at once.
                push.providerTokenResends += 1
                stats.resentAfterTokenRenewal += 1
                _ = try? source.providerTokenExpired()
                push.resetForResend()
                queue.prepend(push)
            } else {
                stats.answered += 1
                push.answer()
            }
            sinceDispatch += 1
            if sinceDispatch >= Self.refillEvery {
                sinceDispatch = 0
                deferringDispatch = outer
                dispatch()
                deferringDispatch = true
            }
        }
        deferringDispatch = outer
        dispatch()
    }

    /// Answers completed between two dispatches of the pushes their completions sent.
    /// 1×100 against nghttpd, callgrind, client instructions per request: 1 (a dispatch and a
    /// flush per answer) 33.1k, 8: 31.3k, 100 (once per batch) 31.6k; and once per batch
    /// holds every new request back until the whole batch of answers is completed.
    static let refillEvery = 8

    func connection(_ connection: ApnsConnection, returned pushes: [PendingPush]) {
        for push in pushes.reversed() where !push.isCompleted {
            push.unprocessedResends += 1
            stats.resentUnprocessed += 1
            push.resetForResend()
            queue.prepend(push)
        }
        ensureConnections()
        dispatch()
    }

    func connection(_ connection: ApnsConnection, lost pushes: [PendingPush], reason: String) {
        for push in pushes {
            stats.lost += 1
            push.fail(closed ? .clientClosed : .connectionLost(reason))
        }
    }

    func connectionGoingAway(_ connection: ApnsConnection, reason: String?) {
        stats.goaways += 1
        ensureConnections()
    }

    func connectionClosed(_ connection: ApnsConnection, reason: String?, wasReady: Bool) {
        connections.removeAll { $0 === connection }
        guard !closed else { return }
        if !wasReady {
            stats.connectFailures += 1
            consecutiveConnectFailures += 1
            lastConnectError = reason
            let now = Clock.monotonicMs()
            if activeConnections == 0 {
                if unreachableSinceMs == nil { unreachableSinceMs = now }
                onReachability?(.connectFailed(reason: reason ?? "connect failed", failures: consecutiveConnectFailures,
                                               unreachableForMs: now - (unreachableSinceMs ?? now)))
            }
            let delay = settings.reconnectDelayMs(failures: consecutiveConnectFailures, unit: Double.random(in: 0..<1),
                                                       pushesWaiting: !queue.isEmpty)
            reconnectDueMs = now + delay
            reconnectTimer.schedule(afterMs: delay)
        } else {
            ensureConnections()
        }
        dispatch()
    }

    // MARK: Timeouts and keep-alive

    /// Fails pushes past their deadline, PINGs idle connections and drops dead ones.
    /// Runs every `sweepIntervalMs` while anything is pending or connections are open.
    private func sweep() {
        guard !closed else { return }
        let now = Clock.monotonicMs()
        // Queued pushes: each share's FIFO is in deadline order except for resends, so scan the
        // queue whole but only when a share's first push is due (cheap in the common case).
        if queue.mayHoldExpired(nowMs: now) {
            let expired = queue.removeAll { $0.isCompleted || $0.deadlineMs <= now }
            for push in expired where !push.isCompleted { expireUnsent(push) }
        }
        for c in connections where c.isConnecting && now - c.startedMs > settings.connectTimeoutMs {
            c.abandonConnect(reason: "no TLS handshake and SETTINGS within \(settings.connectTimeoutMs) ms")
        }
        for c in connections {
            if let sent = c.pingSentMs, now - sent > settings.pingTimeoutMs {
                stats.deadConnections += 1
                c.close(reason: "no PING answer within \(settings.pingTimeoutMs) ms", graceful: false)
                connectionClosed(c, reason: "dead", wasReady: true)
                continue
            }
            var overdue = false
            c.forEachInFlight { push in
                if push.deadlineMs <= now { overdue = true }
            }
            if overdue {
                var expired: [PendingPush] = []
                c.forEachInFlight { if $0.deadlineMs <= now { expired.append($0) } }
                for push in expired {
                    c.cancel(push)
                    stats.timeouts += 1
                    push.fail(.timeout)
                }
                c.ping(nowMs: now)  // a silent server may be a dead one
                c.flush()
            } else if now - c.lastReadMs > settings.pingIdleMs {
                c.ping(nowMs: now)
            }
        }
        dispatch()
        sweepTimer.schedule(afterMs: sweepIntervalMs)
    }
}
