import CallStorage
import Foundation
import JSONOutput
import RedisClient

/// The streams `pushgw export` writes out as JSON lines (docs/operations.md, "Export").
public enum ExportedStream: String, Sendable, CaseIterable {
    /// `PREFIX:{APP}:results`.
    case results
    /// `PREFIX:{APP}:feedback`.
    case feedback
    /// `PREFIX:{APP}:dead`.
    case dead
}

// Export: an app's results, feedback or dead letters as JSON lines, oldest first, for a
// pipeline or an archive. Read a bounded page at a time through the stores (`CallHistoryStore`,
// `DeadLetterStore.range`), each page a step of the operations' `ScanPacing` as every bulk
// read of `pushgw dead`: a stream of millions of entries holds Redis for a millisecond or two
// at a time, and the router's commands go between the pages.
extension DeadLetterOperations {
    /// Walks `stream` of `app` oldest first from `sinceMs` (unix ms; nil: its oldest entry) up
    /// to its newest entry when the walk started (entries added meanwhile are the next
    /// export's), at most `limit` entries (nil: all), a page of at most `pageSize` at a time.
    /// Each page's lines (`exportLine`) go to `onPage`, which returns false to stop (its
    /// output failed). `completion` gets how many lines were handed to `onPage`.
    public func export(app: String, stream: ExportedStream, sinceMs: Int64?, limit: Int?,
                       onPage: @escaping (_ lines: [String]) -> Bool,
                       completion: @escaping (Result<Int, RedisError>) -> Void) {
        precondition(limit.map { $0 > 0 } ?? true, "an export's limit is positive")
        let keys = keys(app)
        let history = CallHistoryStore(topology: store.topology)
        let newest: (@escaping (Result<String?, RedisError>) -> Void) -> Void = { [store] done in
            switch stream {
            case .results, .feedback:
                history.newestID(keys, stream == .results ? .results : .feedback, completion: done)
            case .dead:
                store.range(keys, count: 1, newestFirst: true) { done($0.map { $0.entries.first?.id }) }
            }
        }
        /// One bounded page from `start` to `end`: its entries, and whether more may follow.
        let page: (String, String, Int, @escaping (Result<([StreamEntry], Bool), RedisError>) -> Void) -> Void = { [store] start, end, count, done in
            switch stream {
            case .results, .feedback:
                history.range(keys, stream == .results ? .results : .feedback, start: start, end: end, count: count) { result in
                    done(result.map { ($0, $0.count == count) })
                }
            case .dead:
                store.range(keys, start: start, end: end, count: count, newestFirst: false) { result in
                    done(result.map { ($0.entries, $0.more) })
                }
            }
        }
        newest { [weak self] found in
            guard let self else { return completion(.failure(.closed)) }
            switch found {
            case let .failure(error): return completion(.failure(error))
            case .success(nil): return completion(.success(0))
            case let .success(end?):
                var written = 0
                func step(from start: String) {
                    self.pacing.run { finished in
                        let count = min(Self.pageSize, limit.map { $0 - written } ?? Self.pageSize)
                        page(start, end, count) { result in
                            defer { finished() }
                            switch result {
                            case let .failure(error):
                                completion(.failure(error))
                            case let .success((entries, more)):
                                let lines = entries.map { Self.exportLine($0, of: stream) }
                                guard lines.isEmpty || onPage(lines) else { return completion(.success(written)) }
                                written += lines.count
                                if more, let last = entries.last, limit.map({ written < $0 }) ?? true {
                                    step(from: "(" + last.id)
                                } else {
                                    completion(.success(written))
                                }
                            }
                        }
                    }
                }
                step(from: sinceMs.map { String(max(0, $0)) + "-0" } ?? "-")
            }
        }
    }

    /// One entry as its export line: `{"id","time_ms","fields":{…}}`, the fields by name as the
    /// stream holds them (text), but a result's `result`, written as the JSON object it is. A
    /// value whose bytes are not UTF-8 (a producer's `event` in a dead letter may be anything)
    /// is its text with U+FFFD for each bad sequence, followed by `NAME_base64` with the exact
    /// bytes.
    public static func exportLine(_ entry: StreamEntry, of stream: ExportedStream) -> String {
        var fields: [(String, OrderedJSON)] = []
        for name in entry.values.keys.sorted() {
            let bytes = entry.values[name]!
            guard let text = String(validating: bytes, as: UTF8.self) else {
                fields.append((name, .string(String(decoding: bytes, as: UTF8.self))))
                fields.append((name + "_base64", .string(Data(bytes).base64EncodedString())))
                continue
            }
            if stream == .results, name == "result", let json = EmbeddedJSON(text) {
                fields.append((name, .embedded(json)))
            } else {
                fields.append((name, .string(text)))
            }
        }
        return OrderedJSON.object([("id", .string(entry.id)), ("time_ms", .int(entry.timeMs)), ("fields", .object(fields))]).text
    }
}
