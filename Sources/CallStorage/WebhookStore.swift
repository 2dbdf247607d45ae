import RedisClient

/// The Redis side of webhooks (docs/webhooks.md): the app's deliveries still to make
/// (`AppKeys.webhooks`, written by the scripts that record results), read through one consumer
/// group, and its webhook dead letters (`AppKeys.webhooksDead`).
///
/// Invariants: a delivery leaves `webhooks` only in the step that acknowledges it, delivered
/// (`delivered`) or moved to the dead letters (`deadLetter`, one script); a replay moves dead
/// letters back in one script. Every key is in the app's slot.
///
/// Completions run on the loop, once each. Loop-owned.
public final class WebhookStore {
    public let topology: RedisTopology
    /// The consumer group of every app's webhooks stream.
    public static let group = "pushgw-webhooks"
    private let acknowledgeScript = RedisScript(WebhookLua.acknowledge)
    private let deadLetterScript = RedisScript(WebhookLua.deadLetter)
    private let replayScript = RedisScript(WebhookLua.replay)

    public init(topology: RedisTopology) { self.topology = topology }

    /// One delivery: its entry in `webhooks`, the result JSON, and the result's id in `results`.
    public struct Delivery: Equatable, Sendable {
        public let entryID: String
        public let result: [UInt8]
        /// The results entry id: the `Idempotency-Key` (the entry's own id when absent).
        public let resultsEntry: String
        /// When a replay put it back (`pushgw webhooks replay`), unix ms; nil for a first delivery.
        public var replayedAtMs: Int64?

        public init(entryID: String, result: [UInt8], resultsEntry: String) {
            self.entryID = entryID
            self.result = result
            self.resultsEntry = resultsEntry
        }

        init(_ entry: StreamEntry) {
            self.init(entryID: entry.id, result: entry.values["result"] ?? Array("{}".utf8),
                      resultsEntry: entry.values["results_entry"].map { String(decoding: $0, as: UTF8.self) } ?? entry.id)
            replayedAtMs = entry.values["replayed_at_ms"].flatMap { Int64(String(decoding: $0, as: UTF8.self)) }
        }

        /// Since when the delivery is retried, unix ms: its replay, else its result's time (the
        /// results entry id's).
        public var retriedSinceMs: Int64 {
            replayedAtMs ?? Int64(resultsEntry.prefix { $0 != "-" }) ?? 0
        }
    }

    /// Creates the consumer group (from the stream's start, the stream too) unless it exists.
    public func ensureGroup(_ app: AppKeys, completion: @escaping (Result<Void, RedisError>) -> Void) {
        topology.send(["XGROUP", "CREATE", app.webhooks, WebhookStore.group, "0", "MKSTREAM"], key: app.webhooks) { result in
            switch result {
            case .success: completion(.success(()))
            case let .failure(error) where "\(error)".contains("BUSYGROUP"): completion(.success(()))
            case let .failure(error): completion(.failure(error))
            }
        }
    }

    /// Up to `count` deliveries for `consumer`: its own pending ones from the start (`own`:
    /// after a restart under the same name), or new ones.
    public func read(_ app: AppKeys, consumer: String, own: Bool, count: Int,
                     completion: @escaping (Result<[Delivery], RedisError>) -> Void) {
        let args = ["XREADGROUP", "GROUP", WebhookStore.group, consumer, "COUNT", String(count), "STREAMS", app.webhooks,
                    own ? "0" : ">"]
        topology.send(args, key: app.webhooks) { result in
            completion(result.flatMap { reply in
                do { return .success((try StreamReplies.read(reply)[app.webhooks] ?? []).map(Delivery.init)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// Takes over deliveries another consumer left pending for at least `minIdleMs` (a gateway
    /// that died; a live one touches its own: `touch`). Up to `count`.
    public func takeOver(_ app: AppKeys, consumer: String, minIdleMs: Int64, count: Int,
                         completion: @escaping (Result<[Delivery], RedisError>) -> Void) {
        let args = ["XAUTOCLAIM", app.webhooks, WebhookStore.group, consumer, String(minIdleMs), "0-0", "COUNT", String(count)]
        topology.send(args, key: app.webhooks) { result in
            completion(result.flatMap { reply in
                guard let parts = reply.array, parts.count >= 2 else { return .failure(.unexpectedReply("XAUTOCLAIM \(reply)")) }
                do { return .success(try StreamReplies.entryList(parts[1]).entries.map(Delivery.init)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// Resets the idle time of deliveries `consumer` holds (waiting for a retry), so no other
    /// gateway takes them over while it is alive.
    public func touch(_ app: AppKeys, consumer: String, entryIDs: [String], completion: @escaping (Result<Void, RedisError>) -> Void) {
        guard !entryIDs.isEmpty else { return completion(.success(())) }
        topology.send(["XCLAIM", app.webhooks, WebhookStore.group, consumer, "0"] + entryIDs + ["JUSTID"], key: app.webhooks) {
            completion($0.map { _ in () })
        }
    }

    /// Delivered: XACK and XDEL together.
    public func delivered(_ app: AppKeys, entryID: String, completion: @escaping (Result<Void, RedisError>) -> Void) {
        acknowledgeScript.run(on: topology.channel(for: app.webhooks), keys: [app.webhooks], args: [WebhookStore.group, entryID]) {
            completion($0.map { _ in () })
        }
    }

    /// Gives up on a delivery: its fields with `reason`, `attempts` and `failed_at_ms` to the
    /// webhook dead letters, then XACK and XDEL, in one script.
    public func deadLetter(_ app: AppKeys, _ delivery: Delivery, reason: String, attempts: Int, failedAtMs: Int64,
                           completion: @escaping (Result<Void, RedisError>) -> Void) {
        let args: [RedisArgument] = [.text(WebhookStore.group), .text(delivery.entryID), .bytes(delivery.result),
                                     .text(delivery.resultsEntry), .text(reason), .text(String(attempts)), .text(String(failedAtMs))]
        deadLetterScript.run(on: topology.channel(for: app.webhooks), keys: [app.webhooks, app.webhooksDead], arguments: args) {
            completion($0.map { _ in () })
        }
    }

    /// A webhook dead letter as listed.
    public struct DeadDelivery: Equatable, Sendable {
        public let entryID: String
        public let fields: [String: String]
    }

    /// The oldest `count` webhook dead letters.
    public func dead(_ app: AppKeys, count: Int, completion: @escaping (Result<[DeadDelivery], RedisError>) -> Void) {
        topology.send(["XRANGE", app.webhooksDead, "-", "+", "COUNT", String(count)], key: app.webhooksDead) { result in
            completion(result.flatMap { reply in
                do { return .success(try StreamReplies.range(reply).map { DeadDelivery(entryID: $0.id, fields: $0.fields) }) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }

    /// Moves up to `count` webhook dead letters (the oldest first; only `entryIDs` when given)
    /// back to the deliveries, with a fresh result time so they get their full retry time
    /// again; returns how many moved.
    public func replay(_ app: AppKeys, entryIDs: [String] = [], count: Int, completion: @escaping (Result<Int, RedisError>) -> Void) {
        replayScript.run(on: topology.channel(for: app.webhooks), keys: [app.webhooks, app.webhooksDead],
                         args: [String(count)] + entryIDs) { result in
            completion(result.flatMap { reply in
                guard let moved = reply.integer else { return .failure(.unexpectedReply("webhook replay \(reply)")) }
                return .success(Int(moved))
            })
        }
    }
}

/// The scripts of `WebhookStore`. KEYS[1] is always the app's webhooks stream.
enum WebhookLua {
    /// KEYS: webhooks. ARGV: group, entry id. XACK then XDEL.
    static let acknowledge = CallStoreLua.acknowledging + """
        return acknowledge(KEYS[1], ARGV[1], {ARGV[2]})
        """

    /// KEYS: webhooks, webhooks dead. ARGV: group, entry id, result, results entry, reason,
    /// attempts, failed_at_ms. Writes the dead letter only while the entry is still pending (a
    /// copy taken over by another gateway and finished there writes nothing).
    static let deadLetter = CallStoreLua.acknowledging + """
        local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
        if #pending == 0 then return 0 end
        redis.call('XADD', KEYS[2], '*', 'result', ARGV[3], 'results_entry', ARGV[4], 'reason', ARGV[5],
          'attempts', ARGV[6], 'failed_at_ms', ARGV[7])
        return acknowledge(KEYS[1], ARGV[1], {ARGV[2]})
        """

    /// KEYS: webhooks, webhooks dead. ARGV: count, then entry ids (none: the oldest `count`).
    /// Each moved entry gets `results_entry` kept (its Idempotency-Key) and `replayed_at_ms`.
    static let replay = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local entries
        if #ARGV > 1 then
          entries = {}
          local seen = {}
          for i = 2, #ARGV do
            -- An id named twice is moved once: a second copy would be delivered twice.
            if not seen[ARGV[i]] then
              seen[ARGV[i]] = true
              local found = redis.call('XRANGE', KEYS[2], ARGV[i], ARGV[i])
              if found[1] then entries[#entries + 1] = found[1] end
            end
          end
        else
          entries = redis.call('XRANGE', KEYS[2], '-', '+', 'COUNT', tonumber(ARGV[1]))
        end
        local moved = 0
        for _, e in ipairs(entries) do
          local f = {}
          for i = 1, #e[2], 2 do f[e[2][i]] = e[2][i + 1] end
          redis.call('XADD', KEYS[1], '*', 'result', f['result'] or '{}', 'results_entry', f['results_entry'] or e[1],
            'replayed_at_ms', tostring(now))
          redis.call('XDEL', KEYS[2], e[1])
          moved = moved + 1
        end
        return moved
        """
}
