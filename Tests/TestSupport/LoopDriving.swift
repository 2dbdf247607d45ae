import XCTest
import EventLoop
import RedisClient

/// Runs `loop` until `condition` holds; fails the test (rather than hang) after `timeoutMs`,
/// naming `what` it waited for. The timeout is a safety net, never an assertion about speed.
public func drive(_ loop: EventLoop, waitingFor what: @autoclosure () -> String, timeoutMs: Int64 = Deadline.defaultMs,
                  file: StaticString = #filePath, line: UInt = #line, until condition: () -> Bool) {
    loop.run(waitingFor: what(), timeoutMs: timeoutMs, file: file, line: line, until: condition)
}

/// Lets the loop run for `ms` (to give a server time to come back, never as an assertion).
public func pause(_ loop: EventLoop, ms: Int64) {
    loop.run(forMs: ms)
}

/// Sends one command and drives the loop until its completion.
@discardableResult
public func call(_ connection: RedisConnection, _ args: [String], blockMs: Int64 = 0,
                 file: StaticString = #filePath, line: UInt = #line) -> Result<RedisReply, RedisError> {
    var result: Result<RedisReply, RedisError>?
    connection.send(args, blockMs: blockMs) { result = $0 }
    drive(connection.loop, waitingFor: "the reply to \(args.first ?? "")", file: file, line: line, until: { result != nil })
    return result ?? .failure(.disconnected)
}

/// Sends one command until it succeeds (a server restarting answers with connection
/// errors for a while), pausing 50 ms between tries; returns the first success.
public func callUntilSuccess(_ connection: RedisConnection, _ args: [String], tries: Int = 200,
                             file: StaticString = #filePath, line: UInt = #line) -> RedisReply? {
    for _ in 0..<tries {
        if case .success(let reply) = call(connection, args, file: file, line: line) { return reply }
        pause(connection.loop, ms: 50)
    }
    XCTFail("\(args.joined(separator: " ")) never succeeded", file: file, line: line)
    return nil
}

/// Drives an asynchronous operation of the store to its completion.
public func complete<T>(_ loop: EventLoop, file: StaticString = #filePath, line: UInt = #line,
                        _ start: (@escaping (Result<T, RedisError>) -> Void) -> Void) -> Result<T, RedisError> {
    var result: Result<T, RedisError>?
    start { result = $0 }
    drive(loop, waitingFor: "the operation's completion", file: file, line: line, until: { result != nil })
    return result ?? .failure(.disconnected)
}

extension Result {
    /// The success value, failing the test on an error.
    public func value(file: StaticString = #filePath, line: UInt = #line) -> Success? {
        switch self {
        case .success(let v): return v
        case .failure(let e):
            XCTFail("unexpected failure: \(e)", file: file, line: line)
            return nil
        }
    }

    /// The error, or nil for a success.
    public var error: Failure? {
        guard case .failure(let e) = self else { return nil }
        return e
    }
}

/// A connection to `url` with test-friendly patience, started.
public func connect(_ loop: EventLoop, _ url: String, tls: RedisTLSOptions = RedisTLSOptions(), watchdogMs: Int64 = 5000,
                    onReady: ((RedisConnection) -> Void)? = nil) throws -> RedisConnection {
    let connection = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: url), tls: tls, watchdogMs: watchdogMs,
                                                               backoff: ReconnectBackoff(baseMs: 20, capMs: 200)))
    connection.onReady = onReady
    connection.start()
    return connection
}
