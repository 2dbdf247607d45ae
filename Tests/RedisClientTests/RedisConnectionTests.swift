import XCTest
import EventLoop
import TestSupport
@testable import RedisClient

/// RedisConnection against a real redis-server: no mocks. Every test runs on each transport:
/// plain TCP here, then a unix socket, TLS and TLS with a client certificate in the
/// subclasses at the end of this file (which list every test again: Linux's XCTest does not
/// run inherited tests; `testEveryTestRunsOnEveryTransport` checks the lists).
class RedisConnectionTests: XCTestCase {
    var server: RedisServer!
    var loop: EventLoop!

    /// The transport the tests of this class use.
    class var transport: RedisServer.Transport { .tcp }

    override func setUpWithError() throws {
        server = try RedisServer.start(Self.transport)
        loop = EventLoop()
    }

    /// The server's URL on this class's transport, with `credentials` (`user:password`) and `db`.
    func url(db: Int = 0, credentials: String? = nil) -> String {
        let auth = credentials.map { $0 + "@" } ?? ""
        switch server.transport {
        case .tcp: return "redis://\(auth)127.0.0.1:\(server.port)/\(db)"
        case .unixSocket: return "unix://\(auth)\(server.unixSocket)?db=\(db)"
        case .tls, .mutualTLS: return "rediss://\(auth)127.0.0.1:\(server.port)/\(db)"
        }
    }

    /// A started connection to this class's server (TLS options included).
    func connect(_ loop: EventLoop, _ url: String, watchdogMs: Int64 = 5000,
                 onReady: ((RedisConnection) -> Void)? = nil) throws -> RedisConnection {
        try TestSupport.connect(loop, url, tls: server.tls, watchdogMs: watchdogMs, onReady: onReady)
    }

    override func tearDown() {
        loop.close()
        server.stop()
    }

    func testCommandsRoundTripOnTheSelectedDatabase() throws {
        let redis = try connect(loop, url(db: 2))
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["SET", "greeting", "hello"]).value(), .status("OK"))
        XCTAssertEqual(call(redis, ["GET", "greeting"]).value()?.string, "hello")
        XCTAssertEqual(call(redis, ["GET", "missing"]).value(), .null, "a missing key is a nil reply")
        XCTAssertEqual(call(redis, ["INCRBY", "n", "41"]).value(), .integer(41))
        XCTAssertEqual(call(redis, ["RPUSH", "list", "a", "b"]).value(), .integer(2))
        XCTAssertEqual(call(redis, ["LRANGE", "list", "0", "-1"]).value(), .array([.bulk(Array("a".utf8)), .bulk(Array("b".utf8))]))
        guard case .failure(.server(let message)) = call(redis, ["LPUSH", "greeting", "x"]) else {
            return XCTFail("an error reply must complete as .server")
        }
        XCTAssertTrue(message.hasPrefix("WRONGTYPE"), message)
        let info = call(redis, ["CLIENT", "INFO"]).value()?.string ?? ""
        XCTAssertTrue(info.contains(" db=2 "), "the URL's database is selected: \(info)")
        XCTAssertEqual(try server.cli(["-n", "2", "GET", "greeting"]), "hello\n")

        // Binary-safe arguments: NUL and non-UTF-8 bytes survive the round trip.
        let bytes: [UInt8] = [0, 1, 0xff, 0, 0x80, 10]
        var stored: Result<RedisReply, RedisError>?
        redis.send(command: RedisCommand([Array("SET".utf8), Array("bin".utf8), bytes]), blockMs: 0) { stored = $0 }
        drive(loop, waitingFor: "the SET's reply", until: { stored != nil })
        XCTAssertEqual(call(redis, ["GET", "bin"]).value(), .bulk(bytes))

        // The protocol written in place (`RedisCommand.writeRESP`): an empty argument, CRLF
        // inside one, and lengths on each side of a digit more.
        XCTAssertEqual(call(redis, ["SET", "empty", ""]).value(), .status("OK"))
        XCTAssertEqual(call(redis, ["GET", "empty"]).value(), .bulk([]))
        for length in [9, 10, 99, 100, 999, 1_000, 99_999, 100_000] {
            let value = String(repeating: "\r\n", count: length / 2) + String(repeating: "x", count: length % 2)
            XCTAssertEqual(call(redis, ["SET", "long:\(length)", value]).value(), .status("OK"))
            XCTAssertEqual(call(redis, ["STRLEN", "long:\(length)"]).value(), .integer(Int64(length)))
            XCTAssertEqual(call(redis, ["GET", "long:\(length)"]).value()?.string, value)
        }
    }

    func testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() throws {
        let redis = try connect(loop, url())
        defer { redis.close() }
        for i in 0..<3 { _ = call(redis, ["XADD", "s", "*", "event", "e\(i)", "n", String(repeating: "x", count: i * 40)]) }
        _ = call(redis, ["XADD", "s", "*", "lone", ""])
        let copied = try StreamReplies.range(try XCTUnwrap(call(redis, ["XRANGE", "s", "-", "+"]).value()))
        func inPlace<T>(_ args: [String], _ decode: @escaping (HiredisReply) throws -> T) -> Result<T, RedisError>? {
            var result: Result<T, RedisError>?
            redis.send(command: RedisCommand(args), blockMs: 0, decodingInPlace: decode) { result = $0 }
            drive(loop, waitingFor: "the command's completion", until: { result != nil })
            return result
        }
        XCTAssertEqual(try inPlace(["XRANGE", "s", "-", "+"]) { try StreamReplies.range($0) }?.get(), copied)
        XCTAssertEqual(copied.count, 4)
        XCTAssertEqual(copied.last?.fields, ["lone": ""], "an empty value reads as empty text")
        XCTAssertEqual(try inPlace(["XRANGE", "none", "-", "+"]) { try StreamReplies.range($0) }?.get(), [])
        guard case .failure(.server(let message))? = inPlace(["LPUSH", "s", "x"], { _ in 1 }) else {
            return XCTFail("an error reply completes as .server, not through the decoder")
        }
        XCTAssertTrue(message.hasPrefix("WRONGTYPE"), message)
        guard case .failure(.unexpectedReply)? = inPlace(["GET", "missing"], { reply -> String in
            guard let text = reply.string else { throw RedisError.unexpectedReply("not text") }
            return text
        }) else { return XCTFail("what the decoder throws completes the command") }
    }

    func testTenThousandPipelinedCommandsAllCompleteInOrder() throws {
        let redis = try connect(loop, url())
        defer { redis.close() }
        let n = 10_000
        var answers: [Int64] = []
        answers.reserveCapacity(n)
        var failures = 0
        for _ in 0..<n {
            redis.send(["INCR", "counter"]) { result in
                switch result {
                case .success(let reply): answers.append(reply.integer ?? -1)
                case .failure: failures += 1
                }
            }
        }
        drive(loop, waitingFor: "\(n) completions", until: { answers.count + failures == n })
        XCTAssertEqual(failures, 0)
        XCTAssertEqual(answers, (1...Int64(n)).map { $0 }, "completions run once each, in command order")
    }

    func testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() throws {
        let redis = try connect(loop, url())
        let control = try connect(loop, url())
        defer { redis.close(); control.close() }
        guard let id = call(redis, ["CLIENT", "ID"]).value()?.integer else { return }

        // A BLPOP that cannot be served holds every later command on the connection.
        var completions = [Int](repeating: 0, count: 101)
        var results = [Result<RedisReply, RedisError>?](repeating: nil, count: 101)
        redis.send(["BLPOP", "nothing-here", "10"], blockMs: 10_000) { completions[0] += 1; results[0] = $0 }
        for i in 1...100 {
            redis.send(["PING"]) { completions[i] += 1; results[i] = $0 }
        }
        XCTAssertEqual(call(control, ["CLIENT", "KILL", "ID", String(id)]).value(), .integer(1))
        drive(loop, waitingFor: "a completion for every command", until: { !completions.contains(0) })
        pause(loop, ms: 50)   // would reveal a second completion
        XCTAssertEqual(completions, [Int](repeating: 1, count: 101), "exactly one completion per command")
        for (i, r) in results.enumerated() {
            guard case .failure(.disconnected) = r else { return XCTFail("command \(i) completed with \(String(describing: r))") }
        }
        XCTAssertEqual(callUntilSuccess(redis, ["PING"]), .status("PONG"), "the connection comes back by itself")
        XCTAssertEqual(redis.stats.lost, 1)
    }

    func testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() throws {
        var readies = 0
        let redis = try connect(loop, url()) { connection in
            readies += 1
            connection.send(["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]) { result in
                if case .failure(let e) = result, e.serverCode != "BUSYGROUP" { XCTFail("XGROUP CREATE: \(e)") }
            }
        }
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["XADD", "s", "*", "f", "1"]).value()?.string?.isEmpty, false)
        XCTAssertNotNil(call(redis, ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"]).value())

        try server.restart()   // empty again: the stream and its group are gone
        XCTAssertNotNil(callUntilSuccess(redis, ["XADD", "s", "*", "f", "2"]))
        // The group was re-created before any waiting or later command: no NOGROUP.
        guard case .success(let reply) = call(redis, ["XREADGROUP", "GROUP", "g", "c", "COUNT", "10", "STREAMS", "s", ">"]) else {
            return XCTFail("XREADGROUP after a restart must not answer NOGROUP")
        }
        let entries = try StreamReplies.read(reply)["s"] ?? []
        XCTAssertEqual(entries.map { $0.fields["f"] }, ["2"])
        XCTAssertEqual(readies, 2, "onReady runs after each connect")
        XCTAssertGreaterThanOrEqual(redis.stats.lost, 1)
    }

    func testCommandsSentWhileTheServerIsDownFailAndNeverHang() throws {
        let redis = try connect(loop, url())
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["PING"]).value(), .status("PONG"))
        server.kill9()
        var outcomes: [Result<RedisReply, RedisError>] = []
        for _ in 0..<3 { outcomes.append(call(redis, ["PING"])) }
        for o in outcomes {
            switch o {
            case .failure(.disconnected), .failure(.connectFailed): break
            default: XCTFail("with the server down a command fails, got \(o)")
            }
        }
        try server.restart()
        XCTAssertEqual(callUntilSuccess(redis, ["PING"]), .status("PONG"))
    }

    func testWatchdogFreesAHungConnectionAndReconnects() throws {
        let redis = try connect(loop, url(), watchdogMs: 500)
        let control = try connect(loop, url())
        defer { redis.close(); control.close() }
        XCTAssertEqual(call(redis, ["PING"]).value(), .status("PONG"))
        // Redis stops answering clients for 2 s; without the watchdog PING would just wait.
        XCTAssertEqual(call(control, ["CLIENT", "PAUSE", "2000", "ALL"]).value(), .status("OK"))
        let hung = call(redis, ["PING"])
        guard case .failure(.disconnected) = hung else {
            return XCTFail("a command with no reply past the watchdog completes .disconnected, got \(hung)")
        }
        XCTAssertGreaterThanOrEqual(redis.stats.watchdogFirings, 1)
        XCTAssertEqual(callUntilSuccess(redis, ["PING"]), .status("PONG"), "a new connection works once Redis answers")
    }

    func testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() throws {
        let redis = try connect(loop, url(), watchdogMs: 300)
        defer { redis.close() }
        // BLOCK 800 ms > watchdog 300 ms: declared, so not taken for a hang.
        let reply = call(redis, ["BLPOP", "nothing", "0.8"], blockMs: 1000)
        XCTAssertEqual(reply.value(), .null, "BLPOP times out normally instead of being cut by the watchdog")
        XCTAssertEqual(redis.stats.watchdogFirings, 0)
    }

    func testACLUserAuthenticates() throws {
        let control = try connect(loop, url())
        defer { control.close() }
        XCTAssertEqual(call(control, ["ACL", "SETUSER", "pushgw", "on", ">secret", "~*", "+@all"]).value(), .status("OK"))
        let redis = try connect(loop, url(credentials: "pushgw:secret"))
        defer { redis.close() }
        XCTAssertEqual(call(redis, ["ACL", "WHOAMI"]).value()?.string, "pushgw")
    }

    func testAWrongPasswordGivesAClearErrorWithoutThePassword() throws {
        let control = try connect(loop, url())
        defer { control.close() }
        XCTAssertEqual(call(control, ["ACL", "SETUSER", "pushgw", "on", ">secret", "~*", "+@all"]).value(), .status("OK"))
        let password = "Wr0ng-Passw0rd-7f3a"
        var events: [RedisConnection.Event] = []
        let redis = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: url(credentials: "pushgw:\(password)")),
                                                              tls: server.tls))
        redis.onEvent = { events.append($0) }
        redis.start()
        defer { redis.close() }
        let result = call(redis, ["PING"])
        guard case .failure(let error) = result, case .connectFailed(let why) = error else {
            return XCTFail("a rejected AUTH fails the waiting command with .connectFailed, got \(result)")
        }
        XCTAssertTrue(why.contains("AUTH") && why.contains("WRONGPASS"), "the error says what failed: \(why)")
        XCTAssertTrue(why.contains("pushgw"), "the error names the user: \(why)")
        for text in [why, error.description, String(describing: error), redis.lastProblem ?? "", redis.config.url.description,
                     String(describing: redis.config.url), "\(events)"] {
            XCTAssertFalse(text.contains(password), "the password must never appear in a message: \(text)")
        }
    }

    func testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() throws {
        let redis = try connect(loop, url())
        defer { redis.close() }
        let script = RedisScript("return redis.call('INCRBY', KEYS[1], ARGV[1])")
        func run() -> Result<RedisReply, RedisError> {
            var result: Result<RedisReply, RedisError>?
            script.run(on: redis, keys: ["n"], args: ["5"]) { result = $0 }
            drive(loop, waitingFor: "the command's completion", until: { result != nil })
            return result ?? .failure(.disconnected)
        }
        XCTAssertEqual(run().value(), .integer(5), "the first run is an EVAL")
        XCTAssertEqual(script.sha1?.count, 40, "SCRIPT LOAD taught the digest")
        XCTAssertEqual(run().value(), .integer(10), "then EVALSHA")
        XCTAssertEqual(call(redis, ["SCRIPT", "FLUSH"]).value(), .status("OK"))
        XCTAssertEqual(run().value(), .integer(15), "NOSCRIPT is answered by an EVAL, invisibly to the caller")
        XCTAssertEqual(call(redis, ["SCRIPT", "EXISTS", script.sha1 ?? ""]).value(), .array([.integer(1)]), "and the script is cached again")
    }

    func testClosingFromACompletionCompletesEveryOtherCommandOnce() throws {
        let redis = try connect(loop, url())
        var counts = [Int](repeating: 0, count: 50)
        var results = [Result<RedisReply, RedisError>?](repeating: nil, count: 50)
        for i in 0..<50 {
            redis.send(["PING"]) { r in
                counts[i] += 1
                results[i] = r
                if i == 0 { redis.close() }
            }
        }
        drive(loop, waitingFor: "a completion for every command", until: { !counts.contains(0) })
        pause(loop, ms: 20)
        XCTAssertEqual(counts, [Int](repeating: 1, count: 50), "exactly one completion per command")
        XCTAssertEqual(results[0]?.value(), .status("PONG"))
        var late: Result<RedisReply, RedisError>?
        redis.send(["PING"]) { late = $0 }
        guard case .failure(.closed) = late else { return XCTFail("after close, sends fail .closed") }
    }
}

/// The tests above over a unix socket (`unix://`).
final class RedisConnectionOverUnixSocketTests: RedisConnectionTests {
    override class var transport: RedisServer.Transport { .unixSocket }

    override func testCommandsRoundTripOnTheSelectedDatabase() throws { try super.testCommandsRoundTripOnTheSelectedDatabase() }
    override func testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() throws { try super.testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() }
    override func testTenThousandPipelinedCommandsAllCompleteInOrder() throws { try super.testTenThousandPipelinedCommandsAllCompleteInOrder() }
    override func testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() throws { try super.testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() }
    override func testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() throws { try super.testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() }
    override func testCommandsSentWhileTheServerIsDownFailAndNeverHang() throws { try super.testCommandsSentWhileTheServerIsDownFailAndNeverHang() }
    override func testWatchdogFreesAHungConnectionAndReconnects() throws { try super.testWatchdogFreesAHungConnectionAndReconnects() }
    override func testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() throws { try super.testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() }
    override func testACLUserAuthenticates() throws { try super.testACLUserAuthenticates() }
    override func testAWrongPasswordGivesAClearErrorWithoutThePassword() throws { try super.testAWrongPasswordGivesAClearErrorWithoutThePassword() }
    override func testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() throws { try super.testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() }
    override func testClosingFromACompletionCompletesEveryOtherCommandOnce() throws { try super.testClosingFromACompletionCompletesEveryOtherCommandOnce() }
}

/// The tests above over TLS (`rediss://`), the server's certificate verified against the test CA.
final class RedisConnectionOverTLSTests: RedisConnectionTests {
    override class var transport: RedisServer.Transport { .tls }

    override func testCommandsRoundTripOnTheSelectedDatabase() throws { try super.testCommandsRoundTripOnTheSelectedDatabase() }
    override func testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() throws { try super.testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() }
    override func testTenThousandPipelinedCommandsAllCompleteInOrder() throws { try super.testTenThousandPipelinedCommandsAllCompleteInOrder() }
    override func testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() throws { try super.testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() }
    override func testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() throws { try super.testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() }
    override func testCommandsSentWhileTheServerIsDownFailAndNeverHang() throws { try super.testCommandsSentWhileTheServerIsDownFailAndNeverHang() }
    override func testWatchdogFreesAHungConnectionAndReconnects() throws { try super.testWatchdogFreesAHungConnectionAndReconnects() }
    override func testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() throws { try super.testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() }
    override func testACLUserAuthenticates() throws { try super.testACLUserAuthenticates() }
    override func testAWrongPasswordGivesAClearErrorWithoutThePassword() throws { try super.testAWrongPasswordGivesAClearErrorWithoutThePassword() }
    override func testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() throws { try super.testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() }
    override func testClosingFromACompletionCompletesEveryOtherCommandOnce() throws { try super.testClosingFromACompletionCompletesEveryOtherCommandOnce() }
}

/// The tests above over TLS to a server that requires a client certificate.
final class RedisConnectionOverMutualTLSTests: RedisConnectionTests {
    override class var transport: RedisServer.Transport { .mutualTLS }

    override func testCommandsRoundTripOnTheSelectedDatabase() throws { try super.testCommandsRoundTripOnTheSelectedDatabase() }
    override func testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() throws { try super.testInPlaceDecodingReadsWhatTheCopyReadsAndErrorsStillComplete() }
    override func testTenThousandPipelinedCommandsAllCompleteInOrder() throws { try super.testTenThousandPipelinedCommandsAllCompleteInOrder() }
    override func testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() throws { try super.testEveryPendingCommandCompletesOnceWithDisconnectedWhenTheConnectionDies() }
    override func testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() throws { try super.testReconnectsAfterARestartAndOnReadyRecreatesTheConsumerGroup() }
    override func testCommandsSentWhileTheServerIsDownFailAndNeverHang() throws { try super.testCommandsSentWhileTheServerIsDownFailAndNeverHang() }
    override func testWatchdogFreesAHungConnectionAndReconnects() throws { try super.testWatchdogFreesAHungConnectionAndReconnects() }
    override func testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() throws { try super.testBlockingCommandsGetTheirBlockTimeOnTopOfTheWatchdog() }
    override func testACLUserAuthenticates() throws { try super.testACLUserAuthenticates() }
    override func testAWrongPasswordGivesAClearErrorWithoutThePassword() throws { try super.testAWrongPasswordGivesAClearErrorWithoutThePassword() }
    override func testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() throws { try super.testScriptRunsByDigestAndFallsBackToEvalWhenRedisForgotIt() }
    override func testClosingFromACompletionCompletesEveryOtherCommandOnce() throws { try super.testClosingFromACompletionCompletesEveryOtherCommandOnce() }
}

/// The transports' classes above list every test of `RedisConnectionTests`.
final class RedisConnectionTransportListTests: XCTestCase {
    func testEveryTestRunsOnEveryTransport() throws {
        XCTAssertEqual(try testsMissingFromVariants(of: "RedisConnectionTests",
                                                    ["RedisConnectionOverUnixSocketTests", "RedisConnectionOverTLSTests",
                                                     "RedisConnectionOverMutualTLSTests"],
                                                    in: "Tests/RedisClientTests/RedisConnectionTests.swift"), [],
                       "each transport's class runs every test of RedisConnectionTests")
    }
}

/// Redis refusing writes as a whole (`RedisError.writeRefusal`), told from other errors in one
/// place, and counted per connection by why. A real redis-server made to refuse: `maxmemory`
/// under `noeviction` (`-OOM`), `min-replicas-to-write` without a replica (`-NOREPLICAS`); a
/// script's refusal carries the same code. MISCONF and READONLY are read from their texts as
/// Redis 7 sends them (a failed save needs a protected config to provoke; READONLY a replica).
final class RedisWriteRefusalTests: XCTestCase {
    func testRefusedWritesAreToldFromOtherErrorsAndCountedByWhy() throws {
        let server = try RedisServer.start(.tcp)
        let loop = EventLoop()
        defer { loop.close(); server.stop() }
        let redis = try TestSupport.connect(loop, "redis://127.0.0.1:\(server.port)/0")
        defer { redis.close() }
        let script = RedisScript("redis.call('SET', KEYS[1], ARGV[1]); return 1")
        func runScript() -> Result<RedisReply, RedisError> {
            var result: Result<RedisReply, RedisError>?
            script.run(on: redis, keys: ["k"], args: ["v"]) { result = $0 }
            drive(loop, waitingFor: "the script's completion", until: { result != nil })
            return result ?? .failure(.disconnected)
        }
        XCTAssertEqual(runScript().value(), .integer(1))
        _ = try server.cli(["CONFIG", "SET", "maxmemory", "1"])
        XCTAssertEqual(call(redis, ["SET", "k", "v"]).error?.writeRefusal, .outOfMemory)
        XCTAssertEqual(runScript().error?.writeRefusal, .outOfMemory, "a script's refusal keeps its code")
        XCTAssertEqual(call(redis, ["GET", "k"]).value()?.string, "v", "reads are served")
        _ = try server.cli(["CONFIG", "SET", "maxmemory", "0"])
        _ = try server.cli(["CONFIG", "SET", "min-replicas-to-write", "1"])
        XCTAssertEqual(call(redis, ["SET", "k", "v"]).error?.writeRefusal, .noReplicas)
        XCTAssertEqual(runScript().error?.writeRefusal, .noReplicas)
        _ = try server.cli(["CONFIG", "SET", "min-replicas-to-write", "0"])
        XCTAssertNil(call(redis, ["LPUSH", "k", "x"]).error?.writeRefusal, "WRONGTYPE is the command's fault")
        XCTAssertEqual(redis.writeRefusals, [.outOfMemory: 2, .noReplicas: 2])

        XCTAssertEqual(RedisError.server("MISCONF Errors writing to the AOF file: No space left on device").writeRefusal,
                       .persistenceFailing)
        XCTAssertEqual(RedisError.server("READONLY You can't write against a read only replica.").writeRefusal, .readOnly)
        XCTAssertNil(RedisError.server("ERR unknown command").writeRefusal)
        XCTAssertNil(RedisError.disconnected.writeRefusal, "a lost reply is no refusal: the command may have run")
    }
}
