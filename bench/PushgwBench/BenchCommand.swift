import APNs
import EventLoop
import Foundation
import Glibc

/// The verbs of `pushgw-bench`; each prints one JSON line of figures.
enum BenchCommand {
    static func main(_ args: [String]) {
        guard let verb = args.first else { usage() }
        let options = Options(Array(args.dropFirst()))
        switch verb {
        case "apns": ApnsThroughput.run(options)
        case "fcm": FcmThroughput.run(options)
        case "jwt": printJWT(options)
        case "e2e": EndToEnd.run(options)
        case "retry-timing": RetryTiming.run(options)
        case "decode": DecodeBench.run(options)
        case "machine": MachineBench.run(options)
        case "scripts": ScriptsList.run()
        case "ingest": IngestLoad.run(options)
        case "retry-mac": RetryMACBench.run(options)
        default: usage()
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("""
        usage: pushgw-bench apns --port P --ca FILE --key AuthKey.p8 --token HEX [--host H] [--connections C] [--streams M] [--requests N]
               pushgw-bench fcm --port P --ca FILE --account SERVICE-ACCOUNT.json [--host H] [--token T] [--connections C] [--streams M] [--requests N]
               pushgw-bench jwt --key AuthKey.p8
               pushgw-bench e2e --redis URL --port P --ca FILE --key AuthKey.p8 --tokens HEX,HEX [--apps 4] [--events N] [--rate R] [--seconds S]
               pushgw-bench retry-timing --redis URL [--apps 100] [--retries 10000] [--spread-ms 3000] [--lead-ms 1500] [--idle-s 2]
               pushgw-bench decode [--events N] [--shape e2e|design]
               pushgw-bench ingest --url http://HOST:PORT --app APP --key KEY --token HEX [--requests N] [--concurrency C] [--prefix P]
               pushgw-bench machine [--calls N] [--sizes 1] [--only machine|router]
               pushgw-bench scripts
               pushgw-bench retry-mac [--retries N]
        """.utf8))
        exit(2)
    }

    /// Prints a JWT for h2load's `authorization` header, so both clients send the same bytes.
    static func printJWT(_ o: Options) {
        do {
            let key = try ES256SigningKey.load(p8File: o.string("key"))
            let signer = ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key)
            print(try signer.token(issuedAt: Int64(Date().timeIntervalSince1970)))
        } catch {
            FileHandle.standardError.write(Data("pushgw-bench: \(error)\n".utf8))
            exit(1)
        }
    }
}

/// `--name value` pairs.
struct Options {
    private var values: [String: String] = [:]
    init(_ args: [String]) {
        var i = 0
        while i + 1 < args.count {
            values[String(args[i].drop(while: { $0 == "-" }))] = args[i + 1]
            i += 2
        }
    }
    func string(_ name: String, _ fallback: String? = nil) -> String {
        guard let v = values[name] ?? fallback else { BenchCommand.usage() }
        return v
    }
    func int(_ name: String, _ fallback: Int) -> Int { values[name].flatMap { Int($0) } ?? fallback }
}

/// Peak resident set size of this process in MB (getrusage's ru_maxrss is in KB on Linux).
func peakRSSMegabytes() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

/// CPU seconds (user + system) this process has used so far.
func ownCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds (user + system) process `pid` has used so far, from /proc (clock-tick
/// resolution, 10 ms here: read it around runs of a second or so); nil when unreadable.
func processCPUSeconds(_ pid: Int) -> Double? {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = text.lastIndex(of: ")") else { return nil }
    // Fields after the command name: state is field 3, utime 14 and stime 15.
    let fields = text[text.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// Pushes N requests through one `ApnsClient` with C connections × M streams, keeping exactly
/// C×M in flight (h2load's closed loop), and reports requests per second and the CPU time
/// per request of this process.
enum ApnsThroughput {
    static func run(_ o: Options) {
        let loop = EventLoop()
        let connections = o.int("connections", 1)
        let streams = o.int("streams", 100)
        let total = o.int("requests", 100_000)
        do {
            let key = try ES256SigningKey.load(p8File: o.string("key"))
            let source = ProviderTokenSource(signer: ProviderTokenSigner(teamId: "TEAM123456", keyId: "KEY1234567", key: key))
            var config = ApnsClientSettings(host: o.string("host", "127.0.0.1"), port: o.int("port", 0),
                                            caFile: o.string("ca"), authentication: .token(source))
            config.connections = connections
            config.maxStreamsPerConnection = streams
            config.requestTimeoutMs = 30_000
            let client = try ApnsClient(loop: loop, settings: config)
            let payload = Array(String(repeating: "x", count: 250).utf8)
            let body = Array(#"{"caller":"+15551234567","callerName":"Alice Johnson","pad":""#.utf8) + payload + Array(#""}"#.utf8)
            let push = try PushNotification(deviceToken: o.string("token"), bundleID: "com.example.app",
                                            pushType: .voip, payload: body, expiration: 0)
            var started = 0, done = 0, ok = 0
            var startUs: Int64 = 0
            func sendOne() {
                started += 1
                client.send(push) { result in
                    done += 1
                    if case let .success(r) = result, r.isAccepted { ok += 1 }
                    if started < total { sendOne() }
                }
            }
            // Warm the connections first so handshakes are not measured (h2load excludes them too).
            client.connect()
            loop.run(until: { client.activeConnections == connections })
            startUs = Clock.monotonicUs()
            let cpuBefore = ownCPUSeconds()
            for _ in 0..<min(total, connections * streams) { sendOne() }
            loop.run(until: { done == total })
            let seconds = Double(Clock.monotonicUs() - startUs) / 1e6
            let cpuPerRequest = (ownCPUSeconds() - cpuBefore) * 1e6 / Double(total)
            print(#"{"requests":\#(total),"ok":\#(ok),"seconds":\#(String(format: "%.3f", seconds)),"rps":\#(Int(Double(total) / seconds)),"peak_rss_mb":\#(String(format: "%.1f", peakRSSMegabytes())),"cpu_us_per_request":\#(String(format: "%.2f", cpuPerRequest))}"#)
            client.close()
        } catch {
            FileHandle.standardError.write(Data("pushgw-bench: \(error)\n".utf8))
            exit(1)
        }
    }
}
