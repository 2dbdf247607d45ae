import CallStorage
import RedisClient

/// Reading back what `CallStore` wrote, for tests (the router never reads these streams).
extension CallStore {
    /// XRANGE of one of the app's streams (`app.results`, `app.feedback`, `app.dead`, …),
    /// from `start` to `end` (`-`/`+` for the ends, `(id` exclusive), at most `count`.
    public func range(_ stream: String, start: String = "-", end: String = "+", count: Int,
                      completion: @escaping (Result<[StreamEntry], RedisError>) -> Void) {
        topology.send(["XRANGE", stream, start, end, "COUNT", String(count)], key: stream) { result in
            completion(result.flatMap { reply in
                do { return .success(try StreamReplies.range(reply)) } catch {
                    return .failure(error as? RedisError ?? .unexpectedReply("\(error)"))
                }
            })
        }
    }
}
