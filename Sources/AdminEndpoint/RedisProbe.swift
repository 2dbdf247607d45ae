import EventLoop
import CallStorage
import RedisClient

/// Watches Redis for health and metrics: a PING every `pingEveryMs` (for `/readyz` and
/// `pushgw_redis_up`; `CallStore.ping`, which on a cluster is a keyed command, so that a
/// cluster refusing commands counts as down), a small write on every node every
/// `writeProbeEveryMs` (`CallStore.probeWrites`: for `/readyz`, since Redis answers a PING
/// while it refuses writes), and every app's backlog (XLEN + XPENDING, one Lua step for all
/// apps) every `backlogEveryMs`.
///
/// Both go over the store's topology (`CallStore.topology`), the one every outcome is written on (on a
/// cluster, the store's connections to the primaries), so "reachable" means reachable for the
/// work that matters. At most one PING and one round of
/// backlog reads are outstanding at a time: while Redis is down they wait in the connection's
/// queue instead of piling up, and the figures simply age. Scrapes read the last figures and
/// never wait for Redis.
///
/// Loop-owned; `start()` once, `close()` before dropping it.
package final class RedisProbe {
    package struct Settings: Sendable {
        package var pingEveryMs: Int64 = 2_000
        /// Every second, so readiness follows Redis taking writes again within about a second.
        package var writeProbeEveryMs: Int64 = 1_000
        package var backlogEveryMs: Int64 = 5_000
        package init() {}
    }

    private let store: CallStore
    /// The apps whose backlog is sampled; replaced on a config reload.
    var apps: [AppKeys]
    private let settings: Settings
    private var timer: LoopTimer!
    private var pingOutstanding = false
    private var lastPingSentMs: Int64?
    private var writeProbeOutstanding = false
    private var lastWriteProbeSentMs: Int64?
    private var backlogOutstanding = 0
    private var lastBacklogRoundMs: Int64?
    private var backlogByApp: [String: (backlog: Backlog, atMs: Int64)] = [:]
    /// Monotonic ms of the last successful PING; nil before the first.
    package private(set) var lastPingOkMs: Int64?
    /// The last failed PING's error; nil after a success.
    package private(set) var lastPingError: String?
    /// The nodes that refused the last write probe, with Redis' answer (`RedisError.writeRefusal`
    /// errors only: a node that did not answer is the PING's business). Empty while writes land.
    package private(set) var refusingWrites: [String: String] = [:]

    package init(loop: EventLoop, store: CallStore, apps: [AppKeys], settings: Settings = Settings()) {
        precondition(settings.pingEveryMs > 0 && settings.writeProbeEveryMs > 0 && settings.backlogEveryMs > 0,
                     "probe periods must be positive")
        self.store = store
        self.apps = apps
        self.settings = settings
        timer = LoopTimer(loop: loop) { [unowned self] in self.tick() }
    }

    /// Sends the first PING now, then keeps probing.
    package func start() { tick() }

    package func close() { timer.close() }

    /// Backlogs read at most three backlog periods ago, by app id (older ones are stale).
    package func backlog(nowMs: Int64) -> [String: Backlog] {
        backlogByApp.filter { nowMs - $0.value.atMs <= 3 * settings.backlogEveryMs }.mapValues(\.backlog)
    }

    /// `backlogEveryMs`, or on Redis Cluster at least 250 ms per app: there each app's backlog
    /// is a command of its own (a script cannot span slots), so a hundred apps cost 4 commands
    /// a second, not 20, and their figures are up to 25 s old.
    private var backlogPeriodMs: Int64 {
        guard case .cluster = store.topology else { return settings.backlogEveryMs }
        return max(settings.backlogEveryMs, 250 * Int64(apps.count))
    }

    /// `writeProbeEveryMs`, or a quarter of it while a node refuses writes: a probe answered
    /// late (behind the router's held records on the write connection) then costs a quarter
    /// period, not a whole one, before readiness follows the writes coming back.
    private var writeProbePeriodMs: Int64 {
        refusingWrites.isEmpty ? settings.writeProbeEveryMs : max(1, settings.writeProbeEveryMs / 4)
    }

    private func tick() {
        let now = Clock.monotonicMs()
        if !writeProbeOutstanding, now - (lastWriteProbeSentMs ?? .min / 2) >= writeProbePeriodMs {
            lastWriteProbeSentMs = now
            writeProbeOutstanding = true
            store.probeWrites { [weak self] answers in
                guard let self else { return }
                self.writeProbeOutstanding = false
                var refusing: [String: String] = [:]
                for answer in answers {
                    if case let .failure(error) = answer.result, error.writeRefusal != nil { refusing[answer.node] = "\(error)" }
                }
                self.refusingWrites = refusing
            }
        }
        if !pingOutstanding, now - (lastPingSentMs ?? .min / 2) >= settings.pingEveryMs {
            lastPingSentMs = now
            pingOutstanding = true
            // weak: the store may complete it with `.closed` after this probe is gone.
            store.ping { [weak self] result in
                guard let self else { return }
                self.pingOutstanding = false
                switch result {
                case .success:
                    self.lastPingOkMs = Clock.monotonicMs()
                    self.lastPingError = nil
                case let .failure(error):
                    self.lastPingError = "\(error)"
                }
            }
        }
        if backlogOutstanding == 0, now - (lastBacklogRoundMs ?? .min / 2) >= backlogPeriodMs {
            lastBacklogRoundMs = now
            backlogOutstanding = 1
            let sampled = apps
            // One command for every app: an idle gateway with a hundred apps stays near the
            // mover's ~20 commands a second.
            store.backlogs(sampled) { [weak self] result in
                guard let self else { return }
                self.backlogOutstanding = 0
                let at = Clock.monotonicMs()
                for app in sampled {
                    if case let .success(found) = result, let b = found[app] {
                        self.backlogByApp[app.app] = (b, at)
                    } else {
                        self.backlogByApp[app.app] = nil
                    }
                }
            }
        }
        // The next tick when the earlier of the two is due; one still outstanding (Redis slow
        // or gone) is looked at again a period from now.
        let nextPing = (pingOutstanding ? now : lastPingSentMs ?? now) + settings.pingEveryMs
        let nextWrite = (writeProbeOutstanding ? now : lastWriteProbeSentMs ?? now) + writeProbePeriodMs
        timer.schedule(afterMs: max(1, min(nextPing, nextWrite) - now))
    }
}
