import RedisClient

extension RouterRole {
    /// The router role's own life, as a value: registering its consumer name's lease, running
    /// (reading, heart-beating, taking entries over), draining, retired. Each event is a
    /// `mutating func on…` that moves the state and returns what the role must do; it does no
    /// I/O (`RouterRole.run(_:)` performs the action, in one place). The live calls' own lives
    /// are `LiveCallStateMachine`'s (Routing), not this.
    ///
    /// ```
    /// idle ─start─▶ registering ─registered─▶ running ─drain─▶ draining ─(no call left, or the deadline)─▶ retiring ─retired─▶ retired
    ///               │  ▲                                          ▲
    ///   failed, or  │  │ register timer         drain (idle, registering, nameTaken: at once)
    ///   lease held  ▼  │
    ///            (waiting) ─lease renewed while waiting─▶ nameTaken
    /// ```
    ///
    /// Beside the state, and in every state, the sweeps of the process's own pending entries
    /// that are due (`OwnSweeps`): the reading connection may ask for them before the name is
    /// registered, and they run only while running.
    ///
    /// Switches have no `default:`. Pairs that cannot happen (an answer with no step in flight)
    /// stop the process with the state; races the loop allows (a registration answered after a
    /// drain began, a timer that fires after its reason went away) are commented and return
    /// `.none`.
    struct Lifecycle {
        /// How a read is going.
        enum Read: Equatable, Sendable {
            /// No XREADGROUP in flight.
            case idle
            /// An XREADGROUP in flight; `blocks`: it waits up to `blockMs` for entries (false
            /// while calls of the read before wait for it).
            case inFlight(blocks: Bool)
        }

        enum State: Equatable, Sendable {
            /// Created; `start` not called yet.
            case idle
            /// Taking the consumer name's lease. `firstSeen`: the lease's end when another
            /// process's lease was first found on the name (nil until then); `inFlight`: the
            /// register step is in flight (false while the register timer waits).
            case registering(firstSeen: Int64?, inFlight: Bool)
            /// Holding the lease since `registeredAtMs` (monotonic): reading, heart-beating and
            /// taking entries over. `callsAwaitRead`: the last read brought calls that wait for
            /// the next read, so that one must not block.
            case running(registeredAtMs: Int64, read: Read, callsAwaitRead: Bool)
            /// Another live process renewed the name's lease while this one waited: nothing is
            /// read (the owner was told, and stops).
            case nameTaken
            /// Nothing new is read or taken over; the calls in flight carry on until none is
            /// left or `deadlineMs` (monotonic). A read in flight when the drain began still
            /// answers (`read`). `registeredAtMs`: nil when the drain came before the lease.
            case draining(deadlineMs: Int64, registeredAtMs: Int64?, read: Read)
            /// The consumer is being retired (its lease and registry entry removed). A read may
            /// still be in flight (`read`) when the deadline cut the drain short.
            case retiring(registeredAtMs: Int64?, read: Read)
            /// Retired: final.
            case retired
        }

        /// Sweeps of this process's own pending entries (`claimOwnEntries`): how many are still
        /// due (after a reconnect of the reading connection: two; after a failed lookup or
        /// record, or a sweep that filled a page: one), and whether one is in flight (never two).
        struct OwnSweeps: Equatable, Sendable {
            var due = 0
            var inFlight = false
        }

        /// Why the registration waits for the register timer.
        enum RegisterWait: Equatable, Sendable {
            /// An earlier process's lease was just found on the name: said once.
            case leaseFirstSeen
            /// That lease is still there, not renewed.
            case leaseStillHeld
            /// The step failed (logged).
            case failed(RedisError)
        }

        /// What to do.
        enum Action: Equatable, Sendable {
            case none
            /// Send the register step (`onRegistered`, `onLeaseTaken` or `onRegisterFailed`
            /// follows).
            case register
            /// Say why the registration waits (once for a lease, every failure), and arm the
            /// register timer (`onRegisterDue` follows).
            case registerLater(afterMs: Int64, because: RegisterWait)
            /// Another live process holds the name: tell the owner (`onConsumerNameTaken`).
            case reportNameTaken(holder: String?)
            /// The lease is held: send a heartbeat (and arm its timer), arm the claim timer,
            /// read.
            case beginRunning(claimAfterMs: Int64)
            /// Send a heartbeat and arm the heartbeat timer for the next.
            case beat(againAfterMs: Int64)
            /// Send an XREADGROUP (`onReadAnswered` follows), blocking or not.
            case read(blocks: Bool)
            /// No read goes out now: start the calls that waited for one.
            case startCallsAwaitingRead
            /// A read answered: start the calls that waited for it, then read again (`readNext`).
            case readAgain
            /// A read failed: start the calls that waited for it, count and log the error, and
            /// arm the read retry timer.
            case readAgainLater(afterMs: Int64, failure: RedisError)
            /// Read the consumer registry and take entries over (`onClaimRoundEnded` follows);
            /// sweep this process's own entries first when `sweepOwn`.
            case claim(sweepOwn: Bool)
            /// Arm the claim timer.
            case scheduleClaim(afterMs: Int64)
            /// Draining begins: cancel the claim and read retry timers, and look at the calls
            /// left (`onDrainTick`).
            case beginDrain
            /// Look at the calls left again after this many ms.
            case drainTickLater(afterMs: Int64)
            /// Cancel every timer and retire the consumer (`onRetired` follows).
            case retire
            /// Retired: tell whoever waits for the drain.
            case finishDrain
        }

        /// The timing the machine decides with.
        struct Timing: Equatable, Sendable {
            var heartbeatEveryMs: Int64
            var claimEveryMs: Int64
            /// After a failed read, how long before reading again.
            var readRetryMs: Int64 = 200
            /// How often a drain looks at the calls left.
            var drainTickMs: Int64 = 20
        }

        private(set) var state: State = .idle
        private(set) var ownSweeps = OwnSweeps()
        let timing: Timing

        init(timing: Timing) { self.timing = timing }

        // MARK: Queries

        /// The lease was taken by this process (also while draining after it).
        var isRegistered: Bool { registeredAtMs != nil }

        /// Monotonic ms when this process took its consumer name's lease; nil before.
        var registeredAtMs: Int64? {
            switch state {
            case let .running(registeredAtMs, _, _): return registeredAtMs
            case let .draining(_, registeredAtMs, _), let .retiring(registeredAtMs, _): return registeredAtMs
            case .idle, .registering, .nameTaken, .retired: return nil
            }
        }

        /// An XREADGROUP is in flight.
        var isReading: Bool { read != .idle }

        /// An XREADGROUP that does not block is in flight: calls that wait for the read after
        /// theirs wait for its answer (`startAfterRead`).
        var isReadingWithoutBlocking: Bool { read == .inFlight(blocks: false) }

        /// Nothing new is read or taken over any more.
        var isStopping: Bool {
            switch state {
            case .draining, .retiring, .retired: return true
            case .idle, .registering, .running, .nameTaken: return false
            }
        }

        /// Retired: the calls still live were handed over with the consumer name (their entries
        /// left pending for other processes to take over at once), so what becomes of their
        /// pushes here (failures as the process closes its APNs clients) is no longer this
        /// process's to act on.
        var hasHandedOver: Bool {
            if case .retired = state { return true }
            return false
        }

        private var read: Read {
            switch state {
            case let .running(_, read, _), let .draining(_, _, read), let .retiring(_, read): return read
            case .idle, .registering, .nameTaken, .retired: return .idle
            }
        }

        // MARK: Registering

        /// The owner calls `start()`. Starting twice, or after a drain began, does nothing.
        mutating func onStart() -> Action {
            switch state {
            case .idle:
                state = .registering(firstSeen: nil, inFlight: true)
                return .register
            case .registering, .running, .nameTaken, .draining, .retiring, .retired:
                return .none
            }
        }

        /// The register timer fired.
        mutating func onRegisterDue() -> Action {
            switch state {
            case let .registering(firstSeen, false):
                state = .registering(firstSeen: firstSeen, inFlight: true)
                return .register
            case .registering(_, true):
                preconditionFailure("the register timer fired while a register step was in flight")
            case .draining, .retiring, .retired:
                // A drain began while the timer waited: no registration now.
                return .none
            case .idle, .running, .nameTaken:
                preconditionFailure("the register timer fired in \(state)")
            }
        }

        /// The register step took the lease (at monotonic `nowMs`). The entries a previous run
        /// under this name left pending are this process's now: an own sweep is due.
        mutating func onRegistered(nowMs: Int64) -> Action {
            switch state {
            case .registering(_, true):
                state = .running(registeredAtMs: nowMs, read: .idle, callsAwaitRead: false)
                ownSweeps.due = max(ownSweeps.due, 1)
                return .beginRunning(claimAfterMs: timing.claimEveryMs)
            case .draining, .retiring, .retired:
                // A drain began while the step was in flight: nothing is started (the drain
                // retires the consumer).
                return .none
            case .idle, .registering(_, false), .running, .nameTaken:
                preconditionFailure("a register step answered in \(state)")
            }
        }

        /// The register step found another process's live lease on the name, lasting until
        /// `leaseUntil` (the clock of Redis). It is this gateway's previous run, killed less than
        /// a lease ago, or a second gateway with the same name: the first stops renewing and
        /// lapses, the second renews it. So the registration looks again every heartbeat until
        /// the lease lapses (taken) or is renewed (the name is in use: reported, nothing read).
        mutating func onLeaseTaken(holder: String?, leaseUntil: Int64) -> Action {
            switch state {
            case let .registering(firstSeen, true):
                if let firstSeen, leaseUntil > firstSeen {
                    state = .nameTaken
                    return .reportNameTaken(holder: holder)
                }
                state = .registering(firstSeen: firstSeen ?? leaseUntil, inFlight: false)
                return .registerLater(afterMs: timing.heartbeatEveryMs, because: firstSeen == nil ? .leaseFirstSeen : .leaseStillHeld)
            case .draining, .retiring, .retired:
                // A drain began while the step was in flight: the process stops anyway.
                return .none
            case .idle, .registering(_, false), .running, .nameTaken:
                preconditionFailure("a register step answered in \(state)")
            }
        }

        /// The register step failed (Redis unreachable): it is tried again after a beat.
        mutating func onRegisterFailed(_ error: RedisError) -> Action {
            switch state {
            case let .registering(firstSeen, true):
                state = .registering(firstSeen: firstSeen, inFlight: false)
                return .registerLater(afterMs: timing.heartbeatEveryMs, because: .failed(error))
            case .draining, .retiring, .retired:
                return .none
            case .idle, .registering(_, false), .running, .nameTaken:
                preconditionFailure("a register step answered in \(state)")
            }
        }

        // MARK: Running

        /// The heartbeat timer fired (or running began). A drain keeps beating until it retires:
        /// its calls' pushes are still out, and a lease that lapsed mid-drain would let another
        /// gateway take them over and ring them again (every call of a drain longer than the
        /// lease did, before). Retiring cancels the timer and hands what is left over at once.
        func onHeartbeatDue() -> Action {
            switch state {
            case .running, .draining: return .beat(againAfterMs: timing.heartbeatEveryMs)
            case .idle, .registering, .nameTaken, .retiring, .retired:
                // Its timer is armed only while running, and cancelled before retiring.
                return .none
            }
        }

        /// Something may have made reading possible (running began, a read answered, a call
        /// left, the apps changed). `appsReady`: some app has room below its in-flight cap.
        /// A read is out: a read wanted now changes nothing (`onReadWanted` answers `.none`), so
        /// the runner need not work out which apps could read (`RouterRole.readNext`).
        var readInFlight: Bool {
            switch state {
            case .running(_, .inFlight, _), .draining(_, _, .inFlight), .retiring(_, .inFlight): return true
            case .idle, .registering, .nameTaken, .running(_, .idle, _), .draining(_, _, .idle), .retiring(_, .idle), .retired: return false
            }
        }

        mutating func onReadWanted(appsReady: Bool) -> Action {
            switch state {
            case .running(let at, .idle, let callsAwaitRead):
                guard appsReady else { return .startCallsAwaitingRead }  // a finishing call resumes reading
                // Calls of the last read wait for this one: it must not block.
                state = .running(registeredAtMs: at, read: .inFlight(blocks: !callsAwaitRead), callsAwaitRead: false)
                return .read(blocks: !callsAwaitRead)
            case .running(_, .inFlight, _), .draining(_, _, .inFlight), .retiring(_, .inFlight):
                return .none
            case .idle, .registering, .nameTaken, .draining(_, _, .idle), .retiring(_, .idle), .retired:
                return .startCallsAwaitingRead
            }
        }

        /// The read brought calls that start only after the next read answered.
        mutating func onCallsAwaitRead() {
            switch state {
            case let .running(at, read, _):
                state = .running(registeredAtMs: at, read: read, callsAwaitRead: true)
            case .draining, .retiring, .retired:
                // No next read: they start once their lookup answers (`startCallsAwaitingRead`).
                break
            case .idle, .registering, .nameTaken:
                preconditionFailure("calls came from a read in \(state)")
            }
        }

        /// The XREADGROUP answered, or failed (`failure`).
        mutating func onReadAnswered(failure: RedisError?) -> Action {
            switch state {
            case .running(let at, .inFlight, let callsAwaitRead):
                state = .running(registeredAtMs: at, read: .idle, callsAwaitRead: callsAwaitRead)
                return failure.map { .readAgainLater(afterMs: timing.readRetryMs, failure: $0) } ?? .readAgain
            case .draining(let deadline, let at, .inFlight):
                state = .draining(deadlineMs: deadline, registeredAtMs: at, read: .idle)
                return failure == nil ? .readAgain : .startCallsAwaitingRead
            case .retiring(let at, .inFlight):
                // The drain's deadline passed with the read in flight.
                state = .retiring(registeredAtMs: at, read: .idle)
                return failure == nil ? .readAgain : .startCallsAwaitingRead
            case .retired:
                // Retired with the read in flight (the owner stops the loop once retired).
                return .startCallsAwaitingRead
            case .idle, .registering, .nameTaken, .running(_, .idle, _), .draining(_, _, .idle), .retiring(_, .idle):
                preconditionFailure("a read answered in \(state) with none in flight")
            }
        }

        /// The claim timer fired: a round of taking entries over, after a sweep of the process's
        /// own entries when one is due and none is in flight.
        mutating func onClaimDue() -> Action {
            switch state {
            case .running:
                let sweepOwn = ownSweeps.due > 0 && !ownSweeps.inFlight
                if sweepOwn { ownSweeps.inFlight = true }
                return .claim(sweepOwn: sweepOwn)
            case .draining, .retiring, .retired:
                return .none
            case .idle, .registering, .nameTaken:
                preconditionFailure("the claim timer fired in \(state)")
            }
        }

        /// A round of taking entries over ended (or stopped at a failed registry read).
        func onClaimRoundEnded() -> Action {
            switch state {
            case .running: return .scheduleClaim(afterMs: timing.claimEveryMs)
            case .draining, .retiring, .retired: return .none
            case .idle, .registering, .nameTaken: preconditionFailure("a claim round ended in \(state)")
            }
        }

        /// At least `count` sweeps of the process's own entries are due (a reconnect of the
        /// reading connection: 2; a failed lookup or record: 1). In any state; they run while
        /// running.
        mutating func onOwnSweepsDue(atLeast count: Int) {
            ownSweeps.due = max(ownSweeps.due, count)
        }

        /// A sweep of the process's own entries answered: one fewer is due when it succeeded,
        /// and one more when it filled a page in some app (more wait). A failed one stays due.
        mutating func onOwnSweepAnswered(succeeded: Bool, filledPage: Bool) {
            precondition(ownSweeps.inFlight, "an own sweep answered with none in flight")
            ownSweeps.inFlight = false
            guard succeeded else { return }
            ownSweeps.due = max(0, ownSweeps.due - 1)
            if filledPage { ownSweeps.due = max(ownSweeps.due, 1) }
        }

        // MARK: Draining

        /// The owner calls `drain` at monotonic `nowMs`. A second drain keeps the first's
        /// deadline and finishes with it (at once when retired already).
        mutating func onDrain(nowMs: Int64, timeoutMs: Int64) -> Action {
            switch state {
            case .idle, .registering, .nameTaken:
                state = .draining(deadlineMs: nowMs + timeoutMs, registeredAtMs: nil, read: .idle)
                return .beginDrain
            case let .running(at, read, _):
                state = .draining(deadlineMs: nowMs + timeoutMs, registeredAtMs: at, read: read)
                return .beginDrain
            case .draining, .retiring:
                return .none
            case .retired:
                return .finishDrain
            }
        }

        /// A drain looks at the calls left (`liveCalls`) at monotonic `nowMs`: none left, or the
        /// deadline passed, retires the consumer (what is left stays pending, claimable by other
        /// processes at once); otherwise it looks again shortly.
        mutating func onDrainTick(liveCalls: Int, nowMs: Int64) -> Action {
            switch state {
            case let .draining(deadline, at, read):
                guard liveCalls == 0 || nowMs >= deadline else { return .drainTickLater(afterMs: timing.drainTickMs) }
                state = .retiring(registeredAtMs: at, read: read)
                return .retire
            case .idle, .registering, .running, .nameTaken, .retiring, .retired:
                preconditionFailure("a drain tick in \(state)")
            }
        }

        /// The retire step answered (whatever it said: the lease lapses anyway).
        mutating func onRetired() -> Action {
            switch state {
            case .retiring(_, _):
                state = .retired
                return .finishDrain
            case .idle, .registering, .running, .nameTaken, .draining, .retired:
                preconditionFailure("a retire step answered in \(state)")
            }
        }
    }
}
