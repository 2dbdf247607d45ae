@testable import CallStorage
@testable import RedisClient

/// One-event forms of `CallStore`'s batched steps, for tests that look at one event at a time;
/// the router only uses the batched ones, which these go through.
extension CallStore {
    /// `finish` of one event.
    func finish(_ app: AppKeys, entryID: String?, record: ResultEntry, invalidTokens: [InvalidToken] = [],
                completion: @escaping (Result<RecordReport, RedisError>) -> Void) {
        finish(app, [FinishRecord(entryID: entryID, record: record, invalidTokens: invalidTokens)]) { result in
            completion(result.map { RecordReport(recorded: $0.recorded[0], firstOutcome: $0.firstOutcomes[0],
                                                 acknowledged: $0.acknowledged == 1, deadEntryID: nil) })
        }
    }

    /// `lookup` of one event.
    func lookup(_ app: AppKeys, eventId: String, voipToken: String?, alertToken: String?,
                completion: @escaping (Result<EventLookup, RedisError>) -> Void) {
        lookup(app, [LookupQuery(eventId: eventId, voipToken: voipToken, alertToken: alertToken)]) { result in
            completion(result.map { $0[0] })
        }
    }

    /// `backlogs` of one app.
    func backlog(_ app: AppKeys, completion: @escaping (Result<Backlog, RedisError>) -> Void) {
        backlogs([app]) { result in
            completion(result.flatMap { found in found[app].map { .success($0) } ?? .failure(.unexpectedReply("backlog")) })
        }
    }
}
