import XCTest
import EventLoop
import CallStorage
import RedisClient
import TestSupport
@testable import DeadLetters

/// `DeadLetterOperations` on a real redis-server with its own loop and connection; subclasses
/// call `startOperations` in their `setUpWithError`.
class DeadLetterOperationsTestCase: XCTestCase {
    var server: RedisServer!
    var loop: EventLoop!
    var connection: RedisConnection!
    var operations: DeadLetterOperations!

    func startOperations(policies: [String: DeadLetterRetentionPolicy], ringTimeoutsMs: [String: Int64]) throws {
        server = try RedisServer.start()
        loop = EventLoop()
        connection = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: server.url)))
        connection.start()
        operations = DeadLetterOperations(loop: loop, store: DeadLetterStore(topology: .single(connection), prefix: "pushgw"),
                                          policies: policies, ringTimeoutsMs: ringTimeoutsMs)
    }

    override func tearDown() {
        connection?.close()
        loop?.close()
        server?.stop()
    }
}
