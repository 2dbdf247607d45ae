extension RedisConnection {
    /// One step of the handshake that follows every connect, in the order sent.
    enum HandshakeStep: Equatable, Sendable {
        /// `AUTH [user] password`.
        case authenticate(user: String?)
        /// `CLIENT SETNAME name` (shows in `CLIENT LIST`).
        case setName
        /// `SELECT db`.
        case selectDatabase(Int)
        /// `ROLE`, which must answer `master`: the address a sentinel gave may already be a
        /// replica (a failover in progress, or a sentinel that has not heard of it yet).
        case checkPrimary

        /// The steps of a connection, in order: AUTH when the URL has a password, SETNAME when
        /// named, SELECT when db ≠ 0, ROLE when the address came from sentinels.
        static func steps(url: RedisURL, named: Bool, viaSentinels: Bool) -> [HandshakeStep] {
            var steps: [HandshakeStep] = []
            if url.password != nil { steps.append(.authenticate(user: url.user)) }
            if named { steps.append(.setName) }
            if url.db != 0 { steps.append(.selectDatabase(url.db)) }
            if viaSentinels { steps.append(.checkPrimary) }
            return steps
        }

        /// What the step is, for messages.
        var summary: String {
            switch self {
            case .authenticate(let user?): return "AUTH as user '\(user)'"
            case .authenticate(nil): return "AUTH"
            case .setName: return "CLIENT SETNAME"
            case .selectDatabase(let db): return "SELECT \(db)"
            case .checkPrimary: return "ROLE"
            }
        }

        /// Why Redis's answer to this step refuses the connection; nil when it accepts it.
        /// An error reply always refuses; `ROLE` refuses anything but a primary.
        func refusal(of answer: Result<RedisReply, RedisError>) -> String? {
            switch (self, answer) {
            case (_, .failure(let error)):
                if case .server(let message) = error { return message }
                return error.description
            case (.checkPrimary, .success(let reply)):
                let role = reply.array?.first?.string ?? "\(reply)"
                return role == "master" ? nil : "it is a \(role == "slave" ? "replica" : role), not the primary"
            case (.authenticate, .success), (.setName, .success), (.selectDatabase, .success):
                return nil
            }
        }
    }

    /// When a connection that failed tries again.
    enum Reconnect: Equatable, Sendable {
        /// After `ReconnectBackoff.delayMs(attempt:)`.
        case afterBackoff(attempt: Int)
        /// On the next loop turn (the sentinels named a new primary: no reason to wait).
        case now
    }

    /// The life of one `RedisConnection`, as a value: each event of the connection is a
    /// `mutating func on…` that moves the state and returns what the connection must do, and
    /// does no I/O itself (`RedisConnection.run(_:)` performs the action, in one place).
    ///
    /// ```
    /// idle ─start─▶ locating ─located─▶ connecting ─transportConnected─▶ handshaking ─(last step answered)─▶ ready
    ///                  ▲ │ locateFailed        │ transportClosed, watchdog        │ refused, transportClosed, watchdog    │ transportClosed, watchdog,
    ///                  │ ▼                     ▼                                  ▼                                        ▼ READONLY/LOADING, primaryMoved
    ///                  └── backingOff ◀── failAttempt (waiting commands fail) ◀────┘        dropConnection (only in-flight fail) ─┘
    /// any state ─closeRequested─▶ closed (final)
    /// ```
    ///
    /// Switches have no `default:`: a new state or event must be decided everywhere. Pairs that
    /// cannot happen (the transport reporting while none is open) stop the process with the
    /// state and the event; races the loop allows (a timer that fires after its reason went
    /// away, a sentinel's answer after `close()`) are commented and return `.none`.
    struct StateMachine {
        /// One connection attempt.
        struct Attempt: Equatable, Sendable {
            init(startedMs: Int64, host: RedisURL.Endpoint? = nil, target: String? = nil) {
                self.startedMs = startedMs
                self.host = host
                self.target = target
            }

            /// Monotonic ms when it started: the watchdog gives it `watchdogMs` to become ready.
            var startedMs: Int64
            /// Where it goes; nil while the address is being located.
            var host: RedisURL.Endpoint?
            /// The same, redacted, for messages.
            var target: String?
        }

        enum State: Equatable, Sendable {
            /// Created; `start` not called yet. Commands wait.
            case idle
            /// Finding the address: asking the sentinels (a fixed address is found at once).
            case locating(Attempt)
            /// Opening the transport (TCP or unix socket, then TLS).
            case connecting(Attempt)
            /// Connected; the steps not answered yet, in the order sent (never empty).
            case handshaking(Attempt, remaining: [HandshakeStep])
            /// Handshake done: commands go out at once.
            case ready(host: RedisURL.Endpoint, target: String)
            /// Waiting for the reconnect timer. Commands wait.
            case backingOff
            /// Closed by its owner; final. Sends fail `.closed`.
            case closed
        }

        /// What to do.
        enum Action: Equatable, Sendable {
            case none
            /// Find the address (`onLocated` or `onLocateFailed` follows) and arm the watchdog for
            /// the attempt.
            case locate(watchdogMs: Int64)
            /// Open the transport to this address (`onTransportConnected` or `onTransportClosed`
            /// follows).
            case openTransport(host: RedisURL.Endpoint)
            /// Send these handshake commands (each answer: `onHandshakeAnswered`).
            case sendHandshake([HandshakeStep])
            /// Report `.ready`, run `onReady`, then send the commands that waited, in order.
            case becomeReady
            /// The attempt failed: close the transport, complete commands in flight
            /// `.disconnected` and waiting ones `.connectFailed(reason)`, report
            /// `.connectFailed(reason)`, reconnect as told.
            case failAttempt(reason: String, reconnect: Reconnect)
            /// A ready connection is gone: close the transport, complete commands in flight
            /// `.disconnected` (waiting ones keep waiting), report `.lost(reason)`, reconnect
            /// as told.
            case dropConnection(reason: String, reconnect: Reconnect)
            /// Close the transport of an attempt that is no longer wanted and locate again at
            /// once (waiting commands keep waiting).
            case restartAttempt
            /// Arm the watchdog to fire after this many ms.
            case armWatchdog(afterMs: Int64)
            /// Closed for good: close the transport, complete commands in flight
            /// `.disconnected` and waiting ones `.closed`, free the timers.
            case shutDown
        }

        /// What `send` does with a command.
        enum SendAction: Equatable, Sendable {
            /// Write it now.
            case write
            /// Queue it until the connection is ready.
            case wait
            /// Complete it at once with this error.
            case refuse(RedisError)
        }

        private(set) var state: State = .idle
        /// Counters for metrics (see `RedisConnection.Stats`).
        private(set) var stats = Stats()
        /// The last problem, redacted; nil once ready again.
        private(set) var lastProblem: String?
        /// Failed attempts since the last ready: the backoff's attempt number.
        private var failures = 0

        let watchdogMs: Int64
        /// Whether addresses come from sentinels: the handshake checks `ROLE`, and `READONLY`
        /// or `LOADING` answers send the connection back to the sentinels.
        let viaSentinels: Bool
        /// The handshake steps of every attempt.
        let handshake: [HandshakeStep]

        init(watchdogMs: Int64, viaSentinels: Bool, handshake: [HandshakeStep]) {
            precondition(watchdogMs > 0, "watchdogMs must be positive")
            self.watchdogMs = watchdogMs
            self.viaSentinels = viaSentinels
            self.handshake = handshake
        }

        var isReady: Bool {
            if case .ready = state { return true }
            return false
        }

        /// Where a ready connection is connected (for a connection through sentinels, the
        /// primary they named); nil otherwise.
        var readyHost: RedisURL.Endpoint? {
            if case .ready(let host, _) = state { return host }
            return nil
        }

        // MARK: Events

        /// The owner calls `start()`. Starting twice, or after `close()`, does nothing.
        mutating func onStart(nowMs: Int64) -> Action {
            switch state {
            case .idle:
                return beginAttempt(nowMs: nowMs)
            case .locating, .connecting, .handshaking, .ready, .backingOff, .closed:
                return .none
            }
        }

        /// The owner sends a command; `waiting` commands wait already, at most `maxQueued`.
        func onSend(waiting: Int, maxQueued: Int) -> SendAction {
            switch state {
            case .ready:
                return .write
            case .closed:
                return .refuse(.closed)
            case .idle, .locating, .connecting, .handshaking, .backingOff:
                return waiting < maxQueued ? .wait : .refuse(.disconnected)
            }
        }

        /// The address to connect to is known; `target` describes it (redacted).
        mutating func onLocated(_ host: RedisURL.Endpoint, target: String) -> Action {
            switch state {
            case .locating(var attempt):
                attempt.host = host
                attempt.target = target
                state = .connecting(attempt)
                return .openTransport(host: host)
            case .closed:
                return .none  // closed while the sentinels were asked: their answer comes anyway
            case .idle, .connecting, .handshaking, .ready, .backingOff:
                preconditionFailure("redis connection: located in state \(state)")
            }
        }

        /// No address: no sentinel answered (the reason says why, per sentinel).
        mutating func onLocateFailed(reason: String) -> Action {
            switch state {
            case .locating:
                return failAttempt(reason)
            case .closed:
                return .none  // as in `onLocated`
            case .idle, .connecting, .handshaking, .ready, .backingOff:
                preconditionFailure("redis connection: locateFailed in state \(state)")
            }
        }

        /// The transport is open (TLS handshake done, for TLS).
        mutating func onTransportConnected() -> Action {
            switch state {
            case .connecting(let attempt):
                guard !handshake.isEmpty else { return becomeReady(attempt) }
                state = .handshaking(attempt, remaining: handshake)
                return .sendHandshake(handshake)
            case .idle, .locating, .handshaking, .ready, .backingOff, .closed:
                preconditionFailure("redis connection: transportConnected in state \(state)")
            }
        }

        /// Redis answered the first handshake step not answered yet; `refusal` is nil when the
        /// answer accepts the connection (`HandshakeStep.refusal(of:)`).
        mutating func onHandshakeAnswered(refusal: String?) -> Action {
            switch state {
            case .handshaking(let attempt, var remaining):
                let step = remaining.removeFirst()
                if let refusal {
                    return failAttempt("\(step.summary) refused by \(attempt.target ?? "redis"): \(refusal)")
                }
                if remaining.isEmpty { return becomeReady(attempt) }
                state = .handshaking(attempt, remaining: remaining)
                return .none
            case .idle, .locating, .connecting, .ready, .backingOff, .closed:
                preconditionFailure("redis connection: handshakeAnswered in state \(state)")
            }
        }

        /// The transport closed by itself: the server closed it, an I/O or TLS error, or a
        /// reply Redis's protocol does not allow. `reason` says which.
        mutating func onTransportClosed(reason: String) -> Action {
            switch state {
            case .connecting(let attempt), .handshaking(let attempt, _):
                return failAttempt("\(attempt.target ?? "redis"): \(reason)")
            case .ready(_, let target):
                return dropConnection("\(target): \(reason)", reconnect: .afterBackoff(attempt: 0))
            case .idle, .locating, .backingOff, .closed:
                // The connection closes its transport whenever it leaves the states above, and a
                // closed transport never reports again.
                preconditionFailure("redis connection: transportClosed in state \(state)")
            }
        }

        /// Redis answered a command with an error whose code (first word) is `code`.
        /// Through sentinels, `READONLY` and `LOADING` mean the address is no longer the
        /// primary (or is still loading after a restart): ask the sentinels again.
        mutating func onErrorReplied(code: Substring?) -> Action {
            switch state {
            case .ready(_, let target):
                guard viaSentinels, let code, code == "READONLY" || code == "LOADING" else { return .none }
                return dropConnection("\(target) answered \(code): asking the sentinels for the primary again",
                                      reconnect: .afterBackoff(attempt: 0))
            case .idle, .locating, .connecting, .handshaking, .backingOff, .closed:
                preconditionFailure("redis connection: errorReplied in state \(state)")
            }
        }

        /// The watchdog fired. `oldestUnanswered` is when the oldest command in flight was
        /// sent (or became the oldest) and how long it may wait; nil when none is in flight.
        mutating func onWatchdogFired(nowMs: Int64, oldestUnanswered: (sinceMs: Int64, allowanceMs: Int64)?) -> Action {
            switch state {
            case .locating(let attempt), .connecting(let attempt), .handshaking(let attempt, _):
                let deadline = attempt.startedMs + watchdogMs
                guard nowMs >= deadline else { return .armWatchdog(afterMs: deadline - nowMs) }
                stats.watchdogFirings += 1
                return failAttempt("\(attempt.target ?? "redis"): not ready within \(watchdogMs) ms")
            case .ready(_, let target):
                guard let oldest = oldestUnanswered else { return .none }
                let deadline = oldest.sinceMs + oldest.allowanceMs
                guard nowMs >= deadline else { return .armWatchdog(afterMs: deadline - nowMs) }
                stats.watchdogFirings += 1
                return dropConnection("\(target): no reply within \(oldest.allowanceMs) ms (watchdog)",
                                      reconnect: .afterBackoff(attempt: 0))
            case .idle, .backingOff, .closed:
                return .none  // armed for an attempt or a command that is gone since
            }
        }

        /// The reconnect timer fired.
        mutating func onBackoffElapsed(nowMs: Int64) -> Action {
            switch state {
            case .backingOff:
                return beginAttempt(nowMs: nowMs)
            case .idle, .locating, .connecting, .handshaking, .ready, .closed:
                return .none  // armed before `onPrimaryMoved` started the attempt early, or before close
            }
        }

        /// The sentinels announced a new primary at `host` (`+switch-master`). A connection
        /// there already (it asked after the failover) stays.
        mutating func onPrimaryMoved(to host: RedisURL.Endpoint, nowMs: Int64) -> Action {
            switch state {
            case .ready(let current, let target):
                guard current != host else { return .none }
                return dropConnection("\(target): the sentinels announced a new primary", reconnect: .now)
            case .connecting(let attempt), .handshaking(let attempt, _):
                guard attempt.host != host else { return .none }
                state = .locating(Attempt(startedMs: nowMs))
                return .restartAttempt
            case .backingOff:
                return beginAttempt(nowMs: nowMs)
            case .locating, .idle, .closed:
                return .none  // the answer being awaited (or the first one) is the new address
            }
        }

        /// The owner calls `close()`.
        mutating func onCloseRequested() -> Action {
            switch state {
            case .closed:
                return .none
            case .idle, .locating, .connecting, .handshaking, .ready, .backingOff:
                state = .closed
                return .shutDown
            }
        }

        // MARK: Transitions shared by several events

        private mutating func beginAttempt(nowMs: Int64) -> Action {
            state = .locating(Attempt(startedMs: nowMs))
            return .locate(watchdogMs: watchdogMs)
        }

        private mutating func becomeReady(_ attempt: Attempt) -> Action {
            guard let host = attempt.host else { preconditionFailure("redis connection: ready without an address") }
            state = .ready(host: host, target: attempt.target ?? "redis")
            failures = 0
            lastProblem = nil
            stats.ready += 1
            return .becomeReady
        }

        private mutating func failAttempt(_ reason: String) -> Action {
            state = .backingOff
            stats.connectFailures += 1
            lastProblem = reason
            defer { failures += 1 }
            return .failAttempt(reason: reason, reconnect: .afterBackoff(attempt: failures))
        }

        private mutating func dropConnection(_ reason: String, reconnect: Reconnect) -> Action {
            state = .backingOff
            stats.lost += 1
            lastProblem = reason
            if case .afterBackoff = reconnect { failures = 1 }
            return .dropConnection(reason: reason, reconnect: reconnect)
        }
    }
}
