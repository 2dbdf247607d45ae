import HTTPMessages
import EventLoop
import Foundation
import TestSupport
import XCTest
@testable import AdminEndpoint

/// What the admin server refuses before any route (`RequestScreen`), on the server alone and
/// as a rule; under AddressSanitizer in `make test` (the server walks evhttp's header list).
final class RequestScreenTests: XCTestCase {
    func testHostValuesAndBodyFramingAsARule() {
        let screen = RequestScreen(publicHosts: ["gw.example.com"])
        for host in ["127.0.0.1", "127.0.0.1:9464", "[::1]", "[2001:db8::1]:443", "localhost", "localhost:1", "GW.example.COM.", "10.1.2.3"] {
            XCTAssertTrue(screen.allows(host: host), host)
        }
        for host in ["", "gw.example.com.evil", "evil", "localhost:", "localhost:123456", "127.0.0.1:9x", "[::1", "[not-v6]", "[::1]:",
                     "a b", "gw.example.com:443:1"] {
            XCTAssertFalse(screen.allows(host: host), host)
        }
        XCTAssertNil(screen.refusal(headers: [("Host", "localhost"), ("Content-Length", "12")]))
        XCTAssertEqual(screen.refusal(headers: [("host", "localhost"), ("content-length", "1"), ("Content-Length", "1")])?.status, 400,
                       "two lengths, even equal ones")
        XCTAssertEqual(screen.refusal(headers: [("Host", "localhost"), ("Content-Length", "-1")])?.closes, true)
        XCTAssertEqual(screen.refusal(headers: [("Host", "localhost"), ("transfer-encoding", "gzip, chunked")])?.status, 400)
        XCTAssertEqual(screen.refusal(headers: [])?.message, "a request needs a Host header")
        XCTAssertEqual(screen.refusal(headers: [("Host", "evil")])?.status, 421)
        XCTAssertEqual(screen.refusal(headers: [("Host", "evil")])?.closes, false)
    }

    func testTheServerRefusesBeforeItsHandlerAndSurvivesManyHeaderLines() throws {
        let loop = EventLoop()
        var handled = 0
        let server = AdminServer(loop: loop) { _ in
            handled += 1
            return HTTPResponse(status: 200, contentType: "text/plain", body: "ok\n")
        }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))
        defer { server.close(); loop.close() }
        let many = (0..<100).map { "X-Header-\($0): \(String(repeating: "v", count: $0))\r\n" }.joined()
        let ok = try LoopbackHTTP.exchange("GET /x HTTP/1.1\r\n\(many)Host: 127.0.0.1\r\nConnection: close\r\n\r\n", port: port, on: loop)
        XCTAssertEqual(ok.status, 200)
        for request in ["GET /x HTTP/1.1\r\n\(many)Connection: close\r\n\r\n",
                        "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\(many)Host: 127.0.0.1\r\n\r\n",
                        "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nab",
                        "POST /x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n",
                        "GET /x HTTP/1.1\r\nHost: rebound.example\r\nConnection: close\r\n\r\n"] {
            let reply = try LoopbackHTTP.exchange(request, port: port, on: loop)
            XCTAssertTrue([400, 421].contains(reply.status), "\(reply.status) for \(request.prefix(60))")
        }
        XCTAssertEqual(handled, 1, "only the good request reached the handler")
    }
}
