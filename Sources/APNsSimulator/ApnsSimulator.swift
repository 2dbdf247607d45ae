import APNs
import EventLoop

/// A fault-injecting stand-in for APNs' provider API: an HTTP/2-over-TLS server on the
/// process's `EventLoop` that validates pushes like APNs, checks JWTs and client
/// certificates, and answers per device token as its scenarios say (docs/simulator.md).
///
/// Lifecycle: `init` loads keys and the TLS identity, `start()` listens, `close()` drops
/// every connection and flushes the log. Everything, including reading `stats` and
/// `recorded`, happens on the loop's thread. For tests, the demo and benchmarks only:
/// never in a production path (docs/architecture.md).
public final class ApnsSimulator {
    /// Bodies longer than this are recorded truncated (their size is kept in full).
    public static let maxRecordedBody = 16 * 1024

    /// The configuration in force (scenarios may change later through `setScenario`).
    public let config: SimulatorConfig
    /// The simulator's counters so far.
    public private(set) var stats = SimulatorStats()

    private let loop: EventLoop
    private let tls: TLSContext
    private var requestJudge: RequestJudge
    private let fcm: FcmEndpoints
    private var uuids = UUIDGenerator()
    private var recorder: RequestRecorder
    private var log: RequestLog?
    private var delays: DelayQueue?
    private var listener: TCPListener?
    private var connections: [Int: SimulatorConnection] = [:]
    /// Closed connections, freed by `reaper` once their own callbacks have returned.
    private var retired: [SimulatorConnection] = []
    private var reaper: LoopTimer?
    private var nextConnectionID = 1
    /// Plays the devices' apps for ring receipts (`SimulatorConfig.ringReceipts`); nil: off.
    private var ringReceipts: SimulatedRingReceipts?

    /// Loads the TLS identity, the token keys and opens the log. Does not listen yet.
    public init(loop: EventLoop, config: SimulatorConfig) throws(SimulatorError) {
        self.loop = loop
        self.config = config
        do {
            tls = try TLSContext.server(certFile: config.certFile, keyFile: config.keyFile, clientCAFile: config.clientCAFile)
        } catch {
            throw .tls(error)
        }
        let verifier = try ProviderTokenVerifier(keyFiles: config.tokenKeys, teamId: config.teamId,
                                                 maxAgeSeconds: config.maxTokenAgeSeconds)
        do {
            fcm = try FcmEndpoints(config: config)
        } catch {
            verifier.close()
            throw error
        }
        requestJudge = RequestJudge(scenarios: ScenarioBook(defaultScenario: config.defaultScenario, scenarios: config.scenarios,
                                                            tokenEnvironments: config.tokenEnvironments,
                                                            environment: config.sandbox ? .sandbox : .production),
                             bundleIDs: config.bundleIDs, verifier: verifier)
        recorder = RequestRecorder(limit: config.recordLimit)
        if let path = config.logFile {
            do {
                log = try RequestLog(loop: loop, path: path)
            } catch {
                verifier.close()
                fcm.close()
                throw error
            }
        }
        delays = DelayQueue(loop: loop) { [unowned self] entry in
            guard let connection = self.connections[entry.connectionID] else { return }
            switch entry.work {
            case let .answer(streamID): connection.releaseDelayed(streamID: streamID)
            case .endLinger: connection.endLinger()
            }
        }
        reaper = LoopTimer(loop: loop) { [unowned self] in self.retired.removeAll() }
        if let receipts = config.ringReceipts {
            do {
                ringReceipts = try SimulatedRingReceipts(loop: loop, config: receipts)
            } catch {
                log?.close()
                verifier.close()
                throw error
            }
        }
    }

    /// Starts listening on `config.host:config.port`.
    public func start() throws(SimulatorError) {
        loop.assertInLoop()
        guard listener == nil else { return }
        ringReceipts?.start()
        do {
            listener = try TCPListener(loop: loop, host: config.host, port: config.port) { [unowned self] fd in
                self.accept(fd)
            }
        } catch {
            throw .listen(error.message)
        }
    }

    /// The port listened on (0 before `start()`).
    public var port: Int { listener?.port ?? 0 }

    /// Makes `token` answer as `scenario` from its next request on (counters start afresh).
    public func setScenario(_ scenario: Scenario, for token: String) {
        requestJudge.scenarios.set(scenario, for: token)
    }

    /// The scenario of tokens without one of their own.
    public var defaultScenario: Scenario {
        get { requestJudge.scenarios.defaultScenario }
        set { requestJudge.scenarios.defaultScenario = newValue }
    }

    /// The last `config.recordLimit` judged requests, oldest first.
    public var recorded: [RecordedRequest] { recorder.requests }

    /// Requests judged for `token` since start: an APNs device token in any case, an FCM
    /// registration token as it is spelled.
    public func requestCount(for token: String) -> Int {
        recorder.perToken[token] ?? recorder.perToken[token.lowercased(), default: 0]
    }

    /// Every FCM access token issued so far expires now (the next message with one is
    /// refused 401 `UNAUTHENTICATED`).
    public func expireFcmAccessTokens() { fcm.expireAccessTokens() }

    /// Access tokens the FCM token endpoint granted, and JWTs it refused.
    public var fcmTokensGranted: Int { fcm.tokensGranted }
    public var fcmTokensRefused: Int { fcm.tokensRefused }

    /// Stops listening, drops every connection (unanswered streams die with them) and
    /// flushes the log. The simulator cannot be started again.
    public func close() {
        listener?.close()
        listener = nil
        for connection in connections.values { connection.close() }
        connections = [:]
        retired = []
        delays?.close()
        delays = nil
        reaper?.close()
        reaper = nil
        ringReceipts?.close()
        ringReceipts = nil
        log?.close()
        log = nil
        requestJudge.verifier.close()
        fcm.close()
    }

    // MARK: For connections

    private func accept(_ fd: Int32) {
        let id = nextConnectionID
        nextConnectionID += 1
        let connection = SimulatorConnection(id: id, server: self)
        let stream: TLSStream
        do {
            stream = try TLSStream.accept(loop: loop, context: tls, fd: fd, delegate: connection)
        } catch {
            connection.close()
            return
        }
        stats.connectionsAccepted += 1
        stats.maxConcurrentStreams[id] = 0
        connections[id] = connection
        connection.attach(stream)
    }

    func judge(_ request: IncomingRequest, body: [UInt8], certificateBundle: String?) -> Verdict {
        let now = Clock.unixMs() / 1000
        if fcm.serves(path: request.path) { return fcm.judge(request, body: body, scenarios: &requestJudge.scenarios, nowSeconds: now) }
        return requestJudge.judge(request, certificateBundle: certificateBundle, nowSeconds: now)
    }

    /// Counts, keeps and logs one judged request.
    func record(_ verdict: Verdict, request: IncomingRequest, body: [UInt8], apnsID: String,
                connectionID: Int, streamID: Int32) {
        let status: Int?
        let reason: ApnsReason?
        var delayMs: Int?
        var fcmCode: String?
        switch verdict.outcome {
        case let .answer(r): status = r?.status ?? 200; reason = r
        case let .answerLater(ms): status = 200; reason = nil; delayMs = ms
        case let .reply(r): status = r.status; reason = nil; fcmCode = r.fcmCode
        case let .replyLater(ms, r): status = r.status; reason = nil; delayMs = ms; fcmCode = r.fcmCode
        case .never: status = nil; reason = nil
        case .refuseStream, .dropConnection: preconditionFailure("unprocessed requests are not recorded")
        }
        stats.requests += 1
        if let status { stats.statusCounts[status, default: 0] += 1 } else { stats.unanswered += 1 }
        if status == 200, let ringReceipts { ringReceipts.accepted(topic: request.header("apns-topic"), body: body) }
        let now = Clock.unixMs()
        recorder.record(RecordedRequest(timeMs: now, connectionID: connectionID, streamID: streamID,
                                        method: request.method, path: request.path, token: verdict.token,
                                        headers: request.headers, body: body, bodyCount: request.bodyCount,
                                        status: status, reason: reason, apnsID: apnsID, fcmCode: fcmCode))
        guard let log else { return }
        var line = LogLine()
        line.field("time_ms", now)
        line.field("conn", connectionID)
        line.field("stream", streamID)
        line.field("method", request.method)
        line.field("path", request.path)
        line.field("token", verdict.token)
        line.field("push_type", request.header("apns-push-type") ?? verdict.pushType?.rawValue)
        line.field("topic", request.header("apns-topic"))
        line.field("priority", request.header("apns-priority"))
        line.field("expiration", request.header("apns-expiration"))
        line.field("apns_id", apnsID)
        line.field("collapse_id", request.header("apns-collapse-id"))
        line.field("payload_bytes", request.bodyCount)
        line.field("status", status)
        line.field("reason", reason?.text ?? fcmCode)
        line.field("delay_ms", delayMs)
        line.finish()
        log.append(line)
    }

    /// A fresh `apns-id` / `apns-unique-id`.
    func makeUUID() -> String { uuids.make() }

    /// Runs `work` for the connection after `ms` milliseconds (unless it is gone by then).
    func schedule(_ work: DelayQueue.Work, connectionID: Int, afterMs ms: Int) {
        delays?.add(work, connectionID: connectionID, afterMs: ms)
    }

    func noteOpenStreams(_ n: Int, connectionID: Int) {
        stats.maxConcurrentStreams[connectionID] = max(stats.maxConcurrentStreams[connectionID, default: 0], n)
    }

    func noteGoaway() { stats.goawaysSent += 1 }

    func noteRefusedStream() { stats.refusedStreams += 1 }

    func noteDroppedConnection() { stats.droppedConnections += 1 }

    func noteSettingsRaised() { stats.settingsRaised += 1 }

    /// A connection ended. It may still be on the call stack (its TLS callback), so it is
    /// kept until the reaper's turn of the loop.
    func connectionDidClose(_ connection: SimulatorConnection) {
        guard let closed = connections.removeValue(forKey: connection.id) else { return }
        retired.append(closed)
        reaper?.schedule(afterMs: 0)
    }
}

/// Why a simulator could not be set up or started.
public enum SimulatorError: Error, Equatable, CustomStringConvertible {
    /// The server certificate, its key or the client CA file could not be used.
    case tls(TLSError)
    /// A token key file is missing or not a P-256 key.
    case unusableKey(keyID: String, file: String)
    /// An FCM service account's key file is missing or not an RSA key.
    case unusableServiceAccountKey(email: String, file: String)
    /// The request log could not be opened.
    case logFile(path: String, reason: String)
    /// The listening socket could not be bound.
    case listen(String)
    /// `ring_receipts` names a Redis URL that cannot be used.
    case ringReceipts(String)

    public var description: String {
        switch self {
        case let .tls(error): return "TLS: \(error.message)"
        case let .unusableKey(kid, file): return "token key \(kid): \(file) is not a readable P-256 key"
        case let .unusableServiceAccountKey(email, file): return "FCM service account \(email): \(file) is not a readable RSA key"
        case let .logFile(path, reason): return "cannot open log file \(path): \(reason)"
        case let .listen(why): return why
        case let .ringReceipts(why): return "ring_receipts: \(why)"
        }
    }
}

/// Random lower-case canonical UUIDs (version 4) for `apns-id` and `apns-unique-id`.
///
/// A SplitMix64 generator seeded once: these ids need to be unique, not unpredictable, and
/// the system generator costs a syscall per draw on a path a benchmark hammers.
struct UUIDGenerator {
    private var state = UInt64.random(in: .min ... .max)
    private static let hex = Array("0123456789abcdef".utf8)

    mutating func make() -> String {
        var bytes = [UInt8](repeating: 0, count: 16)
        for half in 0..<2 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for i in 0..<8 { bytes[half * 8 + i] = UInt8(truncatingIfNeeded: z >> (8 * UInt64(i))) }
        }
        bytes[6] = (bytes[6] & 0x0f) | 0x40
        bytes[8] = (bytes[8] & 0x3f) | 0x80
        var text = [UInt8]()
        text.reserveCapacity(36)
        for (i, b) in bytes.enumerated() {
            if i == 4 || i == 6 || i == 8 || i == 10 { text.append(UInt8(ascii: "-")) }
            text.append(Self.hex[Int(b >> 4)])
            text.append(Self.hex[Int(b & 0xf)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}
