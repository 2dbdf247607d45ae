extension TLSStream {
    /// The life of one `TLSStream`, as a value: each event of the stream is a `mutating func
    /// on…` that moves the state and returns what the stream must do; it does no I/O
    /// (`TLSStream.run(_:)` performs the action, in one place).
    ///
    /// ```
    /// resolving ─resolved─▶ connecting ─socketConnected─▶ handshaking ─handshakeDone─▶ open
    ///                                        └──────────(plain)───────────────────────▲
    /// any but closed ─failure in a callback─▶ closed (reported)
    /// any but closed ─failure inside connect…─▶ failing ─flush event─▶ closed (reported)
    /// any ─close()─▶ closed (not reported)
    /// ```
    ///
    /// What is not the stream's life stays beside it as flags: whether a write waits for
    /// EV_WRITE, a read waits to write first, a flush is scheduled, and the re-entrancy guards
    /// of its callbacks (`inEvent`, `batching`), all on the per-read path.
    ///
    /// Switches have no `default:`. Events the loop allows in a state where they mean nothing
    /// (an event of a socket whose connect failed, a flush after the close) return `.none`.
    struct Life: Equatable {
        enum State: Equatable {
            /// The host name is being resolved (evdns).
            case resolving
            /// The TCP or unix socket connect is in progress (EV_WRITE reports it).
            case connecting
            /// Connected; the TLS handshake runs.
            case handshaking
            /// The delegate heard `didConnect`: bytes flow.
            case open
            /// A failure was found outside the stream's callbacks (inside `connect…`): it is
            /// reported from the flush event on this loop iteration, never from inside the call.
            /// `wasOpen`: it was open when the failure was found (its close writes what is left).
            case failing(reason: String, wasOpen: Bool)
            /// Closed by the owner or by a failure; final. No delegate call follows.
            case closed
        }

        enum Action: Equatable {
            case none
            /// Open the socket to the address resolved (its connect reports to EV_WRITE);
            /// performed by the caller of `onResolved`, which holds the address.
            case openSocket
            /// Read the socket's connect result (`SO_ERROR`).
            case checkConnect
            /// Give the socket to TLS and take the first handshake step.
            case startHandshake
            /// Take a handshake step (the socket is readable or writable).
            case handshakeStep
            /// Tell the delegate `didConnect`; then write what it wrote (plain), or read what
            /// came with the handshake's last flight (TLS) while still open.
            case reportConnected
            /// Read what the socket holds.
            case read
            /// The socket is writable again: read when a read waited for it, else write.
            case resumeWriting
            /// Write the pending output.
            case writeOutput
            /// Activate the flush event: the failure is reported from there.
            case scheduleFailureReport
            /// Free the connection (writing what the kernel takes first when it was open), then
            /// tell the delegate `didClose` with the reason.
            case closeAndReport(String?, wasOpen: Bool)
            /// Free the connection (as above), without a delegate call.
            case release(wasOpen: Bool)
        }

        private(set) var state: State

        init(_ state: State) { self.state = state }

        /// After `close()` or the peer's close (not while a failure waits to be reported).
        var isClosed: Bool {
            if case .closed = state { return true }
            return false
        }

        /// Bytes flow. (Asked after every delegate call on the read path: a tag test.)
        var isOpen: Bool {
            if case .open = state { return true }
            return false
        }

        /// Open, or open when a failure waiting to be reported was found: a close writes what
        /// the kernel takes of the output first.
        private var wasOpen: Bool {
            switch state {
            case .open: return true
            case let .failing(_, wasOpen): return wasOpen
            case .resolving, .connecting, .handshaking, .closed: return false
            }
        }

        // MARK: Connecting

        /// The host name's lookup answered: an address, or why there is none (`failure`, then
        /// as `onFailure`). The socket is opened by the caller, which holds the address.
        mutating func onResolved(failure: String?, inEvent: Bool) -> Action {
            switch state {
            case .resolving:
                guard let failure else { return .openSocket }
                return onFailure(failure, inEvent: inEvent)
            case .connecting, .handshaking, .open, .failing, .closed:
                // A lookup that answers after a close or a failure: nothing to connect.
                return .none
            }
        }

        /// The socket's connect started (or finished at once: it is reported from EV_WRITE all
        /// the same, so the delegate never hears from inside `connect…`).
        mutating func onConnectStarted() -> Action {
            switch state {
            case .resolving, .connecting:
                state = .connecting
                return .none
            case .handshaking, .open, .failing, .closed:
                preconditionFailure("a connect started in \(state)")
            }
        }

        /// The socket's connect succeeded; `isTLS`: a handshake follows.
        mutating func onSocketConnected(isTLS: Bool) -> Action {
            switch state {
            case .connecting:
                state = isTLS ? .handshaking : .open
                return isTLS ? .startHandshake : .reportConnected
            case .resolving, .handshaking, .open, .failing, .closed:
                preconditionFailure("a socket connected in \(state)")
            }
        }

        /// The handshake's last step succeeded.
        mutating func onHandshakeDone() -> Action {
            switch state {
            case .handshaking:
                state = .open
                return .reportConnected
            case .resolving, .connecting, .open, .failing, .closed:
                preconditionFailure("a handshake finished in \(state)")
            }
        }

        // MARK: Socket events

        /// EV_READ fired (or a read was asked for again).
        func onReadable() -> Action {
            switch state {
            case .handshaking: return .handshakeStep
            case .open: return .read
            case .resolving, .connecting, .failing, .closed: return .none
            }
        }

        /// EV_WRITE fired.
        func onWritable() -> Action {
            switch state {
            case .connecting: return .checkConnect
            case .handshaking: return .handshakeStep
            case .open: return .resumeWriting
            case .resolving, .failing, .closed: return .none
            }
        }

        /// The flush event fired: a failure waiting to be reported is, else the output is written.
        mutating func onFlush() -> Action {
            switch state {
            case let .failing(reason, wasOpen):
                state = .closed
                return .closeAndReport(reason, wasOpen: wasOpen)
            case .open:
                return .writeOutput
            case .resolving, .connecting, .handshaking, .closed:
                return .none
            }
        }

        // MARK: Ending

        /// The connection failed or the peer closed it (`reason` nil: orderly). Inside one of
        /// the stream's callbacks (`inEvent`) it is reported at once; outside (inside
        /// `connect…`) from the flush event. A later failure's reason replaces a waiting one.
        mutating func onFailure(_ reason: String?, inEvent: Bool) -> Action {
            switch state {
            case .closed:
                return .none
            case .resolving, .connecting, .handshaking, .open, .failing:
                let wasOpen = self.wasOpen
                guard inEvent else {
                    state = .failing(reason: reason ?? "connection closed", wasOpen: wasOpen)
                    return .scheduleFailureReport
                }
                state = .closed
                return .closeAndReport(reason, wasOpen: wasOpen)
            }
        }

        /// The owner calls `close()`. Closing twice does nothing.
        mutating func onClose() -> Action {
            switch state {
            case .closed:
                return .none
            case .resolving, .connecting, .handshaking, .open, .failing:
                let wasOpen = self.wasOpen
                state = .closed
                return .release(wasOpen: wasOpen)
            }
        }
    }
}
