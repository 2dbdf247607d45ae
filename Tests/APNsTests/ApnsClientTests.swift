import XCTest
import Foundation
import EventLoop
@testable import APNs
import APNsSimulator
import TestSupport

/// The APNs client over real HTTP/2 + TLS against the simulator: headers, auth, Apple's
/// answers, and every connection fault APNs produces.
final class ApnsClientTests: XCTestCase {
    private var server: SimTestServer!

    override func tearDown() {
        server?.close()
        server = nil
    }

    // MARK: Helpers

    private func start(_ configure: (inout SimulatorConfig) -> Void = { _ in }) throws {
        server = try SimTestServer(configure: configure)
    }

    private func tokenSource(clock: @escaping () -> Int64 = { Clock.unixMs() / 1000 }) throws -> ProviderTokenSource {
        let key = try ES256SigningKey.load(p8File: server.pki.jwtKey)
        return ProviderTokenSource(signer: ProviderTokenSigner(teamId: server.teamID, keyId: server.keyID, key: key),
                                   clock: clock)
    }

    private func client(_ auth: ApnsAuthentication? = nil, host: String = "127.0.0.1", port: Int? = nil,
                        _ configure: (inout ApnsClientSettings) -> Void = { _ in }) throws -> ApnsClient {
        var config = ApnsClientSettings(host: host, port: port ?? server.port, caFile: server.pki.caCert,
                                        authentication: try auth ?? .token(tokenSource()))
        config.connections = 1
        config.requestTimeoutMs = 5_000
        configure(&config)
        return try ApnsClient(loop: server.loop, settings: config)
    }

    private func voip(_ token: String, payload: String = #"{"caller":"Alice"}"#) throws -> PushNotification {
        try PushNotification(deviceToken: token, bundleID: server.bundleID, pushType: .voip, payload: Array(payload.utf8))
    }

    /// Sends every push and runs the loop until each has its one completion.
    private func sendAll(_ client: ApnsClient, _ pushes: [PushNotification],
                         file: StaticString = #filePath, line: UInt = #line) -> [Result<PushNotificationResponse, ApnsClientError>] {
        var results = [Result<PushNotificationResponse, ApnsClientError>?](repeating: nil, count: pushes.count)
        var done = 0
        var duplicates = 0
        for (i, push) in pushes.enumerated() {
            client.send(push) { result in
                if results[i] != nil { duplicates += 1 }
                results[i] = result
                done += 1
            }
        }
        server.loop.run(waitingFor: "a completion for each of the \(pushes.count) pushes", timeoutMs: 60_000, file: file, line: line) {
            done >= pushes.count
        }
        XCTAssertEqual(duplicates, 0, "every push completes exactly once", file: file, line: line)
        return results.map { $0! }
    }

    private func statuses(_ results: [Result<PushNotificationResponse, ApnsClientError>]) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for r in results { if case let .success(resp) = r { counts[resp.status, default: 0] += 1 } }
        return counts
    }

    // MARK: Requests

    func testEveryPushTypeSendsItsHeadersAndTopic() throws {
        try start()
        let c = try client()
        let token = "a1b2c3d4"
        var pushes: [PushNotification] = []
        for type in PushType.allCases where type != .mdm {
            let payload = type == .background ? #"{"aps":{"content-available":1}}"# : #"{"aps":{"alert":"x"}}"#
            pushes.append(try PushNotification(deviceToken: token, bundleID: server.bundleID, pushType: type,
                                               payload: Array(payload.utf8), expiration: 1_900_000_000,
                                               apnsID: "123e4567-e89b-12d3-a456-4266554400a0", collapseID: "c1"))
        }
        let results = sendAll(c, pushes)
        XCTAssertEqual(statuses(results)[200], pushes.count, "the simulator accepts each type with its topic: \(results)")
        let recorded = server.simulator.recorded
        for type in PushType.allCases where type != .mdm {
            guard let r = recorded.first(where: { $0.header("apns-push-type") == type.rawValue }) else {
                XCTFail("no request of type \(type) reached the server"); continue
            }
            XCTAssertEqual(r.header("apns-topic"), server.bundleID + type.topicSuffix, "topic of \(type)")
            XCTAssertEqual(r.header("apns-priority"), type == .background ? "5" : "10", "priority of \(type)")
            XCTAssertEqual(r.header("apns-expiration"), "1900000000")
            XCTAssertEqual(r.header("apns-id"), "123e4567-e89b-12d3-a456-4266554400a0")
            XCTAssertEqual(r.header("apns-collapse-id"), "c1")
            XCTAssertEqual(r.path, "/3/device/" + token)
            XCTAssertTrue(r.header("authorization")?.hasPrefix("bearer ey") ?? false, "token auth sends a JWT")
        }
        XCTAssertEqual(PushType.complication.topic(bundleID: "a.b"), "a.b.complication", "not Apple's 'h.complication' typo")
        c.close()
    }

    /// A push waiting for a stream can be taken back (its call was cancelled): it completes at
    /// once with `.withdrawn` and never reaches APNs. A written one cannot, and is answered.
    func testAPushNotWrittenYetCanBeWithdrawnAndAWrittenOneCannot() throws {
        try start { $0.scenarios = ["aa01": .slow(400)] }
        let c = try client()
        var answers: [String: Result<PushNotificationResponse, ApnsClientError>] = [:]
        let first = try XCTUnwrap(c.send(try voip("aa01")) { answers["first"] = $0 })
        server.loop.run(waitingFor: "the first push on the connection's one stream") { server.simulator.stats.requests == 1 }
        let second = try XCTUnwrap(c.send(try voip("bb02")) { answers["second"] = $0 })
        XCTAssertEqual(c.queuedCount, 1, "the connection allows one stream until its first 200")
        XCTAssertFalse(c.withdraw(first), "written: it may have reached APNs")
        XCTAssertTrue(c.withdraw(second))
        XCTAssertEqual(answers["second"].map { if case .failure(.withdrawn) = $0 { return true } else { return false } }, true,
                       "completed before withdraw returned")
        XCTAssertTrue(second.isAnswered)
        XCTAssertFalse(c.withdraw(second), "once only")
        server.loop.run(waitingFor: "the first push's answer") { answers["first"] != nil }
        if case let .success(response)? = answers["first"] { XCTAssertEqual(response.status, 200) } else { XCTFail("\(answers)") }
        server.loop.run(forMs: 100)
        XCTAssertEqual(server.simulator.recorded.filter { $0.token == "bb02" }.count, 0, "the withdrawn push never left")
        XCTAssertEqual(c.stats.sent, 1)
        c.close()
    }

    func testPayloadOverTheLimitIsRefusedBeforeSending() throws {
        let ok = String(repeating: "x", count: 5120 - 8)  // {"p":"…"} adds 8 bytes
        XCTAssertNoThrow(try PushNotification(deviceToken: "ab", bundleID: "a.b", pushType: .voip,
                                              payload: Array(#"{"p":"\#(ok)"}"#.utf8)), "5120 bytes is a legal VoIP payload")
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", bundleID: "a.b", pushType: .voip,
                                                  payload: Array(#"{"p":"\#(ok)x"}"#.utf8))) {
            XCTAssertEqual($0 as? PushNotificationError, .payloadTooLarge(size: 5121, limit: 5120))
        }
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", bundleID: "a.b", pushType: .alert,
                                                  payload: [UInt8](repeating: 0x20, count: 4097))) {
            XCTAssertEqual($0 as? PushNotificationError, .payloadTooLarge(size: 4097, limit: 4096))
        }
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", bundleID: "a.b", pushType: .alert,
                                                  payload: [0x7B, 0x7D], collapseID: String(repeating: "c", count: 65)))
        XCTAssertThrowsError(try PushNotification(deviceToken: "xyz1", bundleID: "a.b", pushType: .alert, payload: [0x7B, 0x7D]))
        XCTAssertThrowsError(try PushNotification(deviceToken: "ab", bundleID: "a.b", pushType: .background,
                                                  payload: [0x7B, 0x7D], priority: .immediate), "background pushes refuse priority 10")
    }

    func testDeviceTokensAreHexOfEvenLengthAndTakeOneSpelling() throws {
        XCTAssertEqual(try PushNotification(deviceToken: "AbCd01", bundleID: "a.b", pushType: .alert, payload: [0x7B, 0x7D]).deviceToken,
                       "abcd01", "hex is case-insensitive: the push carries the lower-case spelling")
        XCTAssertEqual(PushNotification.lowerCaseHexToken("ABCDEF"), "abcdef")
        XCTAssertEqual(PushNotification.lowerCaseHexToken("abcdef"), "abcdef")
        for bad in ["", "abc", "abcg", "ab cd", "ABCDEFG"] {
            XCTAssertNil(PushNotification.lowerCaseHexToken(bad), "\(bad) is no hex token")
            XCTAssertFalse(PushNotification.isHexToken(bad), bad)
        }
        XCTAssertTrue(PushNotification.isHexToken("AB01"))
    }

    func testEveryCharacterUpToU00FFIsAHexDigitExactlyWhenItIsOne() {
        // Just outside each range first ('/' ':' '@' 'G' '`' 'g'), then every scalar up to
        // U+00FF twice over: an even length, so only the digit check decides (the non-ASCII
        // ones put bytes 0x80-0xFF into the scan).
        for bad in ["0/", "0:", "0@", "0G", "0`", "0g", "/0", ":0", "@0", "G0", "`0", "g0"] {
            XCTAssertNil(PushNotification.lowerCaseHexToken(bad), "\(bad) is no hex token")
        }
        let digits = Set("0123456789abcdefABCDEF")
        for value in UInt32(0)...0xFF {
            let character = Character(Unicode.Scalar(value)!)
            let token = String([character, character])
            if digits.contains(character) {
                XCTAssertEqual(PushNotification.lowerCaseHexToken(token), token.lowercased(), "U+\(String(value, radix: 16))")
            } else {
                XCTAssertNil(PushNotification.lowerCaseHexToken(token), "U+\(String(value, radix: 16)) is no hex digit")
            }
            // The same pair at every place of a 64-digit token, which is checked eight bytes
            // at a time: each byte of each word must be judged as the lone one is.
            for at in 0...62 {
                let long = String(repeating: "0", count: at) + token + String(repeating: "0", count: 62 - at)
                if digits.contains(character) {
                    XCTAssertEqual(PushNotification.lowerCaseHexToken(long), long.lowercased(), "U+\(String(value, radix: 16)) at \(at)")
                } else if PushNotification.lowerCaseHexToken(long) != nil {
                    XCTFail("U+\(String(value, radix: 16)) at \(at) is no hex digit")
                }
            }
        }
        XCTAssertTrue(PushNotification.isCanonicalUUID("0123abcd-4567-89ef-0a1b-2c3d4e5f6789"))
        XCTAssertFalse(PushNotification.isCanonicalUUID("0123ABCD-4567-89ef-0a1b-2c3d4e5f6789"), "apns-id is lower case only")
        XCTAssertFalse(PushNotification.isCanonicalUUID("0123abcg-4567-89ef-0a1b-2c3d4e5f6789"))
    }

    // MARK: Answers

    func testUnregisteredAnswerCarriesItsMillisecondTimestamp() throws {
        try start { $0.scenarios = ["dead0001": .unregistered, "bad00001": .badToken] }
        let c = try client()
        let before = Clock.unixMs()
        let results = sendAll(c, [try voip("dead0001"), try voip("bad00001")])
        let after = Clock.unixMs()
        let gone = try results[0].get()
        XCTAssertEqual(gone.status, 410)
        XCTAssertEqual(gone.reason, .unregistered)
        XCTAssertEqual(gone.rejectionKind, .tokenInvalid)
        let ts = try XCTUnwrap(gone.invalidationTimestampMs, "410 carries APNs' timestamp")
        XCTAssertTrue((before...after).contains(ts),
                      "the timestamp is unix milliseconds (not seconds, not microseconds): \(ts) not in \(before)...\(after)")
        XCTAssertNotNil(gone.apnsID)
        let bad = try results[1].get()
        XCTAssertEqual(bad.reason, .badDeviceToken)
        XCTAssertNil(bad.invalidationTimestampMs, "only 410 has a timestamp")
        c.close()
    }

    func testExpiredProviderTokenIsRenewedAndResentWithoutCountingAsAnAnswer() throws {
        try start { $0.scenarios = ["ee000001": .expiredProviderToken(1)] }
        // A clock that issued the first token 25 minutes ago: renewal is then allowed.
        final class FakeClock: @unchecked Sendable { var now = Clock.unixMs() / 1000 - 25 * 60 }
        let clock = FakeClock()
        let source = try tokenSource(clock: { clock.now })
        let c = try client(.token(source))
        let first = try source.currentToken()
        clock.now += 25 * 60
        let results = sendAll(c, [try voip("ee000001")])
        XCTAssertEqual(try results[0].get().status, 200, "the resend with a fresh token is accepted")
        XCTAssertEqual(c.stats.resentAfterTokenRenewal, 1)
        XCTAssertEqual(c.stats.answered, 1, "the 403 is not reported as an answer")
        XCTAssertEqual(source.renewals, 1, "a new token was signed")
        let sent = server.simulator.recorded.filter { $0.token == "ee000001" }.compactMap { $0.header("authorization") }
        XCTAssertEqual(sent.count, 2)
        XCTAssertEqual(sent.first, "bearer " + first)
        XCTAssertNotEqual(sent.first, sent.last, "the resend carries the new token")
        c.close()
    }

    func testCertificateAuthWithPEMAndPKCS12() throws {
        try start()
        let pki = server.pki
        for auth in [ApnsAuthentication.certificate(.pem(certFile: pki.clientCert, keyFile: pki.clientKey)),
                     .certificate(.pkcs12(file: pki.clientP12, password: pki.clientP12Password))] {
            let c = try client(auth)
            let results = sendAll(c, [try voip("c0ffee00")])
            XCTAssertEqual(try results[0].get().status, 200, "certificate auth is accepted: \(auth)")
            c.close()
        }
        XCTAssertNil(server.simulator.recorded.last?.header("authorization"), "no JWT with certificate auth")
        XCTAssertThrowsError(try client(.certificate(.pkcs12(file: pki.clientP12, password: "wrong"))),
                             "a wrong PKCS#12 password fails at set-up")
    }

    func testServerCertificateIsVerified() throws {
        try start()
        // A CA that did not sign the simulator's certificate: the handshake must fail.
        var config = ApnsClientSettings(host: "127.0.0.1", port: server.port, caFile: server.pki.clientCert,
                                        authentication: .token(try tokenSource()))
        config.requestTimeoutMs = 1_000
        let c = try ApnsClient(loop: server.loop, settings: config)
        let results = sendAll(c, [try voip("ab")])
        guard case .failure(.connectionFailed) = results[0] else {
            return XCTFail("an untrusted server certificate must not be accepted: \(results[0])")
        }
        XCTAssertEqual(server.simulator.stats.requests, 0)
        c.close()
    }

    func testServerCertificateForAnotherNameIsRefused() throws {
        // Signed by the CA the client trusts, but for elsewhere.example, not 127.0.0.1.
        let pki = try TestPKI.shared()
        try start { $0.certFile = pki.otherHostCert; $0.keyFile = pki.otherHostKey }
        let c = try client { $0.requestTimeoutMs = 1_000 }
        defer { c.close() }
        let results = sendAll(c, [try voip("ab")])
        guard case let .failure(.connectionFailed(why)) = results[0] else {
            return XCTFail("a certificate for another name must not be accepted: \(results[0])")
        }
        XCTAssertTrue(why.contains("IP address mismatch"), "the reason says why: \(why)")
        XCTAssertEqual(server.simulator.stats.requests, 0)
    }

    /// A TLS server that does not choose HTTP/2 in ALPN (here redis-server's TLS port, with a
    /// certificate the client trusts) is no APNs endpoint: the push fails at the connect, and
    /// the reason says so.
    func testAServerThatDoesNotChooseHTTP2IsRefusedWithItsReason() throws {
        try start()
        let redis = try RedisServer.start(.tls)
        defer { redis.stop() }
        let c = try client(port: redis.port) { $0.requestTimeoutMs = 2_000 }
        defer { c.close() }
        let results = sendAll(c, [try voip("ab")])
        guard case let .failure(.connectionFailed(why)) = results[0] else {
            return XCTFail("a server without HTTP/2 must not be used: \(results[0])")
        }
        XCTAssertTrue(why.contains("did not choose HTTP/2 in the TLS handshake (ALPN: none)"), "the reason says why: \(why)")
    }

    // MARK: Connection behaviour

    func testStreamLimitFollowsTheServerFromOneToMany() throws {
        try start { $0.initialMaxStreams = 1; $0.raisedMaxStreams = 40 }
        let c = try client { $0.connections = 1 }
        let results = sendAll(c, try (0..<400).map { _ in try voip("abcd0001") })
        XCTAssertEqual(statuses(results)[200], 400)
        XCTAssertEqual(c.stats.peakAnnouncedStreams, 40, "the raised limit was read")
        XCTAssertGreaterThan(c.stats.peakInFlight, 1, "more than one stream once the limit rose")
        XCTAssertLessThanOrEqual(c.stats.peakInFlight, 40, "never above the server's limit")
        XCTAssertEqual(server.simulator.stats.maxConcurrentStreams.values.max() ?? 0 <= 40, true)
        XCTAssertEqual(c.stats.resentUnprocessed, 0, "no stream was refused: the client waited for SETTINGS")
        c.close()
    }

    func testGoawayDuringLoadLosesNoPush() throws {
        try start { $0.goawayEvery = 150; $0.raisedMaxStreams = 100 }
        let c = try client { $0.connections = 2 }
        let total = 3000
        let results = sendAll(c, try (0..<total).map { i in try voip(String(format: "%08x", i)) })
        XCTAssertEqual(statuses(results)[200], total, "every push is answered 200 despite GOAWAYs")
        XCTAssertGreaterThan(c.stats.goaways, 5, "the server sent GOAWAY many times")
        XCTAssertEqual(c.stats.lost, 0, "no push was failed because of a GOAWAY")
        XCTAssertEqual(server.simulator.stats.count(status: 200), total,
                       "each push was processed exactly once by the server (none twice, none dropped)")
        c.close()
    }

    func testRefusedStreamsAreResentUnprocessed() throws {
        try start { $0.scenarios = ["4ef00001": .refusedStream(2)] }
        let c = try client()
        let results = sendAll(c, [try voip("4ef00001")])
        XCTAssertEqual(try results[0].get().status, 200, "the push goes through once APNs processes it")
        XCTAssertEqual(server.simulator.stats.refusedStreams, 2)
        XCTAssertEqual(c.stats.resentUnprocessed, 2, "each refused stream was resent, not failed")
        XCTAssertEqual(c.stats.lost, 0)
        XCTAssertEqual(c.stats.answered, 1)
        XCTAssertEqual(server.simulator.requestCount(for: "4ef00001"), 1, "APNs processed it once")
        c.close()
    }

    func testAConnectionLostWithPushesInFlightFailsThemAsLost() throws {
        try start { $0.scenarios = ["b1ac0001": .blackhole, "d20b0001": .dropConnection] }
        let c = try client()
        defer { c.close() }
        // A first 200 raises the stream limit from 1, so that two pushes can be in flight.
        XCTAssertEqual(try sendAll(c, [try voip("a0a00001")])[0].get().status, 200)
        var held: Result<PushNotificationResponse, ApnsClientError>?
        var dropping: Result<PushNotificationResponse, ApnsClientError>?
        c.send(try voip("b1ac0001")) { held = $0 }
        server.loop.run(waitingFor: "the held push to reach APNs") { server.simulator.requestCount(for: "b1ac0001") == 1 }
        c.send(try voip("d20b0001")) { dropping = $0 }
        server.loop.run(waitingFor: "both pushes to complete") { held != nil && dropping != nil }
        for result in [held, dropping] {
            guard case .failure(.connectionLost)? = result else { XCTFail("written, then lost: \(String(describing: result))"); continue }
        }
        XCTAssertEqual(server.simulator.stats.droppedConnections, 1)
        XCTAssertEqual(c.stats.lost, 2, "both were written before the connection went")
        XCTAssertEqual(c.stats.resentUnprocessed, 0, "a written push is not resent by the client: APNs may have delivered it")
        XCTAssertEqual(try sendAll(c, [try voip("a0a00002")])[0].get().status, 200, "a new connection serves the next push")
        XCTAssertEqual(c.stats.connectionsOpened, 2)
    }

    func testServerThatNeverAnswersTimesOutAndStaysBounded() throws {
        try start { $0.defaultScenario = .blackhole; $0.raisedMaxStreams = 50 }
        // The first answer raises the stream limit; with none, one stream at a time.
        let c = try client { $0.connections = 2; $0.requestTimeoutMs = 300; $0.maxQueued = 500; $0.pingTimeoutMs = 200 }
        var results: [Result<PushNotificationResponse, ApnsClientError>] = []
        var peakQueued = 0
        let total = 2000
        for i in 0..<total {
            c.send(try voip(String(format: "%08x", i))) { results.append($0) }
            peakQueued = max(peakQueued, c.queuedCount)
        }
        server.loop.run(waitingFor: "a completion for each of the \(total) pushes") { results.count == total }
        XCTAssertLessThanOrEqual(peakQueued, 500, "the queue never grows past maxQueued")
        let full = results.filter { if case .failure(.queueFull) = $0 { return true }; return false }.count
        let timeouts = results.filter { if case .failure(.timeout) = $0 { return true }; return false }.count
        XCTAssertEqual(full, total - 500, "beyond the bound, sends are refused at once (back-pressure)")
        XCTAssertEqual(timeouts, 500, "every accepted push times out instead of hanging")
        XCTAssertEqual(c.inFlightCount, 0)
        XCTAssertEqual(c.queuedCount, 0)
        c.close()
    }

    func testPeerThatAcceptsButNeverHandshakesFailsEveryPushByItsDeadline() throws {
        try start()
        // A TCP listener that accepts and then never says a word.
        var accepted: [Int32] = []
        let silent = try TCPListener(loop: server.loop, host: "127.0.0.1", port: 0) { accepted.append($0) }
        defer { silent.close(); accepted.forEach { close($0) } }
        let c = try client(port: silent.port) { $0.requestTimeoutMs = 300; $0.connectTimeoutMs = 200 }
        let results = sendAll(c, try (0..<50).map { _ in try voip("abcd") })
        // Each push ends at its request deadline: as a timeout, or, once the silent connect was
        // abandoned at the connect deadline, as a failed connection naming that deadline.
        for result in results {
            switch result {
            case .failure(.timeout): break
            case let .failure(.connectionFailed(why)) where why.contains("no TLS handshake and SETTINGS within 200 ms"): break
            default: XCTFail("a push to a silent peer ends by a deadline, got \(result)")
            }
        }
        XCTAssertEqual(c.stats.timeouts, 50, "every push was ended by its request deadline, not by a socket error")
        XCTAssertGreaterThanOrEqual(c.stats.connectFailures, 1, "the silent connect was abandoned at its deadline")
        XCTAssertFalse(accepted.isEmpty, "the client did connect")
        c.close()
    }

    func testClosingFailsEverythingPendingOnce() throws {
        try start { $0.defaultScenario = .slow(500) }
        let c = try client()
        var completions = [Int](repeating: 0, count: 20)
        var results: [Result<PushNotificationResponse, ApnsClientError>] = []
        for i in 0..<20 {
            c.send(try voip("abcd")) { result in
                completions[i] += 1
                results.append(result)
            }
        }
        let closeTimer = LoopTimer(loop: server.loop) { c.close() }
        closeTimer.schedule(afterMs: 100)
        server.loop.run(waitingFor: "a completion for each of the 20 pushes") { results.count >= 20 }
        closeTimer.close()
        // The answers the simulator holds for 500 ms would come now if anything still listened.
        server.loop.run(forMs: 700)
        XCTAssertEqual(completions, [Int](repeating: 1, count: 20), "each push completes exactly once, even after the answers' time")
        XCTAssertTrue(results.allSatisfy { $0 == .failure(.clientClosed) }, "close completes every push: \(results.prefix(3))")
        var late: Result<PushNotificationResponse, ApnsClientError>?
        c.send(try voip("abcd")) { late = $0 }
        XCTAssertEqual(late, .failure(.clientClosed), "after close, send fails at once")
    }
}
