import CallStorage
import HTTPMessages
import EventLoop

// The fleet (docs/operations.md, "Console"): every gateway adds what it counted to per-minute
// hashes in Redis (`flushFleetFigures`, on its owner's timer), and the fleet page shows their
// sum over the last 5 and 60 minutes, per app, with the gateways live in the registry. The
// overview stays this process's own figures.
extension OperatorsConsole {
    /// Writes this gateway's card (`fleetCard`) and adds what `history` counted since the last
    /// flush to the fleet's counts; one flush at a time. What a failed add did not take is
    /// added at the next flush.
    public func flushFleetFigures(completion: @escaping () -> Void = {}) {
        loop.assertInLoop()
        guard let fleet, !fleetFlushInFlight else { return completion() }
        if let card = fleetCard?() { fleet.announce(card) { _ in } }
        let counts = history.unflushed()
        guard !counts.isEmpty else { return completion() }
        fleetFlushInFlight = true
        fleet.add(counts) { [weak self] result in
            guard let self else { return }
            self.fleetFlushInFlight = false
            switch result {
            case .success: self.history.flushed(counts)
            case let .failure(error): self.log(.warn, "fleet figures not added; kept for the next flush", [("error", "\(error)")])
            }
            completion()
        }
    }

    func fleetPage(_ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        guard let fleet else {
            return answer(.html(200, ConsolePages.message(title: "Fleet", viewer: viewer,
                                                          text: "This gateway keeps no fleet figures.", back: ("/console/overview", "Overview"))))
        }
        let now = Clock.unixMs()
        let current = now / 60_000
        fleet.liveGateways { gateways in
            let names = (try? gateways.get()) ?? []
            fleet.cards(names) { cards in
                fleet.counts(minutes: (current - Int64(OutcomeHistory.minutes) + 1)...current) { [weak self] counts in
                    guard let self else { return }
                    var apps: [String: ConsolePages.FleetApp] = [:]
                    for id in self.apps { apps[id] = ConsolePages.FleetApp(id: id) }
                    let failure = gateways.failureText ?? cards.failureText ?? counts.failureText
                    for m in (try? counts.get()) ?? [] {
                        if apps[m.app] == nil { apps[m.app] = ConsolePages.FleetApp(id: m.app) }
                        apps[m.app]!.add(m, recent: m.minute > current - 5)
                    }
                    let known = (try? cards.get()) ?? [:]
                    answer(.html(200, ConsolePages.fleet(viewer: viewer, gateways: names.map { ($0, known[$0]) },
                                                         apps: apps.keys.sorted().map { apps[$0]! }, redisError: failure, nowMs: now)))
                }
            }
        }
    }
}

