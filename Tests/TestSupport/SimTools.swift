import EventLoop
import Foundation

/// What an external tool (nghttp, h2load) printed and how it ended.
public struct SimToolRun: Sendable {
    public let exitStatus: Int32
    /// stdout and stderr, interleaved as written.
    public let output: String
    /// True when the run hit the harness's safety limit and was terminated.
    public let killed: Bool
}

/// Runs the nghttp2 command-line clients against a server on the caller's loop.
///
/// Why: the simulator must be checked by a client that is not pushgw's own. The tool runs
/// as a child process while the calling thread keeps turning the loop (the server lives on
/// it), checking on the child every few milliseconds; output goes to a file so a chatty tool
/// can never block on a full pipe.
public enum SimTools {
    /// Runs `executable` with `arguments` until it exits, turning `loop` meanwhile. A run
    /// longer than `limitSeconds` fails the test and is terminated (a safety net against
    /// hangs, not a timing check).
    public static func run(_ executable: String, _ arguments: [String], on loop: EventLoop,
                           limitSeconds: Int64 = 60) throws -> SimToolRun {
        let child = try ChildProcess(executable, arguments, mergeStderr: true)
        let finished = loop.run(waitingFor: "\(executable) \(arguments.prefix(4).joined(separator: " ")) to finish",
                                timeoutMs: limitSeconds * 1000) { !child.isRunning }
        let status = child.stop(signal: SIGTERM)
        return SimToolRun(exitStatus: status ?? -1, output: child.output, killed: !finished)
    }

    /// One request with `nghttp -v`: POST of `bodyFile` (nil: no body) to `https://127.0.0.1:port` + `path`,
    /// then one to each of `morePaths`, all at once on the same connection.
    /// `headers` are `name: value` lines (`:method: GET` overrides the method).
    public static func nghttp(port: Int, path: String, morePaths: [String] = [], headers: [String], bodyFile: String?,
                              clientCert: (cert: String, key: String)? = nil, timeoutSeconds: Int = 10,
                              on loop: EventLoop) throws -> NghttpResult {
        var args = ["-v", "--no-dep", "-t", "\(timeoutSeconds)"]
        for h in headers { args += ["-H", h] }
        if let bodyFile { args += ["-d", bodyFile] }
        if let clientCert { args += ["--cert", clientCert.cert, "--key", clientCert.key] }
        args += ([path] + morePaths).map { "https://127.0.0.1:\(port)\($0)" }
        return NghttpResult(try run("/usr/bin/nghttp", args, on: loop))
    }

    /// `h2load` POSTing `bodyFile` to `path` `requests` times over `clients` connections with
    /// up to `streams` concurrent streams each.
    public static func h2load(port: Int, path: String, headers: [String], bodyFile: String,
                              requests: Int, clients: Int, streams: Int, on loop: EventLoop) throws -> H2LoadResult {
        var args = ["-n", "\(requests)", "-c", "\(clients)", "-m", "\(streams)", "-d", bodyFile]
        for h in headers { args += ["-H", h] }
        args.append("https://127.0.0.1:\(port)\(path)")
        return H2LoadResult(try run("/usr/bin/h2load", args, on: loop))
    }
}

/// The parts of `nghttp -v` output the simulator tests read.
public struct NghttpResult: Sendable {
    public let run: SimToolRun
    /// Every `:status` received, in order.
    public let statuses: [Int]
    /// The stream id of each of `statuses`.
    public let statusStreams: [Int]
    /// Response header fields received (last value wins), names lower case.
    public let headers: [String: String]
    /// Every SETTINGS_MAX_CONCURRENT_STREAMS value received from the server, in order.
    public let maxConcurrentStreamsSettings: [Int]
    /// The APNs error body (`{"reason":…}`) if one was printed.
    public let errorBody: String?

    init(_ run: SimToolRun) {
        self.run = run
        var statuses: [Int] = []
        var statusStreams: [Int] = []
        var headers: [String: String] = [:]
        var settings: [Int] = []
        var inRecvSettings = false
        for line in run.output.split(separator: "\n", omittingEmptySubsequences: false) {
            if let r = line.range(of: "] recv (stream_id=") {
                let rest = line[r.upperBound...]
                guard let close = rest.range(of: ") ") else { continue }
                let field = rest[close.upperBound...]
                let stream = Int(rest[..<close.lowerBound]) ?? -1
                guard let colon = field.dropFirst().firstIndex(of: ":") else { continue }
                let name = String(field[..<colon]).lowercased()
                let value = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if name == ":status", let s = Int(value) {
                    statuses.append(s)
                    statusStreams.append(stream)
                }
                headers[name] = value
            }
            if line.contains("] recv SETTINGS frame") { inRecvSettings = true; continue }
            if line.hasPrefix("[") { inRecvSettings = false }
            if inRecvSettings, let r = line.range(of: "[SETTINGS_MAX_CONCURRENT_STREAMS(0x03):") {
                settings.append(Int(line[r.upperBound...].prefix { $0.isNumber }) ?? -1)
            }
        }
        self.statuses = statuses
        self.statusStreams = statusStreams
        self.headers = headers
        maxConcurrentStreamsSettings = settings
        if let start = run.output.range(of: "{\"reason\":"), let end = run.output[start.lowerBound...].firstIndex(of: "}") {
            errorBody = String(run.output[start.lowerBound...end])
        } else {
            errorBody = nil
        }
    }
}

/// The counts in h2load's summary.
public struct H2LoadResult: Sendable {
    public let run: SimToolRun
    /// From `requests: N total, N started, N done, N succeeded, N failed, N errored, N timeout`.
    public let succeeded: Int
    public let failed: Int
    /// From `status codes: N 2xx, N 3xx, N 4xx, N 5xx`.
    public let status2xx: Int

    init(_ run: SimToolRun) {
        self.run = run
        func number(before label: String, onLineStarting prefix: String) -> Int {
            guard let line = run.output.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
                  let r = line.range(of: " " + label) else { return -1 }
            let digits = line[..<r.lowerBound].reversed().prefix { $0.isNumber }
            return Int(String(digits.reversed())) ?? -1
        }
        succeeded = number(before: "succeeded", onLineStarting: "requests:")
        failed = number(before: "failed", onLineStarting: "requests:")
        status2xx = number(before: "2xx", onLineStarting: "status codes:")
    }
}
