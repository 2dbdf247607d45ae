import CallStorage
import EventLoop
import Foundation
import GatewayConfiguration
import OutboundHTTP
import RedisClient
import Webhooks

/// The `webhooks` role of `pushgw run` (docs/webhooks.md): for every app with `webhooks`, reads
/// the deliveries the result scripts queue (`AppKeys.webhooks`) through one consumer group and
/// POSTs each, signed, to the app's receiver; retries as `WebhookAttempts` says; acknowledges
/// a delivery once answered 2xx, or moves it to the webhook dead letters.
///
/// Order: a call's results (its own, its cancel's, its receipts') are sent one after the other
/// in stream order; different calls' go in parallel, up to `maxInFlight` per app. A delivery
/// waiting for its retry stays pending in the group (nothing is held only in memory); the role
/// touches what it holds every `touchEveryMs`, and takes over what another consumer left
/// pending longer than `takeOverAfterMs` (a gateway that died). After a restart under the same
/// consumer name it reads its own pending deliveries first.
///
/// Loop-owned: `start()` after the loop exists, `close()` on the way out.
package final class WebhooksRole {
    package let topology: RedisTopology
    private let store: WebhookStore
    private let poster: HTTPPoster
    private let loop: EventLoop
    private let log: Log
    private let consumer: String
    private var apps: [AppDeliveries] = []
    private var touchTimer: LoopTimer!
    private var closed = false
    /// The figures of `/metrics`, per app.
    package private(set) var stats: [String: Stats] = [:]

    package struct Stats: Sendable {
        /// Answered attempts by status code (`"200"`, `"503"`), and unanswered ones by kind
        /// (`"error"`, `"refused"`).
        package var sent: [String: Int] = [:]
        /// Deliveries given up on (to the webhook dead letters).
        package var deadLettered = 0
        /// Attempts that will be retried.
        package var retried = 0
    }
    /// Told each answered attempt's app and latency (ms): the metrics' histogram.
    package var onLatency: ((String, Int64) -> Void)?

    package let maxInFlight = 8
    /// Deliveries held at once per app (read ahead of sending).
    let maxHeld = 200
    let idlePollMs: Int64 = 250
    let takeOverAfterMs: Int64
    var touchEveryMs: Int64 { takeOverAfterMs / 3 }

    package init(loop: EventLoop, config: GatewayConfig, redis: RedisConnection.Config, sentinels: RedisSentinels? = nil,
                 cluster: RedisCluster.Config? = nil, consumer: String, log: Log, takeOverAfterMs: Int64 = 30_000) {
        self.loop = loop
        self.log = log
        self.consumer = consumer
        self.takeOverAfterMs = takeOverAfterMs
        topology = .own(loop: loop, redis: redis, sentinels: sentinels, cluster: cluster, clientName: "pushgw-webhooks")
        store = WebhookStore(topology: topology)
        poster = HTTPPoster(loop: loop)
        for id in config.apps.keys.sorted() {
            guard let hooks = config.apps[id]?.webhooks else { continue }
            let secret: [UInt8]
            switch AdminTokenFile.read(hooks.secretFile) {
            case let .success(text): secret = Array(text.utf8)
            case let .failure(problem):
                log.error("webhooks off for this app: the secret file is unusable",
                          ["app": id, "file": hooks.secretFile, "error": problem.text])
                continue
            }
            apps.append(AppDeliveries(role: self, keys: AppKeys(prefix: config.redis.prefix, app: id, sendsWebhooks: true),
                                      config: hooks, secret: secret))
            stats[id] = Stats()
        }
        // Opened here, not at the first delivery, so a gateway whose libcurl is missing says so
        // at start; the webhook streams keep their entries for a gateway that has it.
        if !apps.isEmpty, let problem = HTTPPoster.load() {
            log.error("webhooks off: their HTTP client cannot be opened", ["apps": apps.map(\.keys.app).joined(separator: ","), "error": problem])
            apps = []
            stats = [:]
        }
        touchTimer = LoopTimer(loop: loop) { [unowned self] in self.touch() }
    }

    /// Whether any app sends webhooks.
    package var isActive: Bool { !apps.isEmpty }

    package func start() {
        guard isActive else { return }
        topology.start()
        for app in apps { app.start() }
        touchTimer.schedule(afterMs: touchEveryMs)
    }

    package func close() {
        closed = true
        touchTimer.close()
        for app in apps { app.close() }
        poster.close()
        if isActive { topology.close() }
    }

    private func touch() {
        for app in apps { store.touch(app.keys, consumer: consumer, entryIDs: app.heldIDs) { _ in } }
        touchTimer.schedule(afterMs: touchEveryMs)
    }

    fileprivate func record(_ app: String, _ change: (inout Stats) -> Void) {
        change(&stats[app, default: Stats()])
    }

    /// One app's deliveries: what is held, in stream order, and its timers.
    fileprivate final class AppDeliveries {
        unowned let role: WebhooksRole
        let keys: AppKeys
        let config: WebhookConfig
        let secret: [UInt8]
        let attempts: WebhookAttempts
        private var held: [Held] = []
        private var reading = false
        private var readOwn = true
        private var ready = false
        private var pollTimer: LoopTimer!
        private var wakeTimer: LoopTimer!
        private var takeOverTimer: LoopTimer!
        private var inFlight = 0

        final class Held {
            let delivery: WebhookStore.Delivery
            /// The result's `outcome` and `id` (the call's id: the order key).
            let outcome: String
            let callID: String
            var attempts = 0
            var state: State = .ready
            enum State { case ready, posting, waiting(untilMs: Int64), finishing }
            init(_ delivery: WebhookStore.Delivery) {
                self.delivery = delivery
                let object = (try? JSONSerialization.jsonObject(with: Data(delivery.result))) as? [String: Any]
                outcome = object?["outcome"] as? String ?? ""
                callID = object?["id"] as? String ?? delivery.entryID
            }
        }

        init(role: WebhooksRole, keys: AppKeys, config: WebhookConfig, secret: [UInt8]) {
            self.role = role
            self.keys = keys
            self.config = config
            self.secret = secret
            attempts = WebhookAttempts(retryForMs: Int64(config.retryForSeconds) * 1000)
            pollTimer = LoopTimer(loop: role.loop) { [unowned self] in self.read() }
            wakeTimer = LoopTimer(loop: role.loop) { [unowned self] in self.dispatch() }
            takeOverTimer = LoopTimer(loop: role.loop) { [unowned self] in self.takeOver() }
        }

        var heldIDs: [String] { held.map(\.delivery.entryID) }

        func start() {
            role.store.ensureGroup(keys) { [weak self] result in
                guard let self, !self.role.closed else { return }
                if case let .failure(error) = result {
                    self.role.log.warn("webhooks: cannot create the consumer group; retried", ["app": self.keys.app, "error": "\(error)"],
                                       limited: true)
                    self.pollTimer.schedule(afterMs: 1_000)
                    return
                }
                self.ready = true
                self.read()
                self.takeOverTimer.schedule(afterMs: self.role.takeOverAfterMs / 2)
            }
        }

        func close() {
            pollTimer.close()
            wakeTimer.close()
            takeOverTimer.close()
        }

        private func read() {
            guard !role.closed else { return }
            guard ready else { return start() }
            guard !reading else { return }
            let room = role.maxHeld - held.count
            guard room > 0 else { return }
            reading = true
            let own = readOwn
            role.store.read(keys, consumer: role.consumer, own: own, count: room) { [weak self] result in
                guard let self, !self.role.closed else { return }
                self.reading = false
                switch result {
                case let .success(deliveries):
                    self.add(deliveries)
                    // Its own pending ones are read once (a read from 0 returns the same ones
                    // again); any beyond `room` are taken over once idle (`takeOver`).
                    if own { self.readOwn = false }
                    if deliveries.isEmpty && !own { self.pollTimer.schedule(afterMs: self.role.idlePollMs) } else { self.read() }
                case let .failure(error):
                    self.role.log.warn("webhooks: reading deliveries failed; retried", ["app": self.keys.app, "error": "\(error)"],
                                       limited: true)
                    self.pollTimer.schedule(afterMs: 1_000)
                }
            }
        }

        private func takeOver() {
            guard !role.closed else { return }
            role.store.takeOver(keys, consumer: role.consumer, minIdleMs: role.takeOverAfterMs, count: 100) { [weak self] result in
                guard let self, !self.role.closed else { return }
                if case let .success(deliveries) = result, !deliveries.isEmpty {
                    self.role.log.info("webhooks: took over deliveries another gateway left", ["app": self.keys.app,
                                                                                              "deliveries": deliveries.count])
                    self.add(deliveries)
                }
                self.takeOverTimer.schedule(afterMs: self.role.takeOverAfterMs / 2)
            }
        }

        /// Adds deliveries not held yet, keeping stream order.
        private func add(_ deliveries: [WebhookStore.Delivery]) {
            let known = Set(heldIDs)
            let fresh = deliveries.filter { !known.contains($0.entryID) }
            guard !fresh.isEmpty else { return }
            held.append(contentsOf: fresh.map(Held.init))
            held.sort { StreamID($0.delivery.entryID) < StreamID($1.delivery.entryID) }
            dispatch()
        }

        /// Starts every delivery that may go now: ready or due, no earlier delivery of its call
        /// unfinished, under `maxInFlight`.
        private func dispatch() {
            guard !role.closed else { return }
            let now = Clock.unixMs()
            var blocked = Set<String>()
            var nextWake: Int64?
            for h in held {
                if case .ready = h.state, !config.sends(outcome: h.outcome) {
                    finish(h, next: .delivered, status: nil)
                    continue
                }
                defer { blocked.insert(h.callID) }
                guard !blocked.contains(h.callID) else { continue }
                switch h.state {
                case .posting, .finishing: continue
                case let .waiting(until) where until > now:
                    nextWake = min(nextWake ?? until, until)
                    continue
                case .waiting, .ready:
                    guard inFlight < role.maxInFlight else { break }
                    post(h)
                }
            }
            wakeTimer.cancel()
            if let nextWake { wakeTimer.schedule(afterMs: max(1, nextWake - now)) }
        }

        private func post(_ h: Held) {
            h.state = .posting
            h.attempts += 1
            inFlight += 1
            let signature = WebhookSignature.value(secret: secret, unixSeconds: Clock.unixMs() / 1000, body: h.delivery.result)
            let request = HTTPPostRequest(
                url: config.url,
                headers: ["Content-Type: application/json", "User-Agent: pushgw-webhooks",
                          "\(WebhookSignature.headerName): \(signature)", "Idempotency-Key: \(h.delivery.resultsEntry)",
                          "Pushgw-Delivery: \(h.delivery.resultsEntry)"],
                body: h.delivery.result, timeoutMs: config.timeoutMs, allowPrivateTargets: config.allowPrivateTargets)
            role.poster.post(request) { [weak self] outcome in
                guard let self, !self.role.closed else { return }
                self.inFlight -= 1
                let answer: WebhookAttempts.Answer
                let status: String
                switch outcome {
                case let .answered(code, latencyMs):
                    answer = .status(code)
                    status = String(code)
                    self.role.onLatency?(self.keys.app, latencyMs)
                case .refusedAddress:
                    answer = .refusedAddress
                    status = "refused"
                case let .transportFailed(text):
                    answer = .transportFailed(text)
                    status = "error"
                }
                let next = self.attempts.onAnswer(answer, attempt: h.attempts, resultMs: h.delivery.retriedSinceMs,
                                                  nowMs: Clock.unixMs(), random: Double.random(in: 0..<1))
                self.finish(h, next: next, status: status)
                self.dispatch()
            }
        }

        private func finish(_ h: Held, next: WebhookAttempts.Next, status: String?) {
            if let status { role.record(keys.app) { $0.sent[status, default: 0] += 1 } }
            switch next {
            case let .retry(afterMs):
                role.record(keys.app) { $0.retried += 1 }
                h.state = .waiting(untilMs: Clock.unixMs() + afterMs)
                if h.attempts == 1 || h.attempts % 10 == 0 {
                    role.log.warn("webhook not delivered; retried", ["app": keys.app, "results_entry": h.delivery.resultsEntry,
                                                                     "attempt": h.attempts, "status": status ?? "", "retry_in_ms": afterMs],
                                  limited: true)
                }
            case .delivered:
                h.state = .finishing
                role.store.delivered(keys, entryID: h.delivery.entryID) { [weak self] result in self?.finished(h, result) }
            case let .deadLetter(reason):
                h.state = .finishing
                role.record(keys.app) { $0.deadLettered += 1 }
                role.log.warn("webhook dead-lettered", ["app": keys.app, "results_entry": h.delivery.resultsEntry, "error": reason,
                                                        "attempts": h.attempts])
                role.store.deadLetter(keys, h.delivery, reason: reason, attempts: h.attempts, failedAtMs: Clock.unixMs()) {
                    [weak self] result in self?.finished(h, result)
                }
            }
        }

        /// The delivery's acknowledgement (or dead letter) was written, or failed: then it is
        /// left pending, dropped from memory and read again from the group (own pending).
        private func finished(_ h: Held, _ result: Result<Void, RedisError>) {
            guard !role.closed else { return }
            held.removeAll { $0 === h }
            if case let .failure(error) = result {
                role.log.warn("webhooks: recording a delivery failed; it is sent again", ["app": keys.app, "error": "\(error)"],
                              limited: true)
                readOwn = true
            }
            dispatch()
            read()
        }
    }
}

/// A stream entry id, ordered as Redis orders them (`ms-seq`).
struct StreamID: Comparable {
    let ms: UInt64
    let seq: UInt64
    init(_ text: String) {
        let parts = text.split(separator: "-")
        ms = parts.first.flatMap { UInt64($0) } ?? 0
        seq = parts.count > 1 ? UInt64(parts[1]) ?? 0 : 0
    }
    static func < (a: StreamID, b: StreamID) -> Bool { (a.ms, a.seq) < (b.ms, b.seq) }
}
