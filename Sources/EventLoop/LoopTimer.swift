import CLibEvent

/// A one-shot or repeating timer on the loop. Re-arming replaces the previous schedule.
///
/// The owner must keep the timer alive while it is armed and call `cancel()` before
/// dropping it: libevent holds only an unretained pointer to it.
public final class LoopTimer {
    private var event: OpaquePointer?
    private let action: () -> Void

    /// Creates a disarmed timer that runs `action` on the loop each time it fires.
    public init(loop: EventLoop, action: @escaping () -> Void) {
        self.action = action
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, -1, 0, { _, _, arg in
            Unmanaged<LoopTimer>.fromOpaque(arg!).takeUnretainedValue().action()
        }, ctx)
    }

    /// Arms the timer to fire once after `ms` milliseconds (0 = on the next loop iteration).
    public func schedule(afterMs ms: Int64) {
        guard let event else { return }
        var tv = timeval(tv_sec: Int(ms / 1000), tv_usec: Int((ms % 1000) * 1000))
        event_add(event, &tv)
    }

    /// Whether the timer is armed.
    public var isScheduled: Bool {
        guard let event else { return false }
        return event_pending(event, Int16(EV_TIMEOUT), nil) != 0
    }

    /// Disarms the timer; it can be scheduled again.
    public func cancel() {
        if let event { event_del(event) }
    }

    /// Disarms and frees the libevent side; the timer cannot be used afterwards.
    public func close() {
        if let event { event_free(event) }
        event = nil
    }
}

/// A handler for a POSIX signal delivered through the loop (SIGTERM, SIGINT, SIGHUP).
/// Only one loop per process may own signals.
public final class SignalWatch {
    private var event: OpaquePointer?
    private let action: (Int32) -> Void

    /// Starts watching `signal`; `action` runs on the loop each time it arrives.
    public init(loop: EventLoop, signal: Int32, action: @escaping (Int32) -> Void) {
        self.action = action
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        event = event_new(loop.base, signal, Int16(EV_SIGNAL | EV_PERSIST), { fd, _, arg in
            Unmanaged<SignalWatch>.fromOpaque(arg!).takeUnretainedValue().action(fd)
        }, ctx)
        event_add(event, nil)
    }

    /// Stops watching and frees the libevent side.
    public func close() {
        if let event { event_free(event) }
        event = nil
    }
}
