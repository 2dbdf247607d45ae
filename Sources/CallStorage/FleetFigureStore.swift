import RedisClient

/// One minute of one app's outcomes, as a gateway counted them or as the fleet's sum.
public struct FleetMinuteCounts: Equatable, Sendable {
    /// Unix ms / 60,000.
    public var minute: Int64
    public var app: String
    /// Count per outcome name (`delivered_voip`, …).
    public var outcomes: [String: Int]

    public init(minute: Int64, app: String, outcomes: [String: Int]) {
        self.minute = minute
        self.app = app
        self.outcomes = outcomes
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
                    var byApp: [String: [String: Int]] = [:]
                    var i = 0
                    while i + 1 < items.count {
                        if let field = items[i].string, let n = items[i + 1].integer, let colon = field.firstIndex(of: ":") {
                            byApp[String(field[..<colon]), default: [:]][String(field[field.index(after: colon)...]), default: 0] += Int(n)
                        }
                        i += 2
                    }
                    return .success(byApp.keys.sorted().map { FleetMinuteCounts(minute: minute, app: $0, outcomes: byApp[$0]!) })
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
