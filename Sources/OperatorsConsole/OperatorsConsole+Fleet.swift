import CallStorage
import HTTPMessages
import EventLoop

// The fleet (docs/operations.md, "Console"): every gateway adds what it counted to per-minute
// hashes in Redis (`flushFleetFigures`, on its owner's timer), and the fleet page shows their
// sum over the last 5 and 60 minutes, per app, with the gateways live in the registry. The
// overview stays this process's own figures.
extension OperatorsConsole {
    /// Adds what `history` counted since the last flush to the fleet's counts; one flush at a
    /// time. What a failed add did not take is added at the next flush.
    public func flushFleetFigures(completion: @escaping () -> Void = {}) {
        loop.assertInLoop()
        guard let fleet, !fleetFlushInFlight else { return completion() }
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
        fleet.liveGateways { [weak self] gateways in
            fleet.counts(minutes: (current - Int64(OutcomeHistory.minutes) + 1)...current) { counts in
                guard let self else { return }
                var last5: [String: [String: Int]] = [:], last60: [String: [String: Int]] = [:]
                var failure = gateways.failure.map { "\($0)" }
                switch counts {
                case let .success(minutes):
                    for m in minutes {
                        for (k, n) in m.outcomes {
                            last60[m.app, default: [:]][k, default: 0] += n
                            if m.minute > current - 5 { last5[m.app, default: [:]][k, default: 0] += n }
                        }
                    }
                case let .failure(error):
                    failure = failure ?? "\(error)"
                }
                let apps = (Set(self.apps).union(last60.keys)).sorted().map {
                    ConsolePages.FleetApp(id: $0, last5: last5[$0] ?? [:], last60: last60[$0] ?? [:])
                }
                answer(.html(200, ConsolePages.fleet(viewer: viewer, gateways: (try? gateways.get()) ?? [], apps: apps,
                                                     redisError: failure, nowMs: now)))
            }
        }
    }
}

private extension Result {
    var failure: Failure? {
        if case let .failure(error) = self { return error }
        return nil
    }
}
