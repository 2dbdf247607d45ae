import APNs
import EventLoop
import Foundation
import Gateway
import RedisStreams
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
///    to its recorded outcome (which includes APNs' answer); prints p50 and p99.
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
            apns: APNsConfig(productionEndpoint: endpoint, sandboxEndpoint: endpoint, caFile: o.string("ca"),
                             connections: o.int("connections", 2), requestTimeoutMs: 30_000, maxQueued: 20_000),
            credentials: ["k": .token(teamId: "TEAM123456", keyId: "KEY1234567", keyFile: o.string("key"))],
            apps: Dictionary(uniqueKeysWithValues: appIDs.map {
                ($0, AppConfig(bundleId: "com.example.app", credential: "k", environment: .production, ringTimeoutSeconds: 600))
            }))
        let apps = AppRuntime.all(config)
        let redis: RedisConnection.Config
        do { redis = try config.redis.connection() } catch { fatalError("\(error)") }
        let store = CallStore(loop: loop, config: CallStore.Config(url: redis.url, tls: redis.tls), apps: apps.map(\.keys))
        let pools = ApnsPools(loop: loop, config: config)
        var settings = RoutingRunnerSettings(consumer: "bench")
        settings.blockMs = 50
        // As `pushgw run` runs the router by default: metrics observed, info-level log (here
        // written to /dev/null, so terminal speed is not measured).
        let devNull = FileHandle(forWritingAtPath: "/dev/null")!
        let log = Log(minimum: .info, write: { line in devNull.write(Data((line + "\n").utf8)) })
        let runner = RoutingRunner(loop: loop, store: store, pools: pools, apps: apps, settings: settings, log: log)
        let metrics = GatewayMetrics()
        runner.observations = metrics
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
        runner.onRecorded = { app, record in
            metrics.callRecorded(app: app, record: record)
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
        var cpu = [#""pushgw":\#(perEvent(ownCPUSeconds() - cpuBefore))"#]
        for (peer, before) in zip(peers, peerCPUBefore) {
            cpu.append(#""\#(peer.name)":\#(perEvent((processCPUSeconds(peer.pid) ?? before) - before))"#)
        }
        let delivered = runner.stats.finished["delivered_voip"] ?? 0

        // Phase 2: a steady rate, one event every 1000/rate ms (in bursts per 1 ms tick).
        let total = rate * seconds
        var sent = 0
        let phaseStart = Clock.monotonicUs()
        let pacer = LoopTimer(loop: loop) {}
        var tick: (() -> Void)!
        tick = {
            let due = min(total, Int(Double(Clock.monotonicUs() - phaseStart) / 1e6 * Double(rate)) + 1)
            while sent < due {
                let id = "l-\(sent)"
                let app = apps[sent % apps.count]
                sentAtUs[id] = Clock.monotonicUs()
                producer.send(["XADD", app.keys.calls, "*", "event", event(id)]) { _ in }
                sent += 1
            }
        }
        let ticker = LoopTimer(loop: loop) { tick() }
        loop.run(until: {
            if sent < total && !ticker.isScheduled { ticker.schedule(afterMs: 1) }
            return recorded >= events + total
        })
        pacer.close()
        ticker.close()
        latenciesUs.sort()
        func pct(_ p: Double) -> Double {
            latenciesUs.isEmpty ? 0 : Double(latenciesUs[min(latenciesUs.count - 1, Int(Double(latenciesUs.count) * p))]) / 1000
        }
        print(#"{"events":\#(events),"delivered":\#(delivered),"seconds":\#(String(format: "%.3f", throughputSeconds)),"events_per_s":\#(Int(Double(events) / throughputSeconds)),"rate":\#(rate),"latency_samples":\#(latenciesUs.count),"p50_ms":\#(String(format: "%.2f", pct(0.5))),"p99_ms":\#(String(format: "%.2f", pct(0.99))),"peak_rss_mb":\#(String(format: "%.1f", peakRSSMegabytes())),"cpu_us_per_event":{\#(cpu.joined(separator: ","))}}"#)
        var drained = false
        runner.drain(timeoutMs: 1_000) { drained = true }
        loop.run(until: { drained })
        pools.close()
        store.close()
        producer.close()
    }
}
