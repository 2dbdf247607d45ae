import EventLoop
import RedisClient

/// An app's pause (`AppKeys.paused`): set and removed by an operator (`pushgw apps pause`,
/// `resume`, the console's button), and read by every router now and then (whether it exists)
/// and by `pushgw apps status` (who paused it, when, why). A paused app's calls wait in its
/// stream: no router reads it (docs/operations.md, *Pausing an app*).
///
/// Completions run on the loop, once each. Loop-owned, like the topology it sends on.
public final class AppPauseStore {
    public let topology: RedisTopology
    private let pauseScript = RedisScript(AppPauseLua.pause)

    public init(topology: RedisTopology) {
        self.topology = topology
    }

    /// The longest reason a pause takes, in characters (`pushgw apps pause --reason`, the console).
    public static let maxReason = 200

    /// Who paused an app, when and why.
    public struct Pause: Equatable, Sendable {
        /// Unix ms when it was paused.
        public var sinceMs: Int64
        public var user: String
        /// The operator's words (`--reason`); empty when none was given.
        public var reason: String

        public init(sinceMs: Int64, user: String, reason: String) {
            self.sinceMs = sinceMs
            self.user = user
            self.reason = reason
        }
    }

    /// Pauses `app` unless it is paused already. Answers nil when this paused it, else the
    /// pause in place (which is kept as it was: the first pause's who, when and why). A new
    /// pause is then stamped (`GatewayKeys.pausesChanged`) for the routers to read it.
    public func pause(_ app: AppKeys, _ pause: Pause, completion: @escaping (Result<Pause?, RedisError>) -> Void) {
        pauseScript.run(on: topology.channel(for: app.paused), keys: [app.paused],
                        args: [String(pause.sinceMs), pause.user, pause.reason]) { result in
            let answer = result.flatMap { reply -> Result<Pause?, RedisError> in
                if reply.integer == 1 { return .success(nil) }
                return AppPauseStore.parse(reply).map { .success($0) } ?? .failure(.unexpectedReply("app pause \(reply)"))
            }
            guard case .success(nil) = answer else { return completion(answer) }
            self.stamp(app, answer, completion)
        }
    }

    /// Resumes `app`: answers the pause it removed, nil when it was not paused. A resume is
    /// then stamped as a pause is.
    public func resume(_ app: AppKeys, completion: @escaping (Result<Pause?, RedisError>) -> Void) {
        pauseScript.run(on: topology.channel(for: app.paused), keys: [app.paused], args: []) { result in
            let answer = result.flatMap { reply -> Result<Pause?, RedisError> in
                if reply.integer == 0 { return .success(nil) }
                return AppPauseStore.parse(reply).map { .success($0) } ?? .failure(.unexpectedReply("app resume \(reply)"))
            }
            guard case .success(_?) = answer else { return completion(answer) }
            self.stamp(app, answer, completion)
        }
    }

    /// Writes a new `pausesChanged` stamp, then answers `answer` (or the stamp's failure: the
    /// change is made, and the routers see it at their next full read, within 30 s).
    private func stamp(_ app: AppKeys, _ answer: Result<Pause?, RedisError>, _ completion: @escaping (Result<Pause?, RedisError>) -> Void) {
        let key = GatewayKeys(prefix: app.prefix).pausesChanged
        let value = "\(Clock.unixMs())-\(UInt32.random(in: 0...UInt32.max))"
        topology.send(["SET", key, value], key: key) { result in
            switch result {
            case .success: completion(answer)
            case let .failure(error): completion(.failure(error))
            }
        }
    }

    /// The `pausesChanged` stamp of `prefix` ("" when none was written yet).
    public func changeStamp(prefix: String, completion: @escaping (Result<String, RedisError>) -> Void) {
        let key = GatewayKeys(prefix: prefix).pausesChanged
        topology.send(["GET", key], key: key) { result in completion(result.map { $0.string ?? "" }) }
    }

    /// The pause of each of `apps` (nil: not paused), one HGETALL each, pipelined.
    public func pauses(_ apps: [AppKeys], completion: @escaping (Result<[AppKeys: Pause?], RedisError>) -> Void) {
        eachApp(apps, completion: completion) { app, done in
            self.topology.send(["HGETALL", app.paused], key: app.paused) { result in
                done(result.flatMap { reply in
                    guard let items = reply.array else { return .failure(.unexpectedReply("app pause \(reply)")) }
                    return .success(items.isEmpty ? nil : AppPauseStore.parse(reply))
                })
            }
        }
    }

    /// Which of `apps` are paused, one EXISTS each, pipelined: what a router reads when the
    /// stamp changed (`changeStamp`), the least that tells it.
    public func pausedApps(_ apps: [AppKeys], completion: @escaping (Result<Set<AppKeys>, RedisError>) -> Void) {
        eachApp(apps, completion: { result in completion(result.map { Set($0.filter(\.value).keys) }) }) { app, done in
            self.topology.send(["EXISTS", app.paused], key: app.paused) { result in
                done(result.flatMap { $0.integer.map { .success($0 == 1) } ?? .failure(.unexpectedReply("app pause \($0)")) })
            }
        }
    }

    /// A pause from the hash's field/value list; nil when it has no `since_ms`.
    static func parse(_ reply: RedisReply) -> Pause? {
        guard let items = reply.array else { return nil }
        var fields: [String: String] = [:]
        var i = 0
        while i + 1 < items.count {
            if let name = items[i].string { fields[name] = items[i + 1].string ?? "" }
            i += 2
        }
        guard let since = fields["since_ms"].flatMap({ Int64($0) }) else { return nil }
        return Pause(sinceMs: since, user: fields["user"] ?? "", reason: fields["reason"] ?? "")
    }
}

/// The script of `AppPauseStore`: one key, the app's pause hash.
enum AppPauseLua {
    /// ARGV: since_ms, user, reason to pause (returns 1 when it paused the app, else the pause
    /// in place as HGETALL gives it); none to resume (returns 0 when it was not paused, else
    /// the pause it removed).
    static let pause = """
        local found = redis.call('HGETALL', KEYS[1])
        if #ARGV == 0 then
          if #found == 0 then return 0 end
          redis.call('DEL', KEYS[1])
          return found
        end
        if #found > 0 then return found end
        redis.call('HSET', KEYS[1], 'since_ms', ARGV[1], 'user', ARGV[2], 'reason', ARGV[3])
        return 1
        """
}
