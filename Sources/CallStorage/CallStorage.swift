// CallStorage: pushgw's data in Redis: the key layout of docs/protocol.md, the stores that
// read and change it (CallStore, RetrySchedule, DeadLetterStore, TokenStore, CallHistoryStore, AppPauseStore,
// CallIntake for the HTTP API; each sends on one
// `RedisTopology`), the reads of new calls (StreamReads, for one Redis and for a cluster),
// their Lua scripts, and the MAC of the internal `retry` field (RetrySigner).
// Owns: every Redis key name and every command and script on pushgw's keys. Must not know
// about APNs or routing, nor how a connection is kept: connections, Sentinel, Cluster and
// the wire are RedisClient's, below this module.
// This file is the one place where key names are built.

import RedisClient

/// The Redis keys of one app, as fixed by the producer contract (docs/protocol.md), plus the
/// gateway's internal keys of that app.
///
/// Invariant: every key starts with `{prefix}:{{app}}:`, so the app id is a Redis Cluster
/// hash tag and all of one app's keys (and so every key a Lua script of one app touches)
/// share a slot.
public struct AppKeys: Hashable, Sendable, CustomStringConvertible {
    /// The configurable prefix (`pushgw` by default).
    public let prefix: String
    /// The app id, as configured.
    public let app: String

    /// `sendsWebhooks`: the app has webhooks on (`apps.APP.webhooks`), so every result is also
    /// queued on `webhooks` in the script that records it.
    public init(prefix: String = "pushgw", app: String, sendsWebhooks: Bool = false) {
        self.prefix = prefix
        self.app = app
        self.sendsWebhooks = sendsWebhooks
        base = "\(prefix):{\(app)}:"
        calls = base + "calls"
        results = base + "results"
        feedback = base + "feedback"
        dead = base + "dead"
        resultPrefix = base + "result:"
        outcomesPrefix = base + "outcomes:"
        cancelResultPrefix = base + "cancel-result:"
        ringResultPrefix = base + "ring-result:"
        cancelledPrefix = base + "cancelled:"
        invalidVoipPrefix = base + "invalid:voip:"
        invalidAlertPrefix = base + "invalid:alert:"
        invalidFcmPrefix = base + "invalid:fcm:"
        voipSilentPrefix = base + "voip-silent:"
        voipSuspectedPrefix = base + "voip-suspected:"
        silentRingPrefix = base + "silent-ring:"
    }

    /// `PREFIX:{APP}:`, built once: the router derives several keys per event from it.
    private let base: String

    // Identity is the prefix and the app; the other stored keys derive from them.
    public static func == (a: AppKeys, b: AppKeys) -> Bool { a.prefix == b.prefix && a.app == b.app }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(prefix)
        hasher.combine(app)
    }

    // MARK: Contract keys (docs/protocol.md)

    /// Producers' stream of call events (field `event`).
    public let calls: String
    /// One entry per event that reached its outcome (field `result`), capped.
    public let results: String
    /// One entry per token APNs declared invalid (`token`, `channel`, `reason`, `timestamp`), capped.
    public let feedback: String
    /// Dead letters.
    public let dead: String
    /// String: the result recorded for event id `eventId` (the `result` JSON the results stream
    /// got), with a TTL (the app's `resultDetailSeconds`; its first outcome stays in `outcomes`
    /// for the idempotency window). Producers GET it to find one result without
    /// reading the stream; pushgw reads it to skip an event whose id already has an outcome.
    /// A `call_cancelled` event's own result is under `cancelResult(id)`. Before the
    /// result, while a consumer routes the call, it holds that consumer's in-flight claim
    /// (`in_flight:` + the consumer's name, with a shorter TTL; not JSON, so a producer reading
    /// the key tells it from a result, which starts with `{`): taken in the lookup before the
    /// first push, replaced by the result when it is recorded, removed when the call goes to
    /// the retry schedule, so a copy of the call read meanwhile waits instead of pushing again,
    /// at the cost of one write per call and none at its record (docs/protocol.md, "Finding
    /// results").
    public func result(_ eventId: String) -> String { resultPrefix + eventId }
    /// Hash: the compact idempotency record of the calls whose first outcome was recorded during
    /// bucket `bucket` (`OutcomeBuckets`: unix s / a quarter of the window), field = call id,
    /// value = the outcome's code (`CompactOutcome`); it expires a window and a quarter after
    /// the bucket's start. A duplicate of a call whose `result(id)` detail expired is answered
    /// from here.
    public func outcomes(_ bucket: Int64) -> String { outcomesPrefix + String(bucket) }
    let outcomesPrefix: String
    /// String: the own result of the `call_cancelled` event of call `callID`, with the same TTL.
    /// Cancels and calls have separate id namespaces: a call whose id is `cancel:X` is keyed
    /// `result("cancel:X")`, never this key of a cancel of `X`.
    public func cancelResult(_ callID: String) -> String { cancelResultPrefix + callID }
    /// String: the own result of device `device`'s `call_ringing` event of call `callID` (its
    /// ring receipt), with the same TTL: `ring-result:ID` for the single-device form,
    /// `ring-result:ID:DEVICE` for a device of a call with devices. It is also how a gateway
    /// ringing the call hears a receipt another gateway read (`CallStore.ringReceipts`).
    public func ringResult(_ callID: String, device: String?) -> String {
        ringResultPrefix + ResultEntry.ringingID(callID, device: device)
    }
    /// The key `record` is stored under: `result(id)` or, for a cancel's own, `cancelResult(id)`,
    /// for a receipt's own, `ringResult`.
    func resultKeyPrefix(_ namespace: ResultEntry.Namespace) -> String {
        switch namespace {
        case .call: resultPrefix
        case .cancel: cancelResultPrefix
        case .ringing: ringResultPrefix
        }
    }

    // MARK: Webhooks (docs/webhooks.md)

    /// Whether the scripts that record results also queue each one on `webhooks`. Not part of
    /// the keys' identity.
    public let sendsWebhooks: Bool
    /// Stream: the app's webhook deliveries still to make, one per result (fields `result`, the
    /// result JSON, and `results_entry`, its entry id in `results`: the delivery's
    /// `Idempotency-Key`), written beside the results entry by the same script when
    /// `sendsWebhooks`; read by the webhooks role's consumer group and deleted once delivered
    /// or dead-lettered. Not capped: a receiver that is down holds its deliveries here, not in
    /// memory.
    public var webhooks: String { base + "webhooks" }
    /// Stream: deliveries given up on (a 4xx, or retried past `retry_for_seconds`): the fields
    /// of `webhooks` plus `reason`, `attempts`, `failed_at_ms`. `pushgw webhooks replay` puts them back.
    public var webhooksDead: String { base + "webhooks:dead" }

    // MARK: Internal keys (not part of the contract)

    /// String: present while `eventId` is cancelled (the caller hung up), with a TTL.
    public func cancelled(_ eventId: String) -> String { cancelledPrefix + eventId }

    // The per-event keys above are prefix + id. The prefixes are built once, so the router
    // can write a key straight into a command (`RedisCommand.append(_:_:)`) per event.
    let resultPrefix: String
    let cancelResultPrefix: String
    let ringResultPrefix: String
    let cancelledPrefix: String
    let invalidVoipPrefix: String
    let invalidAlertPrefix: String
    let invalidFcmPrefix: String
    /// `invalidPrefix(channel) + token`, a string: unix ms since when `token` is known to be
    /// invalid on `channel`, with a TTL.
    public func invalidPrefix(_ channel: TokenChannel) -> String {
        switch channel {
        case .voip: invalidVoipPrefix
        case .alert: invalidAlertPrefix
        case .fcm: invalidFcmPrefix
        }
    }
    // MARK: The guard against iOS's silent VoIP ban (docs/protocol.md), with ring receipts on

    let voipSilentPrefix: String
    let voipSuspectedPrefix: String
    let silentRingPrefix: String
    /// String: how many silent rings in a row VoIP token `token` had (a VoIP push accepted, no
    /// receipt in time), with a TTL (`CallStore.Config.voipSuspicionTTLSeconds`, renewed at
    /// each); removed by a ring that rang, and when the token is marked.
    public func voipSilentRings(_ token: String) -> String { voipSilentPrefix + token }
    /// String: unix ms since when VoIP token `token` is suspected of iOS's silent VoIP ban, with
    /// that TTL: while it is there the token's calls skip VoIP; a receipt of the token removes it.
    public func voipSuspected(_ token: String) -> String { voipSuspectedPrefix + token }
    /// Sorted set: the app's suspected VoIP tokens, scored by when their mark lapses (unix ms),
    /// for listing them (the console, `pushgw tokens show`); kept with the marks.
    public var voipSuspectedTokens: String { base + "voip-suspected-tokens" }
    /// String: the VoIP token of a device whose ring was counted silent, keyed by its receipt's
    /// id (`ResultEntry.ringingID`), with that TTL: a receipt that comes after the call's record
    /// finds the token and clears its count and mark.
    public func silentRing(_ ringingID: String) -> String { silentRingPrefix + ringingID }
    /// String: how many calls in a row of the app heard no receipt from any device (its VoIP
    /// pushes accepted), with that TTL; removed by any receipt. At
    /// `voip_suspected_after_silent_rings` the app's receipts are missing: no token is suspected.
    public var callsWithoutReceipt: String { base + "calls-without-receipt" }

    /// Hash: the history of an event replayed from the dead letters (`replays`, `history`
    /// JSON, `calls_entry`, `dead_entry`), keyed by the SHA-256 (hex) of the event's raw
    /// text, with a TTL. Lets a replayed event that dies again keep its earlier attempts.
    public func replayLedger(_ eventDigest: String) -> String { base + "replayed:" + eventDigest }

    // MARK: Pausing the app (AppPauseStore.swift)

    /// Hash, present while an operator has paused the app (`pushgw apps pause`, the console):
    /// `since_ms` (unix ms), `user`, `reason`. Every router reads whether it exists at start,
    /// when `GatewayKeys.pausesChanged` changed (and every 30 s anyway) and, while it exists,
    /// reads nothing of `calls` (docs/operations.md, *Pausing an app*).
    public var paused: String { base + "paused" }

    // MARK: The durable retry schedule (RetrySchedule.swift)

    /// Sorted set: the app's scheduled retries. Member = the retry id (the id of the calls
    /// entry the retry replaced, unique in the app's stream), score = when it is due, unix ms.
    public var retrySchedule: String { base + "retry" }
    /// Hash: three fields per scheduled retry id `R`: `R:state` (the router's snapshot JSON),
    /// `R:event` (the producer's raw event), `R:call` (the call id). Written and removed
    /// together with the member of `retrySchedule`.
    public var retryData: String { base + "retry:data" }
    /// Hash: call id → the retry id last scheduled for it, so a `call_cancelled` finds the
    /// call's retry without a scan. (Two live events with one call id may overwrite each
    /// other's entry; the one not found is stopped by the cancellation marker when due.)
    public var retryByCall: String { base + "retry:byCall" }

    public var description: String { base }
}

/// The keys shared by all apps of one prefix (not in any app's slot). No script touches one of
/// them beside an app's keys, and the registry's two keys share one slot, so every script runs
/// on Redis Cluster.
public struct GatewayKeys: Hashable, Sendable {
    /// The configurable prefix (`pushgw` by default).
    public let prefix: String

    public init(prefix: String = "pushgw") { self.prefix = prefix }

    /// The consumer group the routers read every app's calls stream with (`CallStore.Config`).
    public static let routersGroup = "pushgw"

    /// Sorted set of consumer names scored by the unix ms (Redis server clock) at which
    /// their last heartbeat lapses; a consumer is live while its score is in the future.
    public var consumers: String { "\(prefix):consumers" }

    /// Hash: consumer name → the instance id of the process holding its lease (a random id
    /// per process start), so a second live process under the same name is told apart from
    /// a restart of the first. Its hash tag is the name of `consumers`, whose slot it shares
    /// (the registry's scripts touch both). Earlier versions kept it in
    /// `PREFIX:consumer-instances`, which is no longer read: instance ids change at every
    /// process start, so nothing of it needs to move (`DEL` it once).
    public var consumerInstances: String { "\(prefix):consumer-instances{\(consumers)}" }

    /// String: the deployment's key for the MAC of the internal `retry` field (`RetrySigner`),
    /// 64 hex digits, created once by the first router that registers (`SET NX`) and proposed
    /// again at every heartbeat, which reads it back. In the registry's slot, as the scripts
    /// that register and heart-beat touch it. No producer's ACL reaches it (docs/operations.md).
    public var retrySigningKey: String { "\(prefix):retry-signing-key{\(consumers)}" }

    /// Sorted set: app id → the earliest due time (unix ms) in that app's `retrySchedule`; an
    /// app with nothing scheduled is absent. The retry mover looks at this one key instead of
    /// every app's schedule, which keeps an idle mover at one command per look. A hint kept
    /// beside the schedule's scripts, never inside them (RetrySchedule.swift says how it stays
    /// right), so it needs no slot of an app.
    public var retryDue: String { "\(prefix):retry-due" }

    /// Hash, kept 2 hours: the fleet's outcome counts of one minute (unix ms / 60,000), field
    /// `APP:OUTCOME` → count and `APP:latency:BUCKET` → XADD→answer latencies in that histogram
    /// bucket, added to by every gateway (`FleetFigureStore`). App ids and outcome names hold
    /// no colon.
    public func fleetMinute(_ minute: Int64) -> String { "\(prefix):fleet:\(minute)" }

    /// Hash, kept 30 s after its last write: what the gateway of consumer name `name` says of
    /// itself on the console's fleet page (roles, version, start, calls in flight;
    /// `FleetFigureStore.announce`), written every 5 s.
    public func gatewayCard(_ name: String) -> String { "\(prefix):gateway:\(name)" }

    /// Stream, capped: one entry per operator action that changed dead letters (replay,
    /// purge), tokens' marks or an app's pause: who, when, what, how many, with which filters.
    public var audit: String { "\(prefix):audit" }

    /// String: a stamp (unix ms and a random number) written after every pause or resume of an
    /// app (`AppPauseStore`), so a router reads one key a heartbeat, and the apps' pause keys
    /// (`AppKeys.paused`) only when it changed, not one command per app a second.
    public var pausesChanged: String { "\(prefix):pauses-changed" }

    /// String, 10 s: the admin endpoint's write probe on one Redis (`CallStore.probeWrites`).
    public var writeProbe: String { "\(prefix):write-probe" }

    /// The write probe's key number `n` on a cluster, `PREFIX:write-probe:{n}`: the probe picks
    /// for each primary an `n` whose slot it owns.
    public func writeProbe(_ n: Int) -> String { "\(prefix):write-probe:{\(n)}" }
}

/// The push channel a token belongs to; the raw value is what goes into Redis
/// (feedback field `channel`, known-invalid key names): an iPhone's VoIP or alert token, or an
/// Android phone's FCM registration token (both its ring and its missed-call notification).
public enum TokenChannel: String, Sendable, CaseIterable {
    case voip
    case alert
    case fcm

    /// The channels of an iPhone's (hex) token.
    public static let apns: [TokenChannel] = [.voip, .alert]
}
