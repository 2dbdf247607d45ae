import CCurlOptions
import EventLoop
import Foundation
import Glibc
import OutboundHTTP
import TestSupport
import Webhooks
import XCTest

final class WebhookSignatureTests: XCTestCase {
    /// The value Python's hmac computes for the same secret, time and body.
    func testSignatureMatchesAnIndependentHMAC() {
        let value = WebhookSignature.value(secret: Array(String(repeating: "k", count: 32).utf8), unixSeconds: 1_700_000_000,
                                           body: Array(#"{"outcome":"cancelled"}"#.utf8))
        XCTAssertEqual(value, "t=1700000000,v1=66db7e82fb834294d20d8601d589b073d77dfbaac812adbdac4b82dced3852e5")
    }
}

final class WebhookAttemptsTests: XCTestCase {
    let attempts = WebhookAttempts(retryForMs: 60_000, firstBackoffMs: 1_000, maxBackoffMs: 8_000)

    func testTwoHundredsDeliverAndOtherFourHundredsDeadLetter() {
        XCTAssertEqual(attempts.onAnswer(.status(204), attempt: 1, resultMs: 0, nowMs: 0, random: 0.5), .delivered)
        XCTAssertEqual(attempts.onAnswer(.status(400), attempt: 1, resultMs: 0, nowMs: 0, random: 0.5), .deadLetter(reason: "status 400"))
        guard case .deadLetter = attempts.onAnswer(.refusedAddress, attempt: 1, resultMs: 0, nowMs: 0, random: 0.5) else {
            return XCTFail("a refused address is not retried")
        }
    }

    func testServerErrorsAndTooManyRequestsBackOffWithJitterUntilTheWindowEnds() {
        XCTAssertEqual(attempts.onAnswer(.status(503), attempt: 1, resultMs: 0, nowMs: 0, random: 0.5), .retry(afterMs: 1_000))
        XCTAssertEqual(attempts.onAnswer(.status(429), attempt: 3, resultMs: 0, nowMs: 0, random: 0.5), .retry(afterMs: 4_000))
        XCTAssertEqual(attempts.onAnswer(.transportFailed("x"), attempt: 10, resultMs: 0, nowMs: 0, random: 0), .retry(afterMs: 4_000))
        XCTAssertEqual(attempts.onAnswer(.status(500), attempt: 10, resultMs: 0, nowMs: 0, random: 0.999), .retry(afterMs: 11_992))
        guard case .deadLetter = attempts.onAnswer(.status(500), attempt: 2, resultMs: 0, nowMs: 59_000, random: 0.5) else {
            return XCTFail("past the retry window a delivery is dead-lettered")
        }
    }
}

final class HTTPPosterTests: XCTestCase {
    private func address(_ text: String) -> Bool {
        if text.contains(":") {
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            inet_pton(AF_INET6, text, &a.sin6_addr)
            return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pushgw_address_is_private($0) == 1 } }
        }
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, text, &a.sin_addr)
        return withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pushgw_address_is_private($0) == 1 } }
    }

    func testLoopbackPrivateAndLinkLocalAddressesAreRefusedPublicOnesNot() {
        for refused in ["127.0.0.1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "169.254.169.254", "100.64.0.1",
                        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fd00::1", "::ffff:127.0.0.1"] {
            XCTAssertTrue(address(refused), refused)
        }
        for allowed in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "192.169.0.1", "2001:4860:4860::8888", "::ffff:1.1.1.1"] {
            XCTAssertFalse(address(allowed), allowed)
        }
    }

    /// A real POST to a loopback server (Python's http.server), allowed; and the same URL
    /// refused after DNS when loopback is not allowed.
    func testPostsToALoopbackServerOnlyWhenPrivateTargetsAreAllowed() throws {
        let port = freeLoopbackPort()
        let secret = TestScratch.file("webhook-secret")
        try String(repeating: "ab12cd34", count: 4).write(toFile: secret, atomically: true, encoding: .utf8)
        let out = TestScratch.file("webhook-deliveries")
        let receiver = try ChildProcess("python3", [packageRoot + "/examples/webhooks/receiver.py", String(port), secret, out])
        defer { receiver.stop() }
        let loop = EventLoop()
        let poster = HTTPPoster(loop: loop)
        defer {
            poster.close()
            loop.close()
        }
        var outcome: HTTPPostOutcome?
        let deadline = Clock.monotonicMs() + 20_000
        // The receiver is listening once it answers (401: no signature).
        while Clock.monotonicMs() < deadline {
            outcome = nil
            poster.post(HTTPPostRequest(url: "http://localhost:\(port)/hook", headers: ["Content-Type: application/json"],
                                        body: Array("{}".utf8), timeoutMs: 2_000, allowPrivateTargets: true)) { outcome = $0 }
            drive(loop, waitingFor: "the POST", timeoutMs: 10_000) { outcome != nil }
            if case .answered = outcome { break }
            pause(loop, ms: 100)
        }
        guard case let .answered(status, _) = outcome else { return XCTFail("no answer: \(String(describing: outcome))") }
        XCTAssertEqual(status, 401)
        outcome = nil
        poster.post(HTTPPostRequest(url: "http://localhost:\(port)/hook", headers: [], body: Array("{}".utf8), timeoutMs: 2_000,
                                    allowPrivateTargets: false)) { outcome = $0 }
        drive(loop, waitingFor: "the refused POST", timeoutMs: 10_000) { outcome != nil }
        XCTAssertEqual(outcome, .refusedAddress)
        XCTAssertEqual(poster.running, 0)
    }
}
