import EventLoop
import CallStorage
import JSONOutput
import RedisClient

/// Who changes dead letters, for the audit record: the operator's name, the real user behind
/// `sudo` on the command line, and how they came (the console's `via`, `access`, `from`).
public struct AuditActor: Sendable {
    public var user: String
    public var sudoUser: String?
    /// Kept after the verb's own options, in order.
    public var options: [(String, OrderedJSON)]

    public init(user: String, sudoUser: String? = nil, options: [(String, OrderedJSON)] = []) {
        self.user = user
        self.sudoUser = sudoUser
        self.options = options
    }
}

/// One replay of dead letters with its audit record, as `pushgw dead replay` and the console
/// both run it: the targets replayed paced at `rate` (`DeadLetterOperations.replayPaced`), a
/// page at a time if the caller has them in pages, each step told as one line (`line(of:)`),
/// and at the end one audit record of everything the run replayed (`record`), which each
/// front end logs and writes with `DeadLetterOperations.audit`, also after a Redis failure
/// stopped the run part-way, so what was done is on record.
///
/// Loop-owned, like its operations. Start with `DeadLetterOperations.replayAudited`.
public final class AuditedReplay {
    private let operations: DeadLetterOperations
    public let rate: ReplayRate
    private let actor: AuditActor
    /// The filters of a bulk replay ("all matching"), for the record; nil when ids were named.
    private let filter: DeadLetterFilter?
    private let pacer: ReplayPacer
    /// What the run did so far, over every page.
    public private(set) var summary = DeadLetterOperations.ReplaySummary()
    /// The page being replayed now, to cancel.
    private var run: ReplayRun?
    /// Who cancelled the run (`cancel`); nil while it was not.
    public private(set) var cancelledBy: String?

    init(operations: DeadLetterOperations, rate: ReplayRate, by actor: AuditActor, filter: DeadLetterFilter?) {
        self.operations = operations
        self.rate = rate
        self.actor = actor
        self.filter = filter
        pacer = ReplayPacer(rate: rate, startMs: Clock.monotonicMs())
    }

    /// Replays `targets` after those of earlier pages (the pace goes on from them); each step
    /// goes to `onStep` with its line, then `completion` gets whether the run may go on (false
    /// after a Redis failure, which `summary` keeps, or a cancel).
    public func replay(_ targets: [DeadLetterReference], onStep: @escaping (DeadLetterOperations.ReplayStep, String) -> Void,
                       completion: @escaping (_ goOn: Bool) -> Void) {
        guard cancelledBy == nil else { return completion(false) }
        run = operations.replayPaced(targets, pacer: pacer, firstIndex: summary.replayed.count, onStep: { reference, step in
            onStep(step, AuditedReplay.line(of: step, reference, nowMs: Clock.unixMs()))
        }, completion: { [weak self] part in
            self?.run = nil
            self?.summary.add(part)
            completion(part.failure == nil && self?.cancelledBy == nil)
        })
    }

    /// Stops the run after the dead letter in progress (`ReplayRun.cancel`): nothing more is
    /// replayed, and its record says who cancelled it. A second cancel changes nothing.
    public func cancel(by user: String) {
        guard cancelledBy == nil else { return }
        cancelledBy = user
        run?.cancel()
    }

    /// The audit record of the run so far: every dead letter replayed, of `requested`.
    public func record(requested: Int, verb: String = "replay") -> AuditRecord {
        AuditRecord(timeMs: Clock.unixMs(), verb: verb, user: actor.user, sudoUser: actor.sudoUser, ids: summary.replayed,
                    requested: requested, done: summary.replayed.count, filter: filter,
                    options: [("rate", .string(rate.description))] + (cancelledBy.map { [("cancelled_by", .string($0))] } ?? [])
                        + actor.options)
    }

    /// What one step did, as both front ends show it (the text as it is: the command line
    /// makes its controls visible, the console's renderer escapes it):
    /// `replayed acme/1764…-0 -> calls entry 1765…-0  call c-1  (replay #2): rings …`.
    public static func line(of step: DeadLetterOperations.ReplayStep, _ reference: DeadLetterReference, nowMs: Int64) -> String {
        switch step {
        case let .replayed(r, entry, forecast):
            return "replayed \(r.app)/\(r.id) -> calls entry \(entry)  call \(r.callID ?? "-")  (replay #\(r.replays + 1)): "
                + forecast.text(nowMs: nowMs)
        case let .skipped(r, forecast):
            return "skipped \(r.app)/\(r.id): " + forecast.text(nowMs: nowMs)
        case .gone:
            return "skipped \(reference.text): gone meanwhile (replayed or purged by someone else)"
        }
    }
}

extension DeadLetterOperations {
    /// Starts a replay with its audit record (`AuditedReplay`), the one way both the command
    /// line and the console replay dead letters.
    public func replayAudited(rate: ReplayRate, by actor: AuditActor, filter: DeadLetterFilter?) -> AuditedReplay {
        AuditedReplay(operations: self, rate: rate, by: actor, filter: filter)
    }
}
