import HTTPMessages
import EventLoop
import GatewayRoles
import Glibc

/// A client of the admin endpoint as the limits count it: its IP address, an IPv6 address by
/// its /64 (one host usually holds a whole /64, so counting single IPv6 addresses would let it
/// take as many turns as it likes). Pure.
package struct ClientAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address (or /64 prefix) the limits count by.
    package let key: String

    /// From an address as evhttp gives it (`127.0.0.1`, `::1`, `::ffff:10.0.0.5`).
    package init(address: String) {
        let lower = address.lowercased()
        if lower.hasPrefix("::ffff:"), !lower.dropFirst(7).contains(":") {
            key = String(lower.dropFirst(7))  // an IPv4 client on an IPv6 socket
        } else if lower.contains(":") {
            key = ClientAddress.prefix64(lower) ?? lower
        } else {
            key = lower
        }
    }

    /// From `HTTPRequest.peer` (`address:port`, the address as evhttp gives it); nil gives
    /// one shared unknown client.
    package init(peer: String?) {
        guard let peer, let colon = peer.lastIndex(of: ":") else {
            self.init(address: "?")
            return
        }
        self.init(address: String(peer[..<colon]))
    }

    package var description: String { key }

    /// `2001:db8:1:2::/64` for any address in that /64; nil when `address` is not IPv6.
    private static func prefix64(_ address: String) -> String? {
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return nil }
        let groups = withUnsafeBytes(of: &bytes) { raw in (0..<4).map { UInt16(raw[2 * $0]) << 8 | UInt16(raw[2 * $0 + 1]) } }
        return groups.map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }
}

/// How often wrong tokens may be tried, per client address and from all of them together
/// (docs/operations.md, "Limits"): the bearer checks of the admin API and the console's
/// sign-in count alike. Pure: the caller passes the time.
///
/// Each client has `freeGuesses` wrong tokens; after the next, its checks wait `firstDelayMs`,
/// and every further wrong token doubles the wait, up to `maxDelayMs`. While it waits, its
/// requests are not checked at all (the right token too: answering it would make the wait
/// an oracle) and get `wait`. All clients together have `globalFreeGuesses` before every
/// check waits likewise, up to `globalMaxDelayMs` (guesses spread over many addresses). A
/// client without a wrong token for `forgetAfterMs` starts afresh; its burst then ends.
struct GuessThrottle {
    struct Settings: Equatable, Sendable {
        var freeGuesses = 3
        var firstDelayMs: Int64 = 1_000
        var maxDelayMs: Int64 = 15 * 60_000
        var forgetAfterMs: Int64 = 15 * 60_000
        var globalFreeGuesses = 30
        var globalMaxDelayMs: Int64 = 60_000
        var globalForgetAfterMs: Int64 = 5 * 60_000
        /// Clients remembered at once; past it, the one quiet longest is forgotten.
        var maxClients = 10_000
    }

    enum Verdict: Equatable {
        /// Check the token, then report a wrong one with `failed`.
        case check
        /// Do not check: answer 429, to be tried again after `ms`.
        case wait(ms: Int64)
    }

    /// A run of wrong tokens from one client (or from all, `client` nil) that made checks wait.
    struct Burst: Equatable {
        var client: ClientAddress?
        /// Wrong tokens checked, and requests refused unchecked, since the burst began.
        var wrong: Int
        var refused: Int
        var startedMs: Int64
        var lastWrongMs: Int64
    }

    enum Event: Equatable {
        /// Checks from `burst.client` (or everyone's) now wait `delayMs`: the first of the burst.
        case started(Burst, delayMs: Int64)
        /// The client has been quiet for its forget time.
        case ended(Burst)
    }

    /// One client's (or everyone's) count.
    private struct Budget {
        var wrong = 0
        var refused = 0
        var firstWrongMs: Int64
        var lastWrongMs: Int64
        var waitUntilMs: Int64 = 0
        /// The burst's start was reported.
        var started = false

        func burst(_ client: ClientAddress?) -> Burst {
            Burst(client: client, wrong: wrong, refused: refused, startedMs: firstWrongMs, lastWrongMs: lastWrongMs)
        }
    }

    let settings: Settings
    private var clients: [ClientAddress: Budget] = [:]
    private var everyone: Budget?

    init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// Nothing to remember (the owner's sweep timer may stop).
    var isEmpty: Bool { clients.isEmpty && everyone == nil }

    /// Whether a token from `client` may be checked now.
    mutating func admit(_ client: ClientAddress, nowMs: Int64) -> Verdict {
        var waitMs: Int64 = 0
        if let until = clients[client]?.waitUntilMs, until > nowMs {
            clients[client]!.refused += 1
            waitMs = until - nowMs
        }
        if let until = everyone?.waitUntilMs, until > nowMs {
            everyone!.refused += 1
            waitMs = max(waitMs, until - nowMs)
        }
        return waitMs > 0 ? .wait(ms: waitMs) : .check
    }

    /// A token from `client` was checked and wrong. Returns the bursts that start or end now.
    mutating func failed(_ client: ClientAddress, nowMs: Int64) -> [Event] {
        var events = forgetQuiet(nowMs: nowMs)
        if clients[client] == nil, clients.count >= settings.maxClients,
           let quietest = clients.min(by: { $0.value.lastWrongMs < $1.value.lastWrongMs }) {
            clients[quietest.key] = nil
            if quietest.value.started { events.append(.ended(quietest.value.burst(quietest.key))) }
        }
        var budget = clients[client] ?? Budget(firstWrongMs: nowMs, lastWrongMs: nowMs)
        if let event = GuessThrottle.count(&budget, nowMs: nowMs, free: settings.freeGuesses, firstMs: settings.firstDelayMs,
                                           maxMs: settings.maxDelayMs, client: client) {
            events.append(event)
        }
        clients[client] = budget
        var all = everyone ?? Budget(firstWrongMs: nowMs, lastWrongMs: nowMs)
        if let event = GuessThrottle.count(&all, nowMs: nowMs, free: settings.globalFreeGuesses, firstMs: settings.firstDelayMs,
                                           maxMs: settings.globalMaxDelayMs, client: nil) {
            events.append(event)
        }
        everyone = all
        return events
    }

    /// Forgets the clients (and the count of all) quiet for their forget time: their bursts end.
    mutating func forgetQuiet(nowMs: Int64) -> [Event] {
        var events: [Event] = []
        for (client, budget) in clients where nowMs - budget.lastWrongMs >= settings.forgetAfterMs && budget.waitUntilMs <= nowMs {
            clients[client] = nil
            if budget.started { events.append(.ended(budget.burst(client))) }
        }
        if let all = everyone, nowMs - all.lastWrongMs >= settings.globalForgetAfterMs, all.waitUntilMs <= nowMs {
            everyone = nil
            if all.started { events.append(.ended(all.burst(nil))) }
        }
        return events
    }

    /// Counts one wrong token in `budget` and sets its wait: none for the first `free`, then
    /// `firstMs`, doubling with each one more, at most `maxMs`. The event when the wait is the
    /// burst's first.
    private static func count(_ budget: inout Budget, nowMs: Int64, free: Int, firstMs: Int64, maxMs: Int64,
                              client: ClientAddress?) -> Event? {
        budget.wrong += 1
        budget.lastWrongMs = nowMs
        let beyond = budget.wrong - free
        guard beyond > 0 else { return nil }
        let doublings = min(beyond - 1, 30)
        let delay = min(maxMs, firstMs << Int64(doublings))
        budget.waitUntilMs = nowMs + delay
        guard !budget.started else { return nil }
        budget.started = true
        return .started(budget.burst(client), delayMs: delay)
    }
}

/// The endpoint's guess limits on the loop: `GuessThrottle` with the time, the log lines of
/// each burst (one when it starts, one when it ends, never one per request) and a timer that
/// ends quiet bursts. Shared by the bearer checks (`AdminRoutes`) and the console's sign-in
/// (`GatewayConsole`), so both draw on the same counts. Loop-owned; `close()` at the end.
package final class CredentialGuard {
    package enum Verdict: Equatable {
        case check
        /// Answer 429 with `Retry-After: seconds`.
        case wait(seconds: Int)
    }

    private var throttle: GuessThrottle
    private let log: Log
    private var sweep: LoopTimer!

    init(loop: EventLoop, log: Log, settings: GuessThrottle.Settings) {
        throttle = GuessThrottle(settings: settings)
        self.log = log
        sweep = LoopTimer(loop: loop) { [unowned self] in self.endQuietBursts() }
    }

    package func close() { sweep.close() }

    /// Whether a token presented by `peer` (`HTTPRequest.peer`) may be checked now.
    package func admit(_ peer: String?) -> Verdict {
        switch throttle.admit(ClientAddress(peer: peer), nowMs: Clock.monotonicMs()) {
        case .check: return .check
        case let .wait(ms): return .wait(seconds: Int((ms + 999) / 1000))
        }
    }

    /// A token presented by `peer` through `via` (`bearer`, `console sign-in`) was wrong.
    package func failed(_ peer: String?, via: String) {
        let events = throttle.failed(ClientAddress(peer: peer), nowMs: Clock.monotonicMs())
        report(events, via: via)
        if !throttle.isEmpty && !sweep.isScheduled { sweep.schedule(afterMs: CredentialGuard.sweepEveryMs) }
    }

    static let sweepEveryMs: Int64 = 10_000

    private func endQuietBursts() {
        report(throttle.forgetQuiet(nowMs: Clock.monotonicMs()), via: nil)
        if !throttle.isEmpty { sweep.schedule(afterMs: CredentialGuard.sweepEveryMs) }
    }

    private func report(_ events: [GuessThrottle.Event], via: String?) {
        for event in events {
            switch event {
            case let .started(burst, delayMs):
                var fields: [String: Any] = ["wrong": burst.wrong, "delay_ms": delayMs]
                if let via { fields["via"] = via }
                if let client = burst.client {
                    fields["client"] = client.key
                    log.warn("wrong admin tokens from one address: its token checks wait, doubling with each wrong one", fields)
                } else {
                    log.warn("wrong admin tokens from many addresses: every token check waits, doubling with each wrong one", fields)
                }
            case let .ended(burst):
                var fields: [String: Any] = ["wrong": burst.wrong, "refused": burst.refused,
                                             "seconds": (burst.lastWrongMs - burst.startedMs) / 1000]
                if let client = burst.client { fields["client"] = client.key }
                log.info("wrong admin tokens: the burst is over", fields)
            }
        }
    }
}
