extension ApnsConnection {
    /// The life of one connection to APNs, as a value: each event of the connection is a
    /// `mutating func on…` that moves the state and returns what the connection must do, and
    /// does no I/O itself (`ApnsConnection.run(_:)` performs the action, in one place).
    ///
    /// ```
    /// connecting ─transportConnected─▶ awaitingSettings ─settings─▶ active ─goAway─▶ goingAway ─(last stream settled)─▶ closed
    ///      │                                │                          │                 │
    ///      └──────── failure ───────────────┴──── failure, closeRequested ───────────────┴──────────────────────────▶ closed
    /// ```
    /// Streams open only in `active`: nghttp2 assumes 100 concurrent streams until the peer's
    /// first SETTINGS, and APNs allows 1 at first (docs/architecture.md, "The connection's
    /// life").
    ///
    /// Switches have no `default:`: a new state or event must be decided everywhere. Pairs that
    /// cannot happen (nghttp2 reporting a frame while no session exists, the transport
    /// reporting after it was closed) stop the process with the state and the event; the
    /// tolerated ones (a connect timeout checked just before the connect finished, a second
    /// close) are commented and return `.none`.
    struct StateMachine {
        enum State: Equatable {
            /// TCP and TLS under way; no HTTP/2 session yet.
            case connecting
            /// Our SETTINGS are sent; waiting for the server's first SETTINGS.
            case awaitingSettings
            /// New streams may be opened, up to the server's limit.
            case active
            /// The server sent GOAWAY: streams up to `lastStreamID` still get answers, none open.
            case goingAway(lastStreamID: Int32)
            /// Final: the transport and the session are gone, every push is settled.
            case closed

            /// True when new streams may be opened.
            var acceptsStreams: Bool { self == .active }
            /// True when the pool should count this connection as one of its live ones.
            var isLive: Bool {
                switch self {
                case .connecting, .awaitingSettings, .active: return true
                case .goingAway, .closed: return false
                }
            }
            /// True until the first SETTINGS arrived: TCP, TLS or HTTP/2 set-up still under way.
            var isConnecting: Bool {
                switch self {
                case .connecting, .awaitingSettings: return true
                case .active, .goingAway, .closed: return false
                }
            }
        }

        /// What the pool hears when a connection closes without its owner asking.
        struct ClosedReport: Equatable {
            /// Why, for the pool's log and reachability report.
            let reason: String?
            /// False for a connect that failed (the pool backs off), true for a connection that
            /// had been ready (the pool replaces it at once).
            let wasReady: Bool
        }

        /// How to close.
        struct Closing: Equatable {
            /// Why; pushes lost with the connection carry it.
            let reason: String
            /// GOAWAY's last stream when one came: pushes on higher streams were never
            /// processed by the server and go back to the pool instead of failing.
            let lastProcessedStreamID: Int32?
            /// What the pool hears once every push is settled; nil when the pool asked for the
            /// close (it knows already).
            let report: ClosedReport?
        }

        /// What to do.
        enum Action: Equatable {
            case none
            /// Create the HTTP/2 session on the transport that just connected and send our
            /// SETTINGS.
            case openSession
            /// Tell the pool, once nghttp2 returns, that it may send (if the connection still
            /// accepts streams then).
            case reportCapacity
            /// Tell the pool, once nghttp2 returns, that the server sent GOAWAY.
            case reportGoingAway(reason: String?)
            /// Close the transport, drop the session, settle every push still held
            /// (`outcome(ofStream:…)`), deliver what was collected, then tell the pool
            /// `closing.report`.
            case close(Closing)
        }

        /// How a push whose stream ended is settled.
        enum StreamOutcome: Equatable {
            /// APNs answered (a status came, even if the body did not).
            case answered
            /// No server processed it: the pool sends it again elsewhere.
            case returned
            /// It was written and its answer will never come: APNs may have delivered it.
            case lost
        }

        private(set) var state: State = .connecting

        // MARK: Events

        /// The transport connected (TCP, then TLS with ALPN h2).
        mutating func onTransportConnected() -> Action {
            switch state {
            case .connecting:
                state = .awaitingSettings
                return .openSession
            case .awaitingSettings, .active, .goingAway, .closed:
                preconditionFailure("apns connection: transport connected in state \(state)")
            }
        }

        /// The server's SETTINGS arrived (not an ACK): the first one opens the connection,
        /// later ones may raise the stream limit.
        mutating func onSettingsReceived() -> Action {
            switch state {
            case .awaitingSettings:
                state = .active
                return .reportCapacity
            case .active:
                return .reportCapacity
            case .goingAway:
                return .none  // no new streams on this connection, whatever the limit
            case .connecting, .closed:
                preconditionFailure("apns connection: SETTINGS without a session, in state \(state)")
            }
        }

        /// The server sent GOAWAY; `reason` is its debug data (Apple's JSON `reason`, when
        /// there is one). A second GOAWAY may lower the last stream.
        mutating func onGoAwayReceived(lastStreamID: Int32, reason: String?) -> Action {
            switch state {
            case .awaitingSettings, .active, .goingAway:
                state = .goingAway(lastStreamID: lastStreamID)
                return .reportGoingAway(reason: reason)
            case .connecting, .closed:
                preconditionFailure("apns connection: GOAWAY without a session, in state \(state)")
            }
        }

        /// A stream of a push this connection holds closed. `hasStatus`: its `:status` came;
        /// `refused`: closed with REFUSED_STREAM; `headersSent`: its HEADERS left.
        func onStreamClosed(_ streamID: Int32, hasStatus: Bool, refused: Bool, headersSent: Bool) -> StreamOutcome {
            switch state {
            case .active:
                return Self.outcome(ofStream: streamID, hasStatus: hasStatus, refused: refused, headersSent: headersSent,
                                    lastProcessedStreamID: nil)
            case .goingAway(let last):
                return Self.outcome(ofStream: streamID, hasStatus: hasStatus, refused: refused, headersSent: headersSent,
                                    lastProcessedStreamID: last)
            case .connecting, .awaitingSettings, .closed:
                // Streams open only in `active`, and closing drops the session with its streams.
                preconditionFailure("apns connection: stream \(streamID) closed in state \(state)")
            }
        }

        /// The events collected inside nghttp2 were delivered; `inFlight` pushes are still held.
        /// A connection going away closes once its last stream is settled.
        mutating func onEventsDelivered(inFlight: Int) -> Action {
            switch state {
            case .goingAway(let last):
                guard inFlight == 0 else { return .none }
                state = .closed
                return .close(Closing(reason: "drained after GOAWAY", lastProcessedStreamID: last,
                                      report: ClosedReport(reason: "GOAWAY", wasReady: true)))
            case .connecting, .awaitingSettings, .active, .closed:
                return .none
            }
        }

        /// The connection failed by itself: the connect could not start, the transport closed,
        /// nghttp2 could not create its session or read or write.
        mutating func onFailure(reason: String) -> Action {
            switch state {
            case .connecting, .awaitingSettings:
                return close(reason: reason, report: ClosedReport(reason: reason, wasReady: false))
            case .active, .goingAway:
                return close(reason: reason, report: ClosedReport(reason: reason, wasReady: true))
            case .closed:
                // Closing frees the transport (which then reports nothing) and the session.
                preconditionFailure("apns connection: failure '\(reason)' in state \(state)")
            }
        }

        /// The connect took longer than the pool allows.
        mutating func onConnectTimedOut(reason: String) -> Action {
            switch state {
            case .connecting, .awaitingSettings:
                return onFailure(reason: reason)
            case .active, .goingAway, .closed:
                return .none  // the pool checks `isConnecting` first; nothing left to time out
            }
        }

        /// The pool closes the connection (its own close, a dead peer). A graceful close sent
        /// GOAWAY before this event, while the session still settled what it closed.
        mutating func onCloseRequested(reason: String) -> Action {
            switch state {
            case .connecting, .awaitingSettings, .active, .goingAway:
                return close(reason: reason, report: nil)
            case .closed:
                return .none  // closing twice (the pool's close after a drain) does nothing
            }
        }

        // MARK: Decisions shared by several events

        private mutating func close(reason: String, report: ClosedReport?) -> Action {
            var last: Int32?
            if case let .goingAway(lastStreamID) = state { last = lastStreamID }
            state = .closed
            return .close(Closing(reason: reason, lastProcessedStreamID: last, report: report))
        }

        /// How a push whose stream ended is settled, on a stream close and on closing: a status
        /// means an answer; REFUSED_STREAM, HEADERS that never left or a stream above GOAWAY's
        /// last stream mean no server processed it; anything else was written and lost.
        static func outcome(ofStream streamID: Int32, hasStatus: Bool, refused: Bool, headersSent: Bool,
                            lastProcessedStreamID: Int32?) -> StreamOutcome {
            if hasStatus { return .answered }
            if refused || !headersSent { return .returned }
            if let last = lastProcessedStreamID, streamID > last { return .returned }
            return .lost
        }
    }
}
