import RedisClient

/// One minute of one app's outcomes, as a gateway counted them or as the fleet's sum.
public struct FleetMinuteCounts: Equatable, Sendable {
    /// Unix ms / 60,000.
    public var minute: Int64
    public var app: String
    /// Count per outcome name (`delivered_voip`, …).
    public var outcomes: [String: Int]
    /// XADD→answer latencies: count per histogram bucket (the console's `OutcomeHistory` buckets).
    public var latency: [Int: Int]

    public init(minute: Int64, app: String, outcomes: [String: Int], latency: [Int: Int] = [:]) {
        self.minute = minute
        self.app = app
        self.outcomes = outcomes
        self.latency = latency
    }
}

/// What a gateway says of itself on the fleet page, kept beside its lease in the registry.
public struct GatewayCard: Equatable, Sendable {
    /// Its consumer name, as in the registry.
    public var name: String
    public var roles: [String]
    public var version: String
    public var startedMs: Int64
    /// When it last wrote this card (unix ms, its clock).
    public var seenMs: Int64
    public var callsInFlight: Int

    public init(name: String, roles: [String], version: String, startedMs: Int64, seenMs: Int64, callsInFlight: Int) {
        self.name = name
        self.roles = roles
        self.version = version
        self.startedMs = startedMs
        self.seenMs = seenMs
        self.callsInFlight = callsInFlight
    }
}

/// The fleet's figures (docs/operations.md, "Console"): every gateway adds what it counted to
/// per-minute hashes (`GatewayKeys.fleetMinute`), so reading them gives the sum over every
/// gateway — those that stopped too — and the registry (`GatewayKeys.consumers`) says which
/// gateways live now. A few commands per gateway every few seconds, none per event.
public final class FleetFigureStore {
    /// How long a minute's hash is kept: the console shows the last hour.
    public static let keptSeconds = 7_200

    public let topology: RedisTopology
    let keys: GatewayKeys
    private let liveConsumersScript = RedisScript(CallStoreLua.liveConsumers)

    public init(topology: RedisTopology, prefix: String) {
        self.topology = topology
        keys = GatewayKeys(prefix: prefix)
    }

    /// Adds `counts` to the fleet's minutes: one HINCRBY per app and outcome and one EXPIRE per
    /// minute, pipelined. A failure may leave part of them added (the caller keeps the rest
    /// for its next add: `OutcomeHistory.flushed`, only after success, so a failed add
    /// repeated adds twice what did get in — rare, and only a figure).
    public func add(_ counts: [FleetMinuteCounts], completion: @escaping (Result<Void, RedisError>) -> Void) {
        var commands: [(key: String, args: [String])] = []
        var minutes: Set<Int64> = []
        for c in counts {
            let key = keys.fleetMinute(c.minute)
            for (outcome, n) in c.outcomes where n != 0 { commands.append((key, ["HINCRBY", key, c.app + ":" + outcome, String(n)])) }
            for (bucket, n) in c.latency where n != 0 {
                commands.append((key, ["HINCRBY", key, c.app + ":" + Self.latencyField + String(bucket), String(n)]))
            }
            minutes.insert(c.minute)
        }
        for m in minutes {
            let key = keys.fleetMinute(m)
            commands.append((key, ["EXPIRE", key, String(Self.keptSeconds)]))
        }
        eachOf(Array(commands.indices), completion: { (result: Result<[Int: Void], RedisError>) in completion(result.map { _ in () }) }) { i, done in
            self.topology.send(commands[i].args, key: commands[i].key) { result in
                done(result.flatMap { reply in
                    if case let .error(text) = reply { return .failure(.unexpectedReply(text)) }
                    return .success(())
                })
            }
        }
    }

    /// The fleet's counts of each minute in `minutes`, per app: one HGETALL per minute, pipelined.
    public func counts(minutes: ClosedRange<Int64>, completion: @escaping (Result<[FleetMinuteCounts], RedisError>) -> Void) {
        eachOf(Array(minutes), completion: { (result: Result<[Int64: [FleetMinuteCounts]], RedisError>) in
            completion(result.map { byMinute in byMinute.keys.sorted().flatMap { byMinute[$0]! } })
        }) { minute, done in
            let key = self.keys.fleetMinute(minute)
            self.topology.send(["HGETALL", key], key: key) { result in
                done(result.flatMap { reply in
                    guard let items = reply.array else { return .failure(.unexpectedReply("fleet minute \(reply)")) }
                    var byApp: [String: FleetMinuteCounts] = [:]
                    var i = 0
                    while i + 1 < items.count {
                        // A count is what gateways added, 0 ... `mostPerField`; a hash edited by
                        // hand may hold anything, and the page sums 60 minutes of it.
                        if let field = items[i].string, let raw = items[i + 1].integer, let colon = field.firstIndex(of: ":") {
                            let n = min(max(raw, 0), Self.mostPerField)
                            let app = String(field[..<colon]), name = field[field.index(after: colon)...]
                            if byApp[app] == nil { byApp[app] = FleetMinuteCounts(minute: minute, app: app, outcomes: [:]) }
                            if name.hasPrefix(Self.latencyField), let bucket = Int(name.dropFirst(Self.latencyField.count)) {
                                byApp[app]!.latency[bucket, default: 0] += Int(n)
                            } else {
                                byApp[app]!.outcomes[String(name), default: 0] += Int(n)
                            }
                        }
                        i += 2
                    }
                    return .success(byApp.keys.sorted().map { byApp[$0]! })
                })
            }
        }
    }

    /// The most one field of a minute is read as: far above any gateway's count, and 60 minutes
    /// of every field summed stay far from overflowing.
    static let mostPerField: Int64 = 1 << 40

    /// A minute hash's fields of latency buckets: `APP:latency:BUCKET` (outcome names hold no colon).
    static let latencyField = "latency:"

    /// How long a gateway's card lasts without being written again, s.
    public static let cardSeconds = 30

    /// Writes `card` (`GatewayKeys.gatewayCard`): one HSET and one EXPIRE, pipelined.
    public func announce(_ card: GatewayCard, completion: @escaping (Result<Void, RedisError>) -> Void) {
        let key = keys.gatewayCard(card.name)
        let fields = ["roles", card.roles.joined(separator: ","), "version", card.version, "started_ms", String(card.startedMs),
                      "seen_ms", String(card.seenMs), "in_flight", String(card.callsInFlight)]
        topology.send(["HSET", key] + fields, key: key) { _ in }
        topology.send(["EXPIRE", key, String(Self.cardSeconds)], key: key) { result in completion(result.map { _ in () }) }
    }

    /// The cards of `names` (nil for a gateway without one: not written yet, or by a version
    /// before cards), one HGETALL each, pipelined.
    public func cards(_ names: [String], completion: @escaping (Result<[String: GatewayCard], RedisError>) -> Void) {
        eachOf(names, completion: { (result: Result<[String: GatewayCard?], RedisError>) in
            completion(result.map { $0.compactMapValues { $0 } })
        }) { name, done in
            let key = self.keys.gatewayCard(name)
            self.topology.send(["HGETALL", key], key: key) { result in
                done(result.flatMap { reply in
                    guard let items = reply.array else { return .failure(.unexpectedReply("gateway card \(reply)")) }
                    var f: [String: String] = [:]
                    var i = 0
                    while i + 1 < items.count {
                        if let k = items[i].string { f[k] = items[i + 1].string ?? "" }
                        i += 2
                    }
                    guard let started = f["started_ms"].flatMap({ Int64($0) }), let seen = f["seen_ms"].flatMap({ Int64($0) }) else {
                        return .success(nil)
                    }
                    return .success(GatewayCard(name: name, roles: (f["roles"] ?? "").split(separator: ",").map(String.init),
                                                version: f["version"] ?? "", startedMs: started, seenMs: seen,
                                                callsInFlight: f["in_flight"].flatMap { Int($0) } ?? 0))
                })
            }
        }
    }

    /// The gateways whose lease in the registry has not lapsed (Redis' clock), by name.
    public func liveGateways(completion: @escaping (Result<[String], RedisError>) -> Void) {
        liveConsumersScript.run(on: topology.channel(for: keys.consumers), keys: [keys.consumers], args: []) { result in
            completion(result.flatMap { reply in
                guard let items = reply.array else { return .failure(.unexpectedReply("live consumers \(reply)")) }
                return .success(items.compactMap(\.string).sorted())
            })
        }
    }
}
