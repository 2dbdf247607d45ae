import APNs
import AdminEndpoint
import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import CallStorage
import RedisClient
import Routing

/// `pushgw-bench e2e`: the whole router in this process — wired as `pushgw run` wires it, with
/// its metrics and an info-level log — against a real redis-server and an HTTP/2 server
/// (nghttpd in static-file mode), in two phases:
///
/// 1. throughput: `--events` call events, pre-filled by the caller across `--apps` apps
///    (streams `pushgw:{appN}:calls`), then routed; prints
///    events per second from the router's start to the last recorded outcome, and the CPU
///    time per event of this process and of the processes named by `--peer-pids`
///    (`name=pid,…`: redis-server and nghttpd), read around that phase;
/// 2. latency: a steady `--rate` events per second for `--seconds`, each timed from its XADD
///    to its recorded outcome (which includes APNs' answer); prints p50 and p99;
///    With `--throughput-only 1` it stops there (the 3-device run of bench/run.sh: calls with
///    `devices` and an answer each, whose records count as events), printing also the pushes
///    APNs answered and the CPU time per push (`cpu_us_per_push`).
/// 3. with `--scrapers N` (> 0): the same steady phase again while the admin endpoint runs on
///    the loop and N threads fetch `/metrics` from it back to back; prints that p99 and the
///    scrapes served (`--metrics-max-age-ms` sets the rendering's reuse, 0 = every scrape renders).
/// The router's observer in the bench: what `pushgw run`'s router reports goes to `target` (the
/// metrics alone, or an admin endpoint while one runs, as `pushgw run` wires it), and each
/// recorded outcome to the bench's count.
final class BenchObservations: RouterObservations {
    var target: RouterObservations
    var onRecorded: (OutcomeRecord) -> Void = { _ in }
    /// Pushes answered by APNs or failed (every device push of every call).
    var pushes = 0

    init(reportingTo target: RouterObservations) { self.target = target }

    func eventsReceived(app: String, claimed: Bool, count: Int) {
        target.eventsReceived(app: app, claimed: claimed, count: count)
    }

    func apnsAnswered(app: String, channel: PushChannel, status: Int, reason: String?, latencySeconds: Double) {
        pushes += 1
        target.apnsAnswered(app: app, channel: channel, status: status, reason: reason, latencySeconds: latencySeconds)
    }

    func apnsFailed(app: String, channel: PushChannel, error: ApnsClientError, latencySeconds: Double) {
        pushes += 1
        target.apnsFailed(app: app, channel: channel, error: error, latencySeconds: latencySeconds)
    }

    func fallback(app: String, cause: FallbackCause) {
        target.fallback(app: app, cause: cause)
    }

    func callRecorded(app: String, record: OutcomeRecord) {
        target.callRecorded(app: app, record: record)
        onRecorded(record)
    }
}

enum EndToEnd {
    static func run(_ o: Options) {
        let loop = EventLoop()
        let appCount = o.int("apps", 4)
        let events = o.int("events", 100_000)
        let rate = o.int("rate", 2_000)
        let seconds = o.int("seconds", 5)
        let tokens = o.string("tokens").split(separator: ",").map(String.init)
        let endpoint = Endpoint(host: "127.0.0.1", port: o.int("port", 0))
        let appIDs = (0..<appCount).map { "app\($0)" }
        // `--redis-ca FILE` with a rediss:// URL: Redis over TLS, verified against that CA.
        let redisCA = o.string("redis-ca", "")
        let config = GatewayConfig(
            redis: RedisConfig(url: o.string("redis"), tls: RedisTLSOptions(caFile: redisCA.isEmpty ? nil : redisCA)),
            apns: ApnsConfig(productionEndpoint: endpoint, sandboxEndpoint: endpoint, caFile: o.string("ca"),
                             connections: o.int("connections", 2), requestTimeoutMs: 30_000, maxQueued: 20_000),
            credentials: ["k": .token(teamId: "TEAM123456", keyId: "KEY1234567", keyFile: o.string("key"))],
            apps: Dictionary(uniqueKeysWithValues: appIDs.map {
                ($0, AppConfig(bundleId: "com.example.app", credential: "k", environment: .production, ringTimeoutSeconds: 600))
            }))
        let apps = AppRuntime.all(config)
        let redis: RedisConnection.Config
        do { redis = try config.redis.connection() } catch { fatalError("\(error)") }
        let store = CallStore(config: CallStore.Config(), apps: apps.map(\.keys),
                              topology: .own(loop: loop, redis: RedisConnection.Config(url: redis.url, tls: redis.tls), cluster: nil,
                                             clientName: "pushgw-write"))
        let pools = ApnsPools(loop: loop, config: config)
        var settings = RouterRoleSettings(consumer: "bench")
        settings.blockMs = 50
        // As `pushgw run` runs the router by default: metrics observed, info-level log (here
        // written to /dev/null, so terminal speed is not measured).
        let devNull = FileHandle(forWritingAtPath: "/dev/null")!
        let log = Log(minimum: .info, write: { line in devNull.write(Data((line + "\n").utf8)) })
        let runner = RouterRole(loop: loop, store: store, pools: pools, fcmPools: FcmPools(loop: loop, config: config), apps: apps,
                                settings: settings, log: log)
        let metrics = GatewayMetrics()
        let observer = BenchObservations(reportingTo: metrics)
        runner.observations = observer
        let producer = RedisConnection(loop: loop, config: redis)
        producer.start()
        store.start()

        var sequence = 0
        func event(_ id: String) -> String {
            sequence += 1
            let token = tokens[sequence % tokens.count]
            return #"{"v":1,"id":"\#(id)","type":"incoming_call","voip_token":"\#(token)","voip":{"caller":"+15551234567","callerName":"Alice Johnson","sessionId":"abc-123-def","hasVideo":false}}"#
        }

        // Phase 1: the calls streams were pre-filled by bench/run.sh (another process, so this
        // one's memory is the router's); route everything.
        var recorded = 0
        var sentAtUs: [String: Int64] = [:]
        var latenciesUs: [Int64] = []
        observer.onRecorded = { record in
            recorded += 1
            if let id = record.id, let t = sentAtUs.removeValue(forKey: id) { latenciesUs.append(Clock.monotonicUs() - t) }
        }
        let peers: [(name: String, pid: Int)] = o.string("peer-pids", "").split(separator: ",").compactMap {
            let parts = $0.split(separator: "=")
            guard parts.count == 2, let pid = Int(parts[1]) else { return nil }
            return (String(parts[0]), pid)
        }
        let peerCPUBefore = peers.map { processCPUSeconds($0.pid) ?? 0 }
        let cpuBefore = ownCPUSeconds()
        let start = Clock.monotonicUs()
        runner.start()
        loop.run(until: { recorded >= events })
        let throughputSeconds = Double(Clock.monotonicUs() - start) / 1e6
        func perEvent(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1e6 / Double(events)) }
        let pushes = observer.pushes
        func perPush(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1e6 / Double(max(pushes, 1))) }
        let ownCPU = ownCPUSeconds() - cpuBefore
        var cpu = [#""pushgw":\#(perEvent(ownCPU))"#]
        var cpuPerPush = [#""pushgw":\#(perPush(ownCPU))"#]
        for (peer, before) in zip(peers, peerCPUBefore) {
            let used = (processCPUSeconds(peer.pid) ?? before) - before
            cpu.append(#""\#(peer.name)":\#(perEvent(used))"#)
            cpuPerPush.append(#""\#(peer.name)":\#(perPush(used))"#)
        }
        let delivered = runner.stats.finished["delivered_voip"] ?? 0
        let pushFigures = #""pushes":\#(pushes),"cpu_us_per_push":{\#(cpuPerPush.joined(separator: ","))}"#
        if o.int("throughput-only", 0) != 0 {
            print(#"{"events":\#(events),"delivered":\#(delivered),"seconds":\#(String(format: "%.3f", throughputSeconds)),"events_per_s":\#(Int(Double(events) / throughputSeconds)),\#(pushFigures),"cpu_us_per_event":{\#(cpu.joined(separator: ","))}}"#)
            var drained = false
            runner.drain(timeoutMs: 1_000) { drained = true }
            loop.run(until: { drained })
            pools.close()
            store.close()
            producer.close()
            return
        }

        // Phase 2: a steady rate, one event every 1000/rate ms (in bursts per 1 ms tick).
        var phase = 0
        func steadyLatencies() -> [Int64] {
            phase += 1
            latenciesUs = []
            let before = recorded
            let total = rate * seconds
            var sent = 0
            let phaseStart = Clock.monotonicUs()
            let ticker = LoopTimer(loop: loop) {
                let due = min(total, Int(Double(Clock.monotonicUs() - phaseStart) / 1e6 * Double(rate)) + 1)
                while sent < due {
                    let id = "l\(phase)-\(sent)"
                    let app = apps[sent % apps.count]
                    sentAtUs[id] = Clock.monotonicUs()
                    producer.send(["XADD", app.keys.calls, "*", "event", event(id)]) { _ in }
                    sent += 1
                }
            }
            loop.run(until: {
                if sent < total && !ticker.isScheduled { ticker.schedule(afterMs: 1) }
                return recorded >= before + total
            })
            ticker.close()
            return latenciesUs.sorted()
        }
        func pct(_ sorted: [Int64], _ p: Double) -> Double {
            sorted.isEmpty ? 0 : Double(sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]) / 1000
        }
        let steady = steadyLatencies()

        // Phase 3: the same under a /metrics flood from `--scrapers` threads.
        var flood = ""
        let scrapers = o.int("scrapers", 0)
        if scrapers > 0 {
            var adminSettings = GatewayAdmin.Settings()
            adminSettings.metricsMaxAgeMs = Int64(o.int("metrics-max-age-ms", 1_000))
            let admin = GatewayAdmin(loop: loop, config: AdminConfig(listen: "127.0.0.1:\(ScrapeFlood.freePort())"), apps: apps,
                                     store: store, pools: pools, runner: runner, log: log, settings: adminSettings)
            admin.start()
            observer.target = admin
            guard let port = admin.port else { fatalError("the admin endpoint did not listen") }
            let scrapes = ScrapeFlood(port: port, threads: scrapers)
            let flooded = steadyLatencies()
            let served = scrapes.stop(turning: loop)
            admin.close()
            flood = #","flood_scrapers":\#(scrapers),"flood_scrapes":\#(served),"flood_p99_ms":\#(String(format: "%.2f", pct(flooded, 0.99)))"#
        }
        // Phase 4: the same while a browser-like client loads console pages `--console-views`
        // times a second (each page with its stylesheet and script), signed in with the admin
        // token, over 200 dead letters of app0 (the list pages read them).
        var console = ""
        let consoleViews = o.int("console-views", 0)
        if consoleViews > 0 {
            var written = 0
            for i in 0..<200 {
                producer.send(["XADD", apps[0].keys.dead, "*", "event", event("dead-\(i)"), "reason", "apns_credentials: InvalidProviderToken",
                               "app", apps[0].id, "attempts", "[]"]) { _ in written += 1 }
            }
            loop.run(until: { written == 200 })
            let tokenFile = NSTemporaryDirectory() + "pushgw-bench-console-token-\(getpid())"
            let token = "bench-console-token-\(UUID().uuidString)"
            _ = FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600])
            defer { try? FileManager.default.removeItem(atPath: tokenFile) }
            let admin = GatewayAdmin(loop: loop, config: AdminConfig(listen: "127.0.0.1:\(ScrapeFlood.freePort())", tokenFile: tokenFile),
                                     apps: apps, store: store, pools: pools, runner: runner, log: log)
            admin.openConsole = { [unowned admin] adminToken in
                GatewayConsole(loop: loop, config: config, redis: redis, sentinels: nil, adminToken: adminToken,
                               guesses: admin.guesses, log: log, gateway: ("bench", ["router"]),
                               figures: { admin.consoleFigures() })
            }
            admin.start()
            observer.target = admin
            guard let port = admin.port else { fatalError("the admin endpoint did not listen") }
            let viewer = ConsoleViewer(port: port, token: token, pagesPerSecond: consoleViews, apps: appIDs)
            let viewed = steadyLatencies()
            let (pages, failures) = viewer.stop(turning: loop)
            admin.close()
            console = #","console_views_per_s":\#(consoleViews),"console_pages":\#(pages),"console_failures":\#(failures),"console_p99_ms":\#(String(format: "%.2f", pct(viewed, 0.99)))"#
        }
        print(#"{"events":\#(events),"delivered":\#(delivered),"seconds":\#(String(format: "%.3f", throughputSeconds)),"events_per_s":\#(Int(Double(events) / throughputSeconds)),"rate":\#(rate),"latency_samples":\#(steady.count),"p50_ms":\#(String(format: "%.2f", pct(steady, 0.5))),"p99_ms":\#(String(format: "%.2f", pct(steady, 0.99)))\#(flood)\#(console),"peak_rss_mb":\#(String(format: "%.1f", peakRSSMegabytes())),\#(pushFigures),"cpu_us_per_event":{\#(cpu.joined(separator: ","))}}"#)
        var drained = false
        runner.drain(timeoutMs: 1_000) { drained = true }
        loop.run(until: { drained })
        pools.close()
        store.close()
        producer.close()
    }
}

/// Threads fetching `/metrics` from 127.0.0.1:`port` back to back, one connection per request
/// (as `curl` in a loop does), until `stop()`.
final class ScrapeFlood: @unchecked Sendable {
    private let lock = NSLock()
    private var running = true
    private var served = 0
    private var finished = 0
    private let threads: Int

    init(port: Int, threads: Int) {
        self.threads = threads
        for _ in 0..<threads {
            Thread.detachNewThread { [self] in
                while isRunning {
                    if ScrapeFlood.fetch(port: port) { lock.lock(); served += 1; lock.unlock() }
                }
                lock.lock(); finished += 1; lock.unlock()
            }
        }
    }

    private var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return running }

    /// Stops the threads and returns how many scrapes were answered. Turns `loop` (where the
    /// endpoint lives) meanwhile: a thread may be waiting for its last answer.
    func stop(turning loop: EventLoop) -> Int {
        lock.lock(); running = false; lock.unlock()
        let tick = LoopTimer(loop: loop) {}
        defer { tick.close() }
        loop.run(until: {
            lock.lock(); let done = finished == threads; lock.unlock()
            if !done && !tick.isScheduled { tick.schedule(afterMs: 1) }
            return done
        })
        return served
    }

    /// A free loopback port (bound and released).
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    private static func fetch(port: Int) -> Bool {
        loopbackExchange(port: port, request: "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") != nil
    }
}

/// A browser-like client of the operators' console on a thread of its own: signs in with the
/// token, then loads a page `pagesPerSecond` times a second — the overview, the dead-letter
/// list (all apps, then one app), a filtered list, the audit trail, in turn — each with the
/// stylesheet and the script, one connection per request, until `stop()`.
final class ConsoleViewer: @unchecked Sendable {
    private let lock = NSLock()
    private var running = true
    private var pages = 0
    private var failures = 0
    private var finished = false

    init(port: Int, token: String, pagesPerSecond: Int, apps: [String]) {
        Thread.detachNewThread { [self] in
            let form = "token=\(token)&name=bench"
            let signIn = loopbackExchange(port: port, request: "POST /console/signin HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                + "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: \(form.utf8.count)\r\nConnection: close\r\n\r\n\(form)")
            let cookie = signIn.flatMap { reply in
                reply.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("set-cookie: pushgw_console=") }
                    .map { String($0.dropFirst("set-cookie: ".count).prefix { $0 != ";" }) }
            }
            let paths = ["/console/overview", "/console/dead", "/console/dead?app=\(apps[0])", "/console/dead?reason=apns_credentials",
                         "/console/audit"]
            let start = Date()
            var n = 0
            while isRunning {
                let due = start.addingTimeInterval(Double(n) / Double(pagesPerSecond))
                let wait = due.timeIntervalSinceNow
                if wait > 0 { Thread.sleep(forTimeInterval: wait) }
                var ok = cookie != nil
                for path in [paths[n % paths.count], "/console/static/console.css", "/console/static/console.js"] where ok {
                    let reply = loopbackExchange(port: port, request: "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
                        + "Cookie: \(cookie ?? "")\r\nConnection: close\r\n\r\n")
                    ok = reply?.hasPrefix("HTTP/1.1 200") ?? false
                }
                lock.lock(); if ok { pages += 1 } else { failures += 1 }; lock.unlock()
                n += 1
            }
            lock.lock(); finished = true; lock.unlock()
        }
    }

    private var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return running }

    /// Stops the thread and returns the pages loaded whole (page, stylesheet and script all 200)
    /// and those that were not. Turns `loop` meanwhile (the console lives there).
    func stop(turning loop: EventLoop) -> (pages: Int, failures: Int) {
        lock.lock(); running = false; lock.unlock()
        let tick = LoopTimer(loop: loop) {}
        defer { tick.close() }
        loop.run(until: {
            lock.lock(); let done = finished; lock.unlock()
            if !done && !tick.isScheduled { tick.schedule(afterMs: 1) }
            return done
        })
        return (pages, failures)
    }
}

/// One request to 127.0.0.1:`port` on a new connection, read until the server closes: the
/// whole answer as text, nil when none came.
func loopbackExchange(port: Int, request: String) -> String? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    let connected = withUnsafePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    guard connected else { return nil }
    let bytes = Array(request.utf8)
    guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else { return nil }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n <= 0 { break }
        received += buffer[0..<n]
    }
    return received.isEmpty ? nil : String(decoding: received, as: UTF8.self)
}
