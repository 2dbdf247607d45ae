import EventLoop
import CallStorage

// Pauses: which apps an operator paused (`pushgw apps pause`, the console), read from Redis at
// every heartbeat (one EXISTS per app, pipelined: `AppPauseStore.pausedApps`) and kept in the
// intake, whose reads leave a paused app out (`AppIntake`). Nothing on the hot path: a read
// looks at the cached set. A pause lands within a heartbeat and the read in flight (at most
// `blockMs`); calls already in the process finish (docs/operations.md, *Pausing an app*).
extension RouterRole {
    /// Apps paused now, as this router last read it.
    package var pausedApps: Set<String> { intake.paused }

    /// Reads which apps are paused; a change is logged and the next read follows it. The role
    /// reads no stream until the first answer (`readNext`), so a gateway starting while an app
    /// is paused never reads it; nor after a reload until the apps it left are read again (an
    /// answer about the apps before it is ignored). A failed read keeps what was known, tried
    /// at the next beat.
    func readPauses() {
        let generation = appsGeneration
        pauseStore.pausedApps(apps.map(\.keys)) { [unowned self] result in
            guard generation == self.appsGeneration else { return }
            guard case let .success(keys) = result else {
                self.stats.redisErrors += 1
                return
            }
            let paused = Set(keys.map(\.app))
            let wasKnown = self.pausesKnown
            self.pausesKnown = true
            let before = self.intake.paused
            guard paused != before || !wasKnown else { return }
            for app in paused.subtracting(before).sorted() {
                self.log.info("app paused; its calls wait in its stream", ["app": app])
            }
            for app in before.subtracting(paused).sorted() {
                self.log.info("app resumed; reading its calls again", ["app": app])
            }
            self.intake.pause(paused)
            self.readNext()
        }
    }
}
