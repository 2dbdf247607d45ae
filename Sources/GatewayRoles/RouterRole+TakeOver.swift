import EventLoop
import CallStorage
import Routing

// Liveness and take-over: the consumer name's lease, the heartbeat, and taking over the entries
// of dead consumers (and this process's own entries left pending after an error).
extension RouterRole {
    /// Takes the consumer name's lease (`CallStore.register`); what the answer means, and what
    /// follows, is `Lifecycle`'s (`onRegistered`, `onLeaseTaken`, `onRegisterFailed`): a live
    /// lease of another process under the name is waited out, looking again every heartbeat,
    /// until it lapses (taken) or is renewed (the name is in use), and a Redis error retries
    /// after a beat.
    func register() {
        store.register(consumer: settings.consumer, instance: instance, ttlMs: settings.heartbeatTTLMs,
                       signingKey: signer.keyHex) { [unowned self] result in
            switch result {
            case let .success(.registered(_, signingKey)):
                self.adoptSigningKey(signingKey)
                self.run(self.lifecycle.onRegistered(nowMs: Clock.monotonicMs()))
            case let .success(.taken(holder, leaseUntil)):
                self.run(self.lifecycle.onLeaseTaken(holder: holder, leaseUntil: leaseUntil))
            case let .failure(error):
                self.run(self.lifecycle.onRegisterFailed(error))
            }
        }
    }

    /// Claims back this process's own pending entries that it is not routing, in every app (one
    /// script per app, `CallStore.claimOwn`), and routes them. Due after the reading connection
    /// reconnected (on a cluster: after an app's read was lost with its connection) — a read
    /// served by Redis on the connection the watchdog had dropped left its entries pending
    /// here with their reply lost — twice, since Redis may serve that read
    /// only after the new connection is up; and after a failed lookup or record. So every
    /// event finishes within seconds of Redis coming back, not at the 2-minute own-entries
    /// rule of the full sweep. A sweep that fails stays due.
    func claimOwnEntries() {
        var routing: [AppKeys: [String]] = [:]
        for call in live.values { routing[call.app.keys, default: []].append(call.entryID) }
        let swept = apps
        store.claimOwn(swept.map(\.keys), consumer: settings.consumer, count: Self.ownSweepPage, routing: routing,
                       thisRunMs: thisRunMs) { [unowned self] result in
            guard case let .success(byApp) = result else {
                self.stats.redisErrors += 1
                return self.lifecycle.onOwnSweepAnswered(succeeded: false, filledPage: false)
            }
            // A full page: more of its own entries wait (a long refusal of writes left many
            // lookups undone). The next claim tick sweeps again, not the 2-minute rule.
            let filledPage = swept.contains { app in
                byApp[app.keys].map { $0.entries.count + $0.lostIDs.count >= Self.ownSweepPage } ?? false
            }
            self.lifecycle.onOwnSweepAnswered(succeeded: true, filledPage: filledPage)
            for app in swept {
                guard let found = byApp[app.keys] else { continue }
                self.routeTakenOver(found, app: app, "claimed back own pending entries")
            }
        }
    }

    /// One heartbeat, renewing the lease (the next is armed by `run(.beat)`, while running).
    func beat() {
        store.heartbeat(consumer: settings.consumer, instance: instance, ttlMs: settings.heartbeatTTLMs,
                        signingKey: signer.keyHex) { [unowned self] result in
            switch result {
            case let .success(answer):
                self.adoptSigningKey(answer.signingKey)
                guard let other = answer.otherInstance else { break }
                // Another process beats under this name (started before names were checked, or
                // both waited out a lapsed lease at once): their take-overs will misfire.
                self.log.error("another live gateway uses this consumer name; give each process its own --consumer",
                               ["consumer": self.settings.consumer, "instance": other], limited: true)
            case let .failure(error):
                self.stats.redisErrors += 1
                if error.writeRefusal != nil { self.writesRefused(error) }
                return
            }
            self.writesAccepted()
        }
    }

    /// Signs with the deployment's key from now on (the one Redis holds after this process
    /// proposed its own). A value that is not a key (written by hand) is logged and ignored.
    private func adoptSigningKey(_ key: String?) {
        guard let key, key != signer.keyHex else { return }
        if !signer.adopt(key) {
            log.error("the retry signing key in Redis is not 64 hex digits; signing with this process's own",
                      ["key": store.gatewayKeys.retrySigningKey,
                       "fix": "DEL the key: the gateways write a new one at their next heartbeat"], limited: true)
        }
    }

    /// Takes over in-flight entries of consumers whose heartbeat lapsed.
    ///
    /// Every `claimEveryMs` one read of the consumer registry; the per-app sweep (one script per
    /// app) runs only when it shows a lapsed consumer, or every `fullClaimSweepEveryMs` — so an
    /// idle process with many apps does not send a command per app every second. A sweep that
    /// found less than a page in every app forgets the lapsed consumers it was for (nothing of
    /// theirs is left); one that filled a page sweeps again at the next round, whoever held the
    /// entries: a consumer never registered (a producer reading as the group, a registry lost
    /// with Redis) is taken over a page per round, as a lapsed one is, not a page per full sweep.
    func claim() {
        store.consumerRegistry { [unowned self] result in
            guard case let .success(registry) = result else {
                self.stats.redisErrors += 1
                return self.run(self.lifecycle.onClaimRoundEnded())
            }
            let now = Clock.monotonicMs()
            // While Redis refuses writes, and for a lease after, no heartbeat lands: a lapsed
            // lease is no sign of death then, and a live process's held outcomes must not be
            // taken over and pushed again. Every registered consumer counts as live meanwhile.
            let trusted = self.leasesAreTrustworthy
            let lapsed = trusted ? registry.lapsed.subtracting([self.settings.consumer]) : []
            guard !lapsed.isEmpty || self.sweepFoundMore || now - self.lastFullSweepMs >= self.settings.fullClaimSweepEveryMs else {
                return self.run(self.lifecycle.onClaimRoundEnded())
            }
            // No app configured (all removed by a reload): the round ends here, so the claim
            // timer is armed again for when apps come back.
            guard !self.apps.isEmpty else { return self.run(self.lifecycle.onClaimRoundEnded()) }
            self.lastFullSweepMs = now
            var liveSet = trusted ? registry.live : registry.live.union(registry.lapsed)
            liveSet.insert(self.settings.consumer)
            var remaining = self.apps.count
            var cleared = true
            var foundMore = false
            for app in self.apps {
                self.store.claimAbandoned(app.keys, consumer: self.settings.consumer, minIdleMs: self.settings.claimMinIdleMs,
                                          count: 1000, liveConsumers: liveSet,
                                          ownIdleMs: max(self.settings.ownEntriesIdleMs, self.settings.claimMinIdleMs),
                                          thisRunMs: self.thisRunMs) { [unowned self] claimed in
                    if case let .success(found) = claimed {
                        self.routeTakenOver(found, app: app,
                                            "took over abandoned entries (of dead consumers, or left pending here after an error)")
                        if found.entries.count + found.lostIDs.count >= 1000 {
                            cleared = false
                            foundMore = true
                        }
                    } else {
                        self.stats.redisErrors += 1
                        cleared = false
                    }
                    remaining -= 1
                    guard remaining == 0 else { return }
                    self.sweepFoundMore = foundMore
                    if cleared { self.store.forgetLapsed(lapsed.sorted()) { _ in } }
                    self.run(self.lifecycle.onClaimRoundEnded())
                }
            }
        }
    }

    /// Whether a lapsed lease means its consumer died: not while Redis refuses writes (no
    /// heartbeat lands, every lease lapses), nor until a lease and a beat after the refusals
    /// ended, so every live process has renewed its lease before any is taken for dead.
    var leasesAreTrustworthy: Bool {
        guard refusal == nil else { return false }
        guard let ended = refusalEndedMs else { return true }
        return Clock.monotonicMs() - ended >= settings.heartbeatTTLMs + settings.heartbeatEveryMs
    }

    /// Entries of its own one sweep claims back at most, per app.
    static let ownSweepPage = 1_000

    /// How long this process has held its consumer name: its own entries delivered within it
    /// were delivered to this live process, and claiming them back is no delivery.
    var thisRunMs: Int64 { lifecycle.registeredAtMs.map { Clock.monotonicMs() - $0 } ?? 0 }

    /// Routes the entries a take-over claimed, except those this process is still routing (a
    /// sweep of its own entries, or the own-idle rule, may return them: they are not new work).
    private func routeTakenOver(_ found: ClaimResult, app: AppRuntime, _ message: String) {
        let taken = found.entries.filter { live[key(app, $0.entry.id)] == nil }
        for e in taken { refusal?.leftPending.remove(key(app, e.entry.id)) }
        if !taken.isEmpty {
            log.info(message, ["app": app.id, "count": taken.count])
            observations?.eventsReceived(app: app.id, claimed: true, count: taken.count)
        }
        stats.lostEntries += found.lostIDs.count
        stats.claimed += taken.count
        route(taken.map(\.entry), deliveries: taken.map(\.deliveries), app: app)
    }
}
