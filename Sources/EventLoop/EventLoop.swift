// EventLoop: the process's one libevent `event_base` and what rides on it
// (timers, signals, TLS byte streams, TCP listeners, `host:port` addresses).
// Owns: the loop thread, time, transports. Must not know about HTTP/2, APNs, Redis or apps.
import CLibEvent
import Glibc

/// The single libevent loop of a pushgw process (docs/architecture.md, "One loop, one thread").
///
/// Everything that does I/O is owned by one `EventLoop` and runs on the thread that
/// called `run()`: there are no locks on the hot path because nothing else touches
/// the loop's objects. Types built on it are `final class`es that assert they are on
/// the loop instead of synchronising.
public final class EventLoop {
    /// The libevent base; other modules hand it to their events, evhttp and hiredis.
    public let base: OpaquePointer
    /// Asynchronous DNS for outgoing connections (APNs asks for an uncached lookup per connection).
    public let dns: OpaquePointer
    private var loopThread: pthread_t?

    public init() {
        signal(SIGPIPE, SIG_IGN)
        guard let base = event_base_new() else { fatalError("event_base_new failed: out of memory") }
        self.base = base
        // Flags 1 = EVDNS_BASE_INITIALIZE_NAMESERVERS: read /etc/resolv.conf.
        guard let dns = evdns_base_new(base, 1) else { fatalError("evdns_base_new failed") }
        self.dns = dns
    }

    /// Frees the base. Every object created on this loop must have been closed first.
    public func close() {
        evdns_base_free(dns, 0)
        event_base_free(base)
    }

    /// Runs the loop on the calling thread until `stop()` or until nothing is left to wait for.
    public func run() {
        loopThread = pthread_self()
        event_base_dispatch(base)
        loopThread = nil
    }

    /// Runs the loop until `condition` holds, checking it after every batch of callbacks.
    /// A wait for something no event reports (a child process, a clock) needs a timer of its
    /// own to wake the loop. Used by the CLI and tests to drive one task to its end.
    public func run(until condition: () -> Bool) {
        loopThread = pthread_self()
        while !condition() {
            event_base_loop(base, EVLOOP_ONCE)
        }
        loopThread = nil
    }

    /// Makes `run()` return after the callbacks of the current iteration.
    public func stop() { event_base_loopbreak(base) }

    /// Traps in debug builds when called off the loop thread. Loop-owned methods call it first.
    @inline(__always)
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(loopThread == nil || pthread_equal(loopThread!, pthread_self()) != 0,
               "called off the event loop thread", file: file, line: line)
    }
}

/// Clocks used across pushgw. Monotonic time schedules; wall time is what goes into
/// Redis and APNs (unix milliseconds / seconds).
public enum Clock {
    /// Milliseconds on a monotonic clock: for timeouts and intervals, never for records.
    public static func monotonicMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Microseconds on a monotonic clock, for latency measurements.
    public static func monotonicUs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000
    }

    /// Unix time in milliseconds (the unit of event deadlines and APNs' 410 timestamps).
    public static func unixMs() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
