import HTTPMessages
import EventLoop
import Foundation
import GatewayConfiguration
import Glibc
import TestSupport
import XCTest
@testable import AdminEndpoint

/// The admin server with a handler that answers later (as the console does after its Redis
/// round trips): the request reaches it whole (query, the console's headers, the body, the
/// peer), the answer goes out when it comes, and a connection that ended before its answer —
/// the client left, or the endpoint's request deadline closed it — costs nothing: the late
/// answer is dropped without touching the request evhttp freed (AddressSanitizer runs this
/// test in `make test`), and the server serves on.
final class AdminLateAnswerTests: XCTestCase {
    func testALateAnswerArrivesAndOneForAClientThatLeftIsDropped() throws {
        let loop = EventLoop()
        defer { loop.close() }
        var timers: [LoopTimer] = []
        var answered = 0
        var limits = AdminServer.Limits()
        limits.requestDeadlineMs = 300
        let server = AdminServer(loop: loop, timeoutSeconds: 5, limits: limits, answering: { request, answer in
            let timer = LoopTimer(loop: loop) {
                answered += 1
                let body = String(decoding: request.body, as: UTF8.self)
                answer(HTTPResponse(status: 200, contentType: "text/plain",
                                     body: "\(request.method) \(request.path) ?\(request.query) \(request.headers["origin"] ?? "-") \(body) "
                                         + "\(request.peer?.hasPrefix("127.0.0.1:") == true)\n",
                                     headers: ["Set-Cookie": "a=b"]))
            }
            // `/slow` outlives the connection's deadline: the endpoint closes it first.
            timer.schedule(afterMs: request.path == "/slow" ? 2_500 : 100)
            timers.append(timer)
        })
        defer {
            for t in timers { t.close() }
            server.close()
        }
        let port = try server.bind(Endpoint(host: "127.0.0.1", port: 0))

        // A client that sends a whole request and leaves at once (the kernel queues the
        // connection until the loop accepts it).
        let fd = try LoopbackHTTP.connected(port: port).get()
        let request = Array("POST /console/dead/purge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc".utf8)
        XCTAssertEqual(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }, request.count)
        close(fd)
        loop.run(waitingFor: "the late answer to the client that left") { answered == 1 }

        // A client whose answer comes after the endpoint closed its connection.
        let slow = try LoopbackHTTP.request("GET", "/slow", port: port, loop: loop)
        XCTAssertEqual(slow.status, 0, "closed at the request deadline, before the answer")
        loop.run(waitingFor: "the slow request's late answer") { answered == 2 }

        // A client that waits gets its late answer, and its request came whole.
        let reply = try LoopbackHTTP.request("POST", "/console/x?app=acme", port: port,
                                             headers: ["Origin": "http://elsewhere", "Content-Type": "application/x-www-form-urlencoded"],
                                             body: "ids=1-0", loop: loop)
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.body, "POST /console/x ?app=acme http://elsewhere ids=1-0 true\n")
        XCTAssertEqual(reply.headers["set-cookie"], "a=b")
        XCTAssertEqual(answered, 3)
    }
}
