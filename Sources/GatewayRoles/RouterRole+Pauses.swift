import EventLoop
import CallStorage

// Pauses: which apps an operator paused (`pushgw apps pause`, the console), kept in the intake,
// whose reads leave a paused app out (`AppIntake`). At every heartbeat one GET reads the
// stamp every pause and resume writes (`GatewayKeys.pausesChanged`); only when it changed, at
// the start, after a reload, and every `pauseSweepEveryMs` anyway are the apps' pause keys
// read (one EXISTS per app, pipelined: `AppPauseStore.pausedApps`). Nothing on the hot path: a
// read looks at the cached set. A pause lands within a heartbeat and the read in flight (at
// most `blockMs`); calls already in the process finish (docs/operations.md, *Pausing an app*).
extension RouterRole {
    /// Apps paused now, as this router last read it.
    package var pausedApps: Set<String> { intake.paused }

    /// Reads the stamp, then, when it changed or a full read is due, which apps are paused; a
    /// change is logged and the next read follows it. The role reads no stream until the first
    /// answer (`readNext`), so a gateway starting while an app is paused never reads it; nor
    /// after a reload until the apps it left are read again (an answer about the apps before
    /// it is ignored). A failed read keeps what was known, tried at the next beat.
    func readPauses() {
        let generation = appsGeneration
        pauseStore.changeStamp(prefix: store.gatewayKeys.prefix) { [unowned self] result in
            guard generation == self.appsGeneration else { return }
            guard case let .success(stamp) = result else {
                self.stats.redisErrors += 1
                return
            }
            let now = Clock.monotonicMs()
            let due = !self.pausesKnown || stamp != self.pauseStamp || now - self.pausesReadAtMs >= self.settings.pauseSweepEveryMs
            guard due else { return }
            self.pauseStore.pausedApps(self.apps.map(\.keys)) { [unowned self] result in
                guard generation == self.appsGeneration else { return }
                guard case let .success(keys) = result else {
                    self.stats.redisErrors += 1
                    return
                }
                self.pauseStamp = stamp
                self.pausesReadAtMs = now
                self.pausesRead(Set(keys.map(\.app)))
            }
        }
    }

    /// The apps paused now, just read.
    private func pausesRead(_ paused: Set<String>) {
        let wasKnown = pausesKnown
        pausesKnown = true
        let before = intake.paused
        guard paused != before || !wasKnown else { return }
        for app in paused.subtracting(before).sorted() {
            log.info("app paused; its calls wait in its stream", ["app": app])
        }
        for app in before.subtracting(paused).sorted() {
            log.info("app resumed; reading its calls again", ["app": app])
        }
        intake.pause(paused)
        readNext()
    }
}
