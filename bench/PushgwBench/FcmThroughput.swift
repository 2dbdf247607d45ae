import APNs
import EventLoop
import FCM
import Foundation

/// `pushgw-bench fcm`: FCM's client (`FcmClient`, on the APNs client's pool) sending
/// `--requests` messages of a ring's shape (data only, priority HIGH, a TTL, a 300-byte body)
/// with `--streams` in flight per connection, after the access-token exchange and the
/// connections' warm-up; prints the rate, the peak RSS and the CPU time per message. Against
/// nghttpd in static-file mode (bench/run.sh serves the token endpoint's answer and the send
/// path as files) or the simulator.
enum FcmThroughput {
    static func run(_ o: Options) {
        let loop = EventLoop()
        let connections = o.int("connections", 1)
        let total = o.int("requests", 100_000)
        do {
            let account = try ServiceAccount.load(file: o.string("account"))
            var settings = FcmClientSettings(host: o.string("host", "127.0.0.1"), port: o.int("port", 0), caFile: o.string("ca"))
            settings.connections = connections
            settings.maxStreamsPerConnection = o.int("streams", 100)
            settings.requestTimeoutMs = 30_000
            let client = try FcmClient(loop: loop, settings: settings, account: account)
            let token = o.string("token", "bench-device:APA91bH")
            let pad = String(repeating: "x", count: 200)
            let body = #"{"message":{"token":"\#(token)","android":{"priority":"HIGH","ttl":"27s","collapse_key":"call-1"},"data":{"caller":"+15551234567","callerName":"Alice Johnson","deadline":"1700000027999","id":"call-1","pad":"\#(pad)","type":"incoming_call"}}}"#
            guard let message = FcmMessage(token: token, body: Array(body.utf8)) else { throw BenchError("the message does not fit") }
            var started = 0, done = 0, ok = 0
            func sendOne() {
                started += 1
                client.send(message) { result in
                    done += 1
                    if case let .success(r) = result, r.isAccepted { ok += 1 }
                    if started < total { sendOne() }
                }
            }
            // The token exchange and the warm-up are not measured (h2load has neither).
            var warmed = false
            client.send(message) { _ in warmed = true }
            loop.run(until: { warmed })
            client.messagePool.connect()
            loop.run(until: { client.messagePool.activeConnections == connections })
            let startUs = Clock.monotonicUs()
            let cpuBefore = ownCPUSeconds()
            for _ in 0..<min(total, connections * settings.maxStreamsPerConnection) { sendOne() }
            loop.run(until: { done == total })
            let seconds = Double(Clock.monotonicUs() - startUs) / 1e6
            let cpuPerRequest = (ownCPUSeconds() - cpuBefore) * 1e6 / Double(total)
            print(#"{"requests":\#(total),"ok":\#(ok),"seconds":\#(String(format: "%.3f", seconds)),"rps":\#(Int(Double(total) / seconds)),"peak_rss_mb":\#(String(format: "%.1f", peakRSSMegabytes())),"cpu_us_per_request":\#(String(format: "%.2f", cpuPerRequest)),"token_exchanges":\#(client.tokens.exchanges)}"#)
            client.close()
        } catch {
            FileHandle.standardError.write(Data("pushgw-bench: \(error)\n".utf8))
            exit(1)
        }
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
