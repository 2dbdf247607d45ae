import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient
import TestSupport
import XCTest
@testable import OperatorsConsole

/// A console on a real redis-server, in process (`OperatorsConsole.handle`, as the admin
/// endpoint calls it), signed in as admin: the requests of a test case, their pages, and
/// Redis beside it. Subclasses call `startConsole` in their `setUpWithError`.
class ConsoleTestCase: XCTestCase {
    var server: RedisServer!
    var loop: EventLoop!
    var connection: RedisConnection!
    var operations: DeadLetterOperations!
    var console: OperatorsConsole!
    /// The session's cookie (`name=value`), sent with every request while not empty.
    var cookie = ""
    /// The session's CSRF token, for the forms that change something.
    var csrf = ""

    /// Starts Redis and the console for `policies`' apps and signs in with the admin token as
    /// `name`.
    func startConsole(policies: [String: DeadLetterRetentionPolicy], readOnlyAvailable: Bool = false, name: String = "ann",
                      figures: @escaping () -> ConsoleFigures = { ConsoleFigures() }) throws {
        server = try RedisServer.start()
        loop = EventLoop()
        connection = RedisConnection(loop: loop, config: .init(url: try RedisURL(parsing: server.url)))
        connection.start()
        operations = DeadLetterOperations(loop: loop, store: DeadLetterStore(topology: .single(connection), prefix: "pushgw"),
                                          policies: policies, ringTimeoutsMs: policies.mapValues { _ in 30_000 })
        console = OperatorsConsole(loop: loop, operations: operations, readOnlyAvailable: readOnlyAvailable,
                                   signIn: { token, _ in
                                       token == "admin-token" ? .signedIn(.admin) : token == "readonly-token" ? .signedIn(.readOnly) : .wrong
                                   }, figures: figures)
        console.fleet = FleetFigureStore(topology: .single(connection), prefix: "pushgw")
        let signIn = request("POST", "/console/signin", form: [("token", "admin-token"), ("name", name)])
        XCTAssertEqual(signIn.status, 303)
        cookie = try XCTUnwrap(signIn.header("Set-Cookie")?.split(separator: ";").first.map(String.init))
        csrf = try XCTUnwrap(match(#"name="csrf" value="([0-9a-f]+)""#, body(request("GET", "/console/dead"))).first)
    }

    override func tearDown() {
        console?.close()
        connection?.close()
        loop?.close()
        server?.stop()
    }

    func request(_ method: String, _ path: String, query: [(String, String)] = [], form: [(String, String)] = [],
                 file: StaticString = #filePath, line: UInt = #line) -> HTTPResponse {
        var headers: HTTPHeaders = ["host": "127.0.0.1:9464", "origin": "http://127.0.0.1:9464", "content-type": "application/x-www-form-urlencoded"]
        if !cookie.isEmpty { headers["cookie"] = cookie }
        let r = HTTPRequest(method: method, path: path, query: FormData.encode(query), headers: headers,
                               body: Array(FormData.encode(form).utf8), peer: "127.0.0.1:5000")
        var response: HTTPResponse?
        console.handle(r) { response = $0 }
        loop.run(waitingFor: "the console to answer \(method) \(path)", file: file, line: line) { response != nil }
        return response ?? HTTPResponse(status: 0, contentType: "", body: "")
    }

    func body(_ r: HTTPResponse) -> String { String(decoding: r.body, as: UTF8.self) }

    /// The first capture group of each match of `pattern` in `text`.
    func match(_ pattern: String, _ text: String) -> [String] {
        guard let regex = try? NSRegularExpression(pattern: pattern) else { return [] }
        return regex.matches(in: text, range: NSRange(text.startIndex..., in: text)).compactMap { m in
            Range(m.range(at: 1), in: text).map { String(text[$0]) }
        }
    }

    func redis(_ args: [String]) -> RedisReply? {
        var result: Result<RedisReply, RedisError>?
        connection.send(args) { result = $0 }
        loop.run(waitingFor: "redis to answer \(args[0])") { result != nil }
        return try? result?.get()
    }
}
