import EventLoop
import Foundation
import OutboundHTTP

/// `pushgw-bench ingest`: `--requests` call events POSTed to the HTTP API
/// (`POST /v1/apps/APP/calls`, docs/http-api.yaml) with `--concurrency` in flight, each its own
/// call id, through libcurl's multi interface (OutboundHTTP's `HTTPPoster`, which keeps its
/// connections); prints the rate of answers, how many were 202, and the accept latency
/// (request sent to the 202) p50/p99/max.
enum IngestLoad {
    static func run(_ o: Options) {
        let loop = EventLoop()
        let poster = HTTPPoster(loop: loop)
        let url = o.string("url") + "/v1/apps/" + o.string("app") + "/calls"
        let key = o.string("key")
        let token = o.string("token")
        let total = o.int("requests", 20_000)
        let concurrency = o.int("concurrency", 64)
        let prefix = o.string("prefix", "h")
        var started = 0, done = 0, accepted = 0
        var statuses: [String: Int] = [:]
        var latencies: [Int64] = []
        latencies.reserveCapacity(total)
        func sendOne() {
            let i = started
            started += 1
            let event = #"{"v":1,"id":"\#(prefix)-\#(i)","type":"incoming_call","voip_token":"\#(token)","voip":{"caller":"+15551234567","callerName":"Alice Johnson","sessionId":"abc-123-def","hasVideo":false}}"#
            let request = HTTPPostRequest(url: url, headers: ["Authorization: Bearer " + key, "Content-Type: application/json"],
                                          body: Array(event.utf8), timeoutMs: 30_000, allowPrivateTargets: true)
            poster.post(request) { outcome in
                done += 1
                switch outcome {
                case let .answered(status, latencyMs):
                    statuses[String(status), default: 0] += 1
                    if status == 202 { accepted += 1; latencies.append(latencyMs) }
                case .refusedAddress:
                    statuses["refused_address", default: 0] += 1
                case .transportFailed:
                    statuses["transport_failed", default: 0] += 1
                }
                if started < total { sendOne() }
            }
        }
        let startUs = Clock.monotonicUs()
        for _ in 0..<min(concurrency, total) { sendOne() }
        loop.run(until: { done == total })
        let seconds = Double(Clock.monotonicUs() - startUs) / 1e6
        poster.close()
        latencies.sort()
        func pct(_ p: Double) -> Int64 { latencies.isEmpty ? -1 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))] }
        let counts = statuses.sorted { $0.key < $1.key }.map { #""\#($0.key)":\#($0.value)"# }.joined(separator: ",")
        print(#"{"requests":\#(total),"accepted":\#(accepted),"rate":\#(Int(Double(done) / max(seconds, 1e-6))),"p50_ms":\#(pct(0.5)),"p99_ms":\#(pct(0.99)),"max_ms":\#(latencies.last ?? -1),"statuses":{\#(counts)}}"#)
    }
}
