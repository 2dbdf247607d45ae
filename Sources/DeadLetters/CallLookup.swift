import CallStorage
import Foundation
import RedisClient

/// Reading what Redis holds about one call or one device token, for operators: the one
/// reading behind `pushgw calls show`, `pushgw tokens show` and the console's search
/// (docs/operations.md, "Calls", "Tokens", "Console"). A call is read through the stores of
/// CallStorage (`CallHistoryStore`, `RetrySchedule.pending`, `TokenStore`) and the
/// dead-letter operations; a token through `TokenStore`. Front ends only print or render
/// the reports.
///
/// Asynchronous on the loop, one read after the other (a call's: one MGET, the scan of its
/// app's dead stream for its dead letters, paced a bounded step at a time as every bulk read of
/// `DeadLetterOperations`, one script, one script per token found; a token's: two scripts and
/// one XREVRANGE of the newest `feedbackScanned` feedback entries). The command line runs the
/// loop until the completion comes; the console answers from it.
///
/// Loop-owned: create and call on the loop thread of the operations' connection.
public struct CallLookup {
    public let operations: DeadLetterOperations

    /// Dead letters of one call read at most (`pushgw dead show ID` lists all).
    public static let deadLettersShown = 10
    /// Feedback entries read per app, newest first (the stream keeps about 100,000).
    public static let feedbackScanned = 10_000

    public init(operations: DeadLetterOperations) {
        self.operations = operations
    }

    private var topology: RedisTopology { operations.store.topology }

    /// `result`'s value; nil after handing its error to `completion`.
    private static func value<T, U>(_ result: Result<T, RedisError>, else completion: (Result<U, RedisError>) -> Void) -> T? {
        switch result {
        case let .success(value): return value
        case let .failure(error):
            completion(.failure(error))
            return nil
        }
    }
    private var prefix: String { operations.store.gatewayKeys.prefix }

    /// Everything Redis holds about call `callID` of `app`, read one store after the other;
    /// `extraTokens` (normalized, `TokenStore.normalized`) are told besides the tokens the
    /// call's dead letters and retry name.
    public func call(app: String, callID: String, extraTokens: [String] = [],
                     completion: @escaping (Result<CallReport, RedisError>) -> Void) {
        let keys = AppKeys(prefix: prefix, app: app)
        let topology = topology
        let operations = operations
        let window = RetentionWindows.of(keys, in: operations.store.windows)
        CallHistoryStore(topology: topology).read(keys, callID: callID, window: window) { stored in
            guard let stored = Self.value(stored, else: completion) else { return }
            operations.newest(apps: [app], filter: DeadLetterFilter(apps: [app], callID: callID), limit: Self.deadLettersShown) { dead in
                guard let dead = Self.value(dead, else: completion) else { return }
                let schedule = RetrySchedule(topology: topology, config: .init(prefix: keys.prefix))
                schedule.pending(keys, callID: callID) { retry in
                    guard let retry = Self.value(retry, else: completion) else { return }
                    let learnt = CallReport.tokens(deadLetters: dead, retry: retry, extra: extraTokens)
                    Self.states(of: learnt, keys: keys, store: TokenStore(topology: topology)) { states in
                        completion(states.map { states in
                            CallReport(app: app, callID: callID, stored: stored, result: stored.resultJSON.flatMap(RecordedResult.init(json:)),
                                       retry: retry, deadLetters: dead, tokens: states)
                        })
                    }
                }
            }
        }
    }

    /// The known-invalid marks of each learnt token, one script per token, in order.
    private static func states(of learnt: [CallReport.LearntToken], keys: AppKeys, store: TokenStore,
                               completion: @escaping (Result<[CallReport.TokenState], RedisError>) -> Void) {
        var states: [CallReport.TokenState] = []
        func next(_ index: Int) {
            guard index < learnt.count else { return completion(.success(states)) }
            let t = learnt[index]
            store.marks(keys, token: t.token) { marks in
                switch marks {
                case let .failure(error): completion(.failure(error))
                case let .success(marks):
                    for channel in t.channel.map({ [$0] }) ?? TokenChannel.apns {
                        states.append(CallReport.TokenState(channel: channel, token: t.token, source: t.source, mark: marks[channel]))
                    }
                    next(index + 1)
                }
            }
        }
        next(0)
    }

    /// What `app` keeps about device token `token` (normalized, `TokenStore.normalized`): its
    /// marks, the silent-ban guard's suspicion, and the feedback entries naming it.
    public func token(_ token: String, app: String, completion: @escaping (Result<TokenReport, RedisError>) -> Void) {
        let keys = AppKeys(prefix: prefix, app: app)
        let store = TokenStore(topology: topology)
        store.marks(keys, token: token) { marks in
            guard let marks = Self.value(marks, else: completion) else { return }
            store.feedback(keys, token: token, scanning: Self.feedbackScanned) { feedback in
                guard let feedback = Self.value(feedback, else: completion) else { return }
                store.voipSuspicion(keys, token: token) { suspicion in
                    completion(suspicion.map { TokenReport(app: app, token: token, marks: marks, suspicion: $0, feedback: feedback) })
                }
            }
        }
    }

    /// `token(_:app:)` for each of `apps`, in order.
    public func token(_ token: String, apps: [String], completion: @escaping (Result<[TokenReport], RedisError>) -> Void) {
        var reports: [TokenReport] = []
        func next(_ index: Int) {
            guard index < apps.count else { return completion(.success(reports)) }
            self.token(token, app: apps[index]) { report in
                switch report {
                case let .failure(error): completion(.failure(error))
                case let .success(report):
                    reports.append(report)
                    next(index + 1)
                }
            }
        }
        next(0)
    }
}

/// What Redis holds about one call (`CallLookup.call`). Plain data; `pushgw calls show`
/// prints it, the console renders it.
public struct CallReport {
    /// A token the call names, and where it was learnt.
    public struct LearntToken: Equatable, Sendable {
        /// nil: both channels (a token given by hand).
        public let channel: TokenChannel?
        public let token: String
        public let source: String
    }

    public struct TokenState {
        public let channel: TokenChannel
        public let token: String
        /// Where the token was learnt: `dead letter ID`, `scheduled retry`, `--token`.
        public let source: String
        public let mark: TokenStore.Mark?
    }

    public let app: String
    public let callID: String
    public let stored: CallHistoryStore.Keys
    public let result: RecordedResult?
    public let retry: ScheduledRetry?
    /// Newest first, at most `CallLookup.deadLettersShown`.
    public let deadLetters: [DeadLetterRecord]
    public let tokens: [TokenState]

    /// The tokens to tell: the dead letters' and the retry's events, then `extra` (either
    /// channel), each once.
    static func tokens(deadLetters: [DeadLetterRecord], retry: ScheduledRetry?, extra: [String]) -> [LearntToken] {
        var tokens: [LearntToken] = []
        func add(_ channel: TokenChannel?, _ token: String?, _ source: String) {
            guard let token = token.flatMap(TokenStore.normalized),
                  !tokens.contains(where: { $0.token == token && ($0.channel == channel || $0.channel == nil) }) else { return }
            tokens.append(LearntToken(channel: channel, token: token, source: source))
        }
        for record in deadLetters {
            add(.voip, record.voipToken, "dead letter \(record.id)")
            add(.alert, record.alertToken, "dead letter \(record.id)")
        }
        if let retry, let event = (try? JSONSerialization.jsonObject(with: Data(retry.event))) as? [String: Any] {
            add(.voip, event["voip_token"] as? String, "scheduled retry")
            add(.alert, event["alert_token"] as? String, "scheduled retry")
        }
        for token in extra { add(nil, token, "--token") }
        return tokens
    }

    /// Anything at all: a result or claim, a dead letter, a retry, a cancel.
    public var isKnown: Bool {
        stored.result != nil || stored.compactOutcome != nil || stored.cancelResult != nil || stored.cancelled || retry != nil
            || !deadLetters.isEmpty
    }

    /// `finished`, `detail_expired` (finished, its result JSON expired, its first outcome
    /// known: `CallHistoryStore.Keys.compactOutcome`), `in_flight`, `waiting_for_retry`,
    /// `dead_lettered`, `cancelled` or `unknown`.
    public var state: String {
        if let result { return result.outcome == "dead_lettered" ? "dead_lettered" : "finished" }
        if stored.detailExpired { return "detail_expired" }
        if stored.inFlightGateway != nil { return "in_flight" }
        if retry != nil { return "waiting_for_retry" }
        if !deadLetters.isEmpty { return "dead_lettered" }
        if stored.cancelled || stored.cancelResult != nil { return "cancelled" }
        return "unknown"
    }

    /// The result in words: `delivered_alert (cause voip_timeout), by alert apns-id …`.
    public static func summary(_ r: RecordedResult) -> String {
        var what = r.outcome
        if let cause = r.cause { what += " (cause \(cause))" }
        if let reason = r.reason { what += ": \(reason)" }
        if let channel = r.channel { what += ", by \(channel)" + (r.apnsID.map { " apns-id \($0)" } ?? "") }
        if let env = r.environmentMismatch { what += ", accepted in \(env) (the other environment)" }
        return what
    }

    /// What no result means, when there is none (nil when there is a result).
    public var noResult: String? {
        if result != nil { return nil }
        if let gateway = stored.inFlightGateway { return "none yet: gateway \(gateway) is routing it now" }
        if stored.result != nil { return "unreadable: the result key holds no result JSON" }
        if stored.detailExpired, let first = stored.compactOutcome {
            return "detail_expired: first outcome \(first) (the result JSON is kept retention.result_detail_s, the outcome the result window)"
        }
        return "none under its result key (never seen, not routed yet, older than the result window, or an invalid event)"
    }

    /// The cancel in words; nil when none came.
    public var cancel: String? {
        guard stored.cancelled || stored.cancelResult != nil else { return nil }
        let own = stored.cancelResult.flatMap(RecordedResult.init(json:))
        let after = own?.cancelledAfter.map { ": too late, the call was \($0) already" } ?? ""
        return "a call_cancelled came\(after)" + (stored.cancelled ? "; no further push is sent" : "")
    }
}

extension CallReport.TokenState {
    /// Whether calls skip the token, in words.
    public var stateText: String {
        mark.map { m in
            "known invalid since \(DeadFormat.time(m.sinceMs)): calls skip it unless registered again after that"
                + (m.expiresInMs.map { "; mark lapses in \(DeadFormat.age($0))" } ?? "")
        } ?? "not known to be invalid"
    }
}

/// What one app keeps about one device token (`CallLookup.token`). Plain data; `pushgw tokens
/// show` prints it, the console renders it.
public struct TokenReport {
    public let app: String
    public let token: String
    /// Known-invalid marks, by channel (absent: not marked).
    public let marks: [TokenChannel: TokenStore.Mark]
    public let suspicion: TokenStore.VoipSuspicion
    /// The feedback entries naming the token, newest first, among the app's newest
    /// `CallLookup.feedbackScanned`.
    public let feedback: [TokenStore.Feedback]

    /// Feedback entries a report shows.
    public static let feedbackShown = 20

    /// Anything at all: a mark, a suspicion or silent rings, a feedback entry.
    public var isKnown: Bool {
        !marks.isEmpty || suspicion.suspectedSinceMs != nil || suspicion.silentRings > 0 || !feedback.isEmpty
    }

    /// Why `channel` is marked: APNs' reason in the newest feedback entry of that channel
    /// that marked it (not an environment mismatch); nil when that entry is gone.
    public func reason(_ channel: TokenChannel) -> String? {
        feedback.first { $0.channel == channel.rawValue && $0.environment == nil }?.reason
    }

    /// Whether calls skip the token on `channel`, since when, why and until when, in words.
    public func state(_ channel: TokenChannel) -> String {
        guard let mark = marks[channel] else { return "not known to be invalid" }
        let why = reason(channel) ?? "reason no longer in the feedback stream"
        let lapses = mark.expiresInMs.map { "mark lapses in \(DeadFormat.age($0))" } ?? "mark has no expiry"
        return "known invalid since \(DeadFormat.time(mark.sinceMs)) (\(why)); calls skip it unless registered again after that; \(lapses)"
    }

    /// What the guard against iOS's silent VoIP ban holds of the token, in words; nil: nothing.
    public var voipBan: String? {
        if let since = suspicion.suspectedSinceMs {
            let lapses = suspicion.expiresInMs.map { "mark lapses in \(DeadFormat.age($0))" } ?? "mark has no expiry"
            return "suspected of iOS's silent VoIP ban since \(DeadFormat.time(since)) (its last VoIP rings were accepted and none "
                + "rang); calls skip VoIP and go straight to the alert until a ring receipt of the token; \(lapses)"
        }
        guard suspicion.silentRings > 0 else { return nil }
        return "\(suspicion.silentRings) silent \(suspicion.silentRings == 1 ? "ring" : "rings") in a row (accepted by APNs, no ring receipt)"
    }

    /// One feedback entry in words: its time, channel, reason, the environment that accepted
    /// it (the token kept) and its entry id.
    public static func describe(_ f: TokenStore.Feedback) -> String {
        "\(f.timestampMs.map(DeadFormat.time) ?? "no time")  \(f.channel)  \(reason(f))  entry \(f.entryID)"
    }

    /// APNs' reason of one feedback entry, and the environment that accepted the token.
    public static func reason(_ f: TokenStore.Feedback) -> String {
        f.reason + (f.environment.map { " (accepted in \($0): the token was kept)" } ?? "")
    }
}
