import CSystemdCalls
import EventLoop

/// What `pushgw run` tells systemd about itself under `Type=notify` (docs/operations.md,
/// "Under systemd"), through libsystemd's `sd_notify`: `READY=1` on the loop's first turn (the
/// roles started; Redis and APNs are reached and retried as always, so a gateway whose Redis is
/// down still starts), `RELOADING=1` then `READY=1` around a SIGHUP, `STOPPING=1` when a drain
/// begins, and `WATCHDOG=1` every half of the unit's `WatchdogSec=`, sent from the loop: a loop
/// that stops turning stops the pings, and systemd restarts the service. Outside systemd
/// (`NOTIFY_SOCKET` unset) `sd_notify` does nothing, and libsystemd is not even opened
/// (CSystemdCalls).
///
/// Loop-owned.
final class ServiceNotifications {
    /// Half the watchdog interval, when systemd set one for this process (`WATCHDOG_USEC`, and
    /// `WATCHDOG_PID` naming this process when set).
    let pingEveryMs: Int64?
    private var timer: LoopTimer!
    private var sentReady = false
    private var status = ""

    init(loop: EventLoop) {
        var usec: UInt64 = 0
        pingEveryMs = pushgw_sd_watchdog_enabled(&usec) > 0 && usec > 0 ? max(1, Int64(usec / 2_000)) : nil
        timer = LoopTimer(loop: loop) { [unowned self] in self.turn() }
    }

    deinit { timer.close() }

    /// Readiness on the loop's next turn, then the watchdog's pings.
    func start(status: String) {
        self.status = status
        timer.schedule(afterMs: 0)
    }

    /// A reload begins.
    func reloading() { ServiceNotifications.send("RELOADING=1") }

    /// A reload ended, applied or refused: the service runs either way.
    func reloaded(status: String) { ServiceNotifications.send("READY=1\nSTATUS=\(status)") }

    /// A drain began; the watchdog's pings go on while the loop turns.
    func stopping() { ServiceNotifications.send("STOPPING=1\nSTATUS=draining") }

    func close() { timer.cancel() }

    private func turn() {
        if sentReady {
            ServiceNotifications.send("WATCHDOG=1")
        } else {
            sentReady = true
            ServiceNotifications.send("READY=1\nSTATUS=\(status)")
        }
        if let pingEveryMs { timer.schedule(afterMs: pingEveryMs) }
    }

    private static func send(_ state: String) {
        _ = pushgw_sd_notify(state)
    }
}
