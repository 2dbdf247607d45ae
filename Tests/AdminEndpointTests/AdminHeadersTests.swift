import EventLoop
import Foundation
import HTTPMessages
import TestSupport
import XCTest
@testable import AdminEndpoint

/// The admin endpoint's one request and response pair keeps header lines as they came and as
/// they are sent, over real HTTP on loopback: a repeated header is not folded into one.
final class AdminHeadersTests: XCTestCase {
    func testRepeatedHeadersReachTheHandlerAndTheClientOneLineEach() throws {
        let loop = EventLoop()
        defer { loop.close() }
        var seen: [String] = []
        let server = AdminServer(loop: loop, timeoutSeconds: 5, limits: AdminServer.Limits(), answering: { request, answer in
            seen = request.headers.values("x-probe")
            answer(HTTPResponse(status: 303, contentType: "text/plain", body: "see /\n",
                                headers: ["Set-Cookie": "a=1; Path=/; HttpOnly", "Location": "/", "Set-Cookie": "b=2; Path=/console"]))
        })
        defer { server.close() }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        let reply = try LoopbackHTTP.exchange("GET /console/x HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n"
                                              + "X-Probe: one\r\nX-Probe: two\r\n\r\n", port: port, on: loop)
        XCTAssertEqual(reply.status, 303, reply.raw)
        XCTAssertEqual(reply.values("set-cookie"), ["a=1; Path=/; HttpOnly", "b=2; Path=/console"],
                       "both cookies reach the client, in order: \(reply.raw)")
        XCTAssertEqual(reply.values("location"), ["/"])
        XCTAssertEqual(seen, ["one", "two"], "both lines of a repeated request header reach the handler")
    }

    func testSettingAHeaderReplacesEveryLineOfItsNameAndKeepsTheOthers() {
        var headers: HTTPHeaders = ["Set-Cookie": "a=1", "Connection": "keep-alive", "set-cookie": "b=2"]
        XCTAssertEqual(headers["SET-COOKIE"], "a=1", "names compare without case; the first value")
        XCTAssertEqual(headers.values("Set-Cookie"), ["a=1", "b=2"])
        headers["connection"] = "close"
        XCTAssertEqual(headers.lines.map(\.name), ["Set-Cookie", "connection", "set-cookie"], "replaced where it was")
        headers.add("Set-Cookie", "c=3")
        XCTAssertEqual(headers.values("set-cookie"), ["a=1", "b=2", "c=3"])
        headers["set-cookie"] = nil
        XCTAssertEqual(headers.lines, [HTTPHeader("connection", "close")])
    }
}
