import HTTPMessages
import EventLoop
import GatewayConfiguration
import XCTest
@testable import AdminEndpoint

/// Who may see what on the admin endpoint, and `/readyz`'s verdict: the pure rules, no sockets.
final class AdminRoutesTests: XCTestCase {
    private let secret = "s3cret-admin-token-0123456789"

    private func routes(token: String?, ready: Readiness = Readiness(problems: [])) -> AdminRoutes {
        let r = AdminRoutes(token: token.flatMap(AdminToken.init), metrics: { "pushgw_x 1\n" }, readiness: { ready })
        r.addRoute("/status") { _ in HTTPResponse(status: 200, contentType: "application/json", body: "{}") }
        return r
    }

    func testTheThreeOpenPathsNeedNoToken() {
        let r = routes(token: secret)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/healthz")).status, 200)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/healthz")).body, Array("ok\n".utf8))
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/readyz")).status, 200)
        let metrics = r.handle(HTTPRequest(method: "HEAD", path: "/metrics"))
        XCTAssertEqual(metrics.status, 200)
        XCTAssertEqual(metrics.contentType, "text/plain; version=0.0.4; charset=utf-8")
        let post = r.handle(HTTPRequest(method: "POST", path: "/metrics"))
        XCTAssertEqual(post.status, 405, "the open paths are read-only")
        XCTAssertEqual(post.headers["Allow"], "GET, HEAD")
    }

    func testEverythingElseNeedsTheBearerToken() {
        let r = routes(token: secret)
        let none = r.handle(HTTPRequest(method: "GET", path: "/status"))
        XCTAssertEqual(none.status, 401)
        XCTAssertEqual(none.headers["WWW-Authenticate"], "Bearer realm=\"pushgw\"")
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Bearer wrong"])).status, 401)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Bearer " + secret + "x"])).status, 401,
                       "a longer token is wrong")
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Bearer " + secret.dropLast()])).status, 401,
                       "a prefix of the token is wrong")
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Basic " + secret])).status, 401,
                       "another scheme is refused")
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": secret])).status, 401)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Bearer " + secret])).status, 200)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "bearer  " + secret])).status, 200,
                       "the scheme is case-insensitive (RFC 7235)")
    }

    func testUnknownPathsAre404OnlyAfterAuthentication() {
        let r = routes(token: secret)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/nope")).status, 401,
                       "without the token an unknown path is not revealed as unknown")
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/nope", headers: ["Authorization": "Bearer " + secret])).status, 404)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/metrics/")).status, 401,
                       "only the exact open paths are open")
    }

    func testASectionAnswersItsOwnPathsLaterAndNothingElse() {
        let r = routes(token: secret)
        var pending: [(HTTPRequest, (HTTPResponse) -> Void)] = []
        r.addSection("/console") { request, answer in pending.append((request, answer)) }
        var answers: [String: Int] = [:]
        for path in ["/console", "/console/dead", "/consolex", "/status"] {
            r.answer(HTTPRequest(method: "GET", path: path)) { answers[path] = $0.status }
        }
        XCTAssertEqual(pending.map(\.0.path), ["/console", "/console/dead"], "the prefix and the paths under it, not /consolex")
        XCTAssertEqual(answers, ["/consolex": 401, "/status": 401], "the other paths are answered at once, under the bearer token")
        for (request, answer) in pending { answer(HTTPResponse(status: 200, contentType: "text/plain", body: request.path)) }
        XCTAssertEqual(answers["/console/dead"], 200, "a section answers when it is ready")
    }

    func testWithoutATokenFileTheAdminAPIIsClosed() {
        let r = routes(token: nil)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/status", headers: ["Authorization": "Bearer anything"])).status, 403)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/nope")).status, 403)
        XCTAssertEqual(r.handle(HTTPRequest(method: "GET", path: "/healthz")).status, 200, "the open paths stay open")
        XCTAssertNil(AdminToken("  \n"), "an empty token file gives no token: the API stays closed")
    }

    func testTheTokenNeverPrints() throws {
        let token = try XCTUnwrap(AdminToken(secret + "\n"))
        XCTAssertEqual("\(token)", "<redacted>")
        XCTAssertEqual(String(reflecting: token), "<redacted>")
        var dumped = ""
        dump(token, to: &dumped)
        XCTAssertFalse(dumped.contains(secret), dumped)
        XCTAssertTrue(token.matches(authorization: "Bearer " + secret), "the file's trailing newline is not part of the token")
    }

    func testConstantTimeComparison() {
        XCTAssertTrue(AdminToken.constantTimeEqual(ArraySlice(Array("abc".utf8)), Array("abc".utf8)))
        XCTAssertFalse(AdminToken.constantTimeEqual(ArraySlice(Array("abd".utf8)), Array("abc".utf8)))
        XCTAssertFalse(AdminToken.constantTimeEqual(ArraySlice(Array("ab".utf8)), Array("abc".utf8)))
        XCTAssertFalse(AdminToken.constantTimeEqual(ArraySlice(Array("abc\0".utf8)), Array("abc".utf8)))
        XCTAssertFalse(AdminToken.constantTimeEqual(ArraySlice([]), Array("abc".utf8)))
        let slice = Array("xxabc".utf8)[2...]
        XCTAssertTrue(AdminToken.constantTimeEqual(slice, Array("abc".utf8)), "slices not starting at 0")
    }

    // MARK: Readiness

    func testReadyWhenRedisAnsweredLately() {
        let r = Readiness.evaluate(nowMs: 10_000, lastPingOkMs: 9_500, maxPingAgeMs: 5_000, lastPingError: nil, draining: false)
        XCTAssertTrue(r.isReady)
        XCTAssertEqual(r.json(), #"{"ready":true}"#)
    }

    func testNotReadyNamesEveryProblem() throws {
        let r = Readiness.evaluate(nowMs: 20_000, lastPingOkMs: 9_000, maxPingAgeMs: 5_000, lastPingError: "disconnected",
                                   draining: true, refusingWrites: ["primary": "redis: NOREPLICAS Not enough good replicas to write."])
        XCTAssertFalse(r.isReady)
        XCTAssertEqual(r.problems.map(\.check), ["draining", "redis", "redis_writes"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.json().utf8)) as? [String: Any])
        XCTAssertEqual(json["ready"] as? Bool, false)
        let problems = try XCTUnwrap(json["problems"] as? [[String: Any]])
        XCTAssertEqual(problems[1]["detail"] as? String, "no successful PING for 11000 ms (last error: disconnected)")
        XCTAssertEqual(Readiness.evaluate(nowMs: 1, lastPingOkMs: nil, maxPingAgeMs: 5_000, lastPingError: nil,
                                          draining: false).problems.first?.detail,
                       "no successful PING yet")
    }

    /// Redis answering PINGs is not enough: a node refusing writes (no outcome can be recorded)
    /// is a problem of its own, naming the node and Redis' answer.
    func testANodeRefusingWritesIsAProblemThoughRedisAnswersPINGs() throws {
        let r = Readiness.evaluate(nowMs: 10_000, lastPingOkMs: 9_500, maxPingAgeMs: 5_000, lastPingError: nil,
                                   draining: false,
                                   refusingWrites: ["primary": "redis: OOM command not allowed when used memory > 'maxmemory'."])
        XCTAssertFalse(r.isReady)
        XCTAssertEqual(r.problems.map(\.check), ["redis_writes"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(r.json().utf8)) as? [String: Any])
        let problem = try XCTUnwrap((json["problems"] as? [[String: Any]])?.first)
        XCTAssertEqual(problem["node"] as? String, "primary")
        XCTAssertEqual(problem["detail"] as? String, "refuses writes: redis: OOM command not allowed when used memory > 'maxmemory'.")
    }

    func testLoopbackHostsAreRecognised() {
        XCTAssertTrue(Endpoint.isLoopback("127.0.0.1"))
        XCTAssertTrue(Endpoint.isLoopback("::1"))
        XCTAssertTrue(Endpoint.isLoopback("localhost"))
        XCTAssertFalse(Endpoint.isLoopback("0.0.0.0"))
        XCTAssertFalse(Endpoint.isLoopback("10.0.0.5"))
    }
}
