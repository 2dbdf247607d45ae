import APNs
import APNsSimulator
import EventLoop
import Foundation
import TestSupport
import XCTest

/// The simulator over real TLS on loopback, driven by nghttp2's own command-line clients
/// (not pushgw's client), so that a bug shared by our client and server cannot hide.
final class SimulatorWireTests: XCTestCase {
    private var server: SimTestServer!
    private var voipBody: String!
    private var bodyFiles: [String] = []
    private let token = "00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0"

    override func setUpWithError() throws {
        server = try SimTestServer()
        voipBody = try bodyFile(#"{"caller":"+15551234567","callId":"call-7f3a9c"}"#)
    }

    override func tearDown() {
        server?.close()
        server = nil
        for file in bodyFiles { try? FileManager.default.removeItem(atPath: file) }
        bodyFiles = []
    }

    // MARK: Helpers

    private func bodyFile(_ text: String) throws -> String {
        let path = TestScratch.file("body") + ".json"
        bodyFiles.append(path)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private enum Auth { case jwt(String?), certificate, none }

    /// A VoIP push to `token` unless `headers`/`path` say otherwise: a header given replaces
    /// the default of the same name; `omit` drops a default header.
    private func push(to token: String? = nil, path: String? = nil, morePaths: [String] = [], headers: [String] = [],
                      omit: [String] = [], auth: Auth = .jwt(nil), body: String? = nil,
                      timeoutSeconds: Int = 10) throws -> NghttpResult {
        func name(_ line: String) -> Substring { line.prefix(1) + line.dropFirst().prefix { $0 != ":" } }
        let replaced = Set(headers.map(name)).union(omit.map { Substring($0) })
        var lines = ["apns-push-type: voip", "apns-topic: com.example.app.voip"].filter { !replaced.contains(name($0)) }
        lines += headers
        var cert: (cert: String, key: String)?
        switch auth {
        case let .jwt(jwt): lines.append("authorization: bearer \(try jwt ?? server.providerToken())")
        case .certificate: cert = (server.pki.clientCert, server.pki.clientKey)
        case .none: break
        }
        return try SimTools.nghttp(port: server.port, path: path ?? "/3/device/\(token ?? self.token)", morePaths: morePaths,
                                   headers: lines,
                                   bodyFile: body ?? voipBody, clientCert: cert, timeoutSeconds: timeoutSeconds,
                                   on: server.loop)
    }

    private func assertRejected(_ result: NghttpResult, _ reason: ApnsReason, _ message: String,
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(result.statuses, [reason.status], "\(message): status", file: file, line: line)
        XCTAssertEqual(result.errorBody, "{\"reason\":\"\(reason.text)\"}", "\(message): body", file: file, line: line)
        XCTAssertEqual(result.headers["content-type"], "application/json", "\(message): an error body is JSON", file: file, line: line)
        XCTAssertTrue(PushNotification.isCanonicalUUID(result.headers["apns-id"] ?? ""),
                      "\(message): every answer carries an apns-id", file: file, line: line)
    }

    // MARK: Accepted pushes and the stream limit

    func testAcceptedPushGets200WithGeneratedApnsIdAndRaisesTheStreamLimit() throws {
        let result = try push()
        XCTAssertEqual(result.statuses, [200], result.run.output)
        XCTAssertTrue(PushNotification.isCanonicalUUID(result.headers["apns-id"] ?? ""), "APNs generates an apns-id when none is sent")
        XCTAssertNil(result.errorBody, "a 200 has an empty body")
        XCTAssertNil(result.headers["apns-unique-id"], "apns-unique-id is sent only by the sandbox")
        XCTAssertEqual(result.maxConcurrentStreamsSettings, [1, 1000],
                       "the first SETTINGS allows one stream, raised after the first 200 (like APNs)")
        XCTAssertEqual(server.simulator.stats.settingsRaised, 1)
        XCTAssertEqual(server.simulator.stats.count(status: 200), 1)
    }

    func testGivenApnsIdIsEchoed() throws {
        let id = "4c1e5f6a-0b7d-4e2a-9f3c-2d8b7a6e5f40"
        let result = try push(headers: ["apns-id: \(id)"])
        XCTAssertEqual(result.statuses, [200], result.run.output)
        XCTAssertEqual(result.headers["apns-id"], id, "APNs echoes the request's apns-id")
    }

    func testSandboxSendsUniqueId() throws {
        server.close()
        server = try SimTestServer { $0.sandbox = true }
        let result = try push()
        XCTAssertEqual(result.statuses, [200], result.run.output)
        XCTAssertTrue(PushNotification.isCanonicalUUID(result.headers["apns-unique-id"] ?? ""),
                      "the development environment answers with apns-unique-id")
    }

    // MARK: Validation

    func testRequestsAPNsWouldRefuseGetAppleReasons() throws {
        let tooBig = try bodyFile("{\"pad\":\"" + String(repeating: "x", count: 5120) + "\"}")
        let empty = try bodyFile("")
        let cases: [(String, NghttpResult, ApnsReason)] = [
            ("method other than POST", try push(headers: [":method: PUT"]), .methodNotAllowed),
            ("path outside /3/device/", try push(path: "/3/devices/\(token)"), .badPath),
            ("no token in the path", try push(path: "/3/device/"), .missingDeviceToken),
            ("token not hex", try push(to: "zz12"), .badDeviceToken),
            ("apns-priority sent twice", try push(headers: ["apns-priority: 10", "apns-priority: 5"]), .duplicateHeaders),
            ("no apns-topic", try push(omit: ["apns-topic"]), .missingTopic),
            ("topic without the voip suffix", try push(headers: ["apns-topic: com.example.app"]), .badTopic),
            ("topic of an app not configured", try push(headers: ["apns-topic: com.other.app.voip"]), .badTopic),
            ("unknown push type", try push(headers: ["apns-push-type: fax"]), .invalidPushType),
            ("priority 7", try push(headers: ["apns-priority: 7"]), .badPriority),
            ("background push at priority 10", try push(headers: ["apns-push-type: background", "apns-topic: com.example.app",
                                                                  "apns-priority: 10"]), .badPriority),
            ("apns-id not canonical", try push(headers: ["apns-id: 123e4567-e89b-12d3-a456-42665544000"]), .badMessageId),
            ("collapse id over 64 bytes", try push(headers: ["apns-collapse-id: " + String(repeating: "c", count: 65)]), .badCollapseId),
            ("expiration not a number", try push(headers: ["apns-expiration: tomorrow"]), .badExpirationDate),
            ("empty payload", try push(body: empty), .payloadEmpty),
            ("VoIP payload over 5120 bytes", try push(body: tooBig), .payloadTooLarge),
        ]
        for (what, result, reason) in cases {
            assertRejected(result, reason, what)
        }
        XCTAssertEqual(server.simulator.stats.requests, cases.count, "every refused request is counted")
        XCTAssertEqual(server.simulator.stats.count(status: 200), 0, "none of these may be accepted")
    }

    func testPushWithinEveryLimitIsAccepted() throws {
        let result = try push(headers: ["apns-priority: 10", "apns-expiration: 0",
                                        "apns-collapse-id: " + String(repeating: "c", count: 64)])
        XCTAssertEqual(result.statuses, [200], "limits are inclusive: a 64-byte collapse id is fine\n" + result.run.output)
    }

    // MARK: Authentication

    func testProviderTokenIsVerified() throws {
        let now = Clock.unixMs() / 1000
        assertRejected(try push(auth: .none), .missingProviderToken, "no authorization and no certificate")
        assertRejected(try push(auth: .jwt(try server.providerToken(keyFile: server.pki.otherJWTKey))),
                       .invalidProviderToken, "signed with a key other than the kid's")
        assertRejected(try push(auth: .jwt(try server.providerToken(keyID: "UNKNOWNKID"))),
                       .invalidProviderToken, "unknown key id")
        assertRejected(try push(auth: .jwt(try server.providerToken(teamID: "OTHERTEAM1"))),
                       .invalidProviderToken, "iss is not the configured team")
        assertRejected(try push(auth: .jwt(try server.providerToken(issuedAt: now - 7200))),
                       .expiredProviderToken, "iat two hours old")
        // One character well inside the signature (the last one carries padding bits, so
        // changing it may leave the decoded signature as it was).
        var tampered = Array(try server.providerToken())
        let inside = tampered.count - 10
        tampered[inside] = tampered[inside] == "A" ? "B" : "A"
        assertRejected(try push(auth: .jwt(String(tampered))), .invalidProviderToken, "signature altered")
        XCTAssertEqual(try push(auth: .jwt(try server.providerToken(issuedAt: now - 600))).statuses, [200],
                       "a ten-minute-old token signed by the configured key is valid")
    }

    func testClientCertificateAuthenticatesItsOwnBundleOnly() throws {
        let ok = try push(auth: .certificate)
        XCTAssertEqual(ok.statuses, [200], "a verified certificate needs no authorization header\n" + ok.run.output)
        assertRejected(try push(headers: ["apns-topic: com.example.other.voip"], auth: .certificate), .badTopic,
                       "a certificate for com.example.app cannot push to another app")
        XCTAssertEqual(try push(headers: ["apns-push-type: alert", "apns-topic: com.example.app"], auth: .certificate).statuses,
                       [200], "the certificate's bundle may receive alert pushes too")
    }

    // MARK: Scenarios

    func testUnregisteredTokenGets410WithMillisecondTimestamp() throws {
        server.simulator.setScenario(.unregistered, for: token)
        let before = Clock.unixMs()
        let result = try push()
        let after = Clock.unixMs()
        XCTAssertEqual(result.statuses, [410], result.run.output)
        let body = try XCTUnwrap(result.errorBody)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        XCTAssertEqual(json["reason"] as? String, ApnsReason.unregistered.text)
        let timestamp = try XCTUnwrap((json["timestamp"] as? NSNumber)?.int64Value, "410 carries a timestamp")
        XCTAssertTrue((before...after).contains(timestamp), "the 410 timestamp is unix milliseconds, got \(timestamp)")
    }

    func testScenariosAnswerWithTheirReasons() throws {
        let table: [(Scenario, ApnsReason)] = [
            (.expiredToken, .expiredToken), (.badToken, .badDeviceToken), (.notForTopic, .deviceTokenNotForTopic),
            (.tooMany, .tooManyRequests), (.error500, .internalServerError), (.unavailable, .serviceUnavailable),
        ]
        for (i, (scenario, reason)) in table.enumerated() {
            let t = String(format: "%064x", i + 1)
            server.simulator.setScenario(scenario, for: t)
            let result = try push(to: t)
            XCTAssertEqual(result.statuses, [reason.status], "\(scenario)")
            XCTAssertTrue(result.errorBody?.hasPrefix("{\"reason\":\"\(reason.text)\"") ?? false, "\(scenario): \(result.errorBody ?? "no body")")
        }
    }

    func testFlakyTokenFailsItsFirstRequestsThenSucceeds() throws {
        server.simulator.setScenario(.flaky(2), for: token)
        let statuses = try (0..<3).flatMap { _ in try push().statuses }
        XCTAssertEqual(statuses, [503, 503, 200], "flaky:2 answers 503 twice, then 200")
        XCTAssertEqual(server.simulator.requestCount(for: token.uppercased()), 3)
    }

    func testExpiredProviderTokenScenarioRefusesEvenAGoodTokenNTimes() throws {
        server.simulator.setScenario(.expiredProviderToken(1), for: token)
        let jwt = try server.providerToken()
        assertRejected(try push(auth: .jwt(jwt)), .expiredProviderToken, "first request under expired_provider_token:1")
        XCTAssertEqual(try push(auth: .jwt(jwt)).statuses, [200], "the second request with the same token passes")
    }

    func testSlowTokenIsAnsweredAfterARequestSentAfterIt() throws {
        server.close()
        server = try SimTestServer { $0.initialMaxStreams = 10 }
        let quick = String(format: "%064x", 7)
        server.simulator.setScenario(.slow(300), for: token)
        // Two requests at once on one connection, the slow token's first (stream 1).
        let result = try push(to: token, morePaths: ["/3/device/\(quick)"])
        XCTAssertEqual(result.statuses, [200, 200], result.run.output)
        XCTAssertEqual(result.statusStreams, [3, 1], "the later request is answered first: the slow one waits\n" + result.run.output)
        XCTAssertEqual(server.simulator.recorded.map(\.status), [200, 200])
        server.loop.run(waitingFor: "the slow request's line in the log") {
            textSoFar(server.logFile).contains("\"delay_ms\":300")
        }
    }

    func testBlackholedTokenIsNeverAnswered() throws {
        server.simulator.setScenario(.blackhole, for: token)
        let result = try push(timeoutSeconds: 1)
        XCTAssertEqual(result.statuses, [], "a blackholed push gets no answer before nghttp gives up\n" + result.run.output)
        XCTAssertTrue(result.run.output.contains("Timeout"), "nghttp gave up waiting\n" + result.run.output)
        XCTAssertEqual(server.simulator.stats.requests, 1, "the request was received")
        XCTAssertEqual(server.simulator.stats.unanswered, 1)
    }

    // MARK: Connection behaviour

    func testGoawayAfterEveryNRequestsAndLaterStreamsAreNotProcessed() throws {
        server.close()
        server = try SimTestServer { $0.goawayEvery = 5 }
        let jwt = try server.providerToken()
        let result = try SimTools.h2load(port: server.port, path: "/3/device/\(token)",
                                         headers: ["apns-push-type: voip", "apns-topic: com.example.app.voip",
                                                   "authorization: bearer \(jwt)"],
                                         bodyFile: voipBody, requests: 20, clients: 1, streams: 10, on: server.loop)
        let stats = server.simulator.stats
        let context = "\(stats)\n" + result.run.output
        XCTAssertEqual(stats.goawaysSent, 1, "a GOAWAY follows the 5th request\n" + context)
        XCTAssertEqual(stats.connectionsAccepted, 1, "h2load does not reconnect after a GOAWAY\n" + context)
        XCTAssertEqual(stats.requests, 5, "streams above the GOAWAY's last stream id are not processed, though h2load sent 20\n" + context)
        XCTAssertEqual(result.succeeded, 5, "every processed stream's answer reaches the client before the connection closes\n" + context)
        XCTAssertEqual(result.failed, 15, "h2load counts the unprocessed streams as failed\n" + context)
    }

    func testStreamLimitRisesAfterTheFirstSuccess() throws {
        let jwt = try server.providerToken()
        let result = try SimTools.h2load(port: server.port, path: "/3/device/\(token)",
                                         headers: ["apns-push-type: voip", "apns-topic: com.example.app.voip",
                                                   "authorization: bearer \(jwt)"],
                                         bodyFile: voipBody, requests: 200, clients: 1, streams: 20, on: server.loop)
        let observed = server.simulator.stats.maxConcurrentStreams[1] ?? 0
        XCTAssertGreaterThan(observed, 1, "after the raise the client may open more than one stream\n" + result.run.output)
        XCTAssertLessThanOrEqual(observed, 20, "never more streams than the client opened")
        XCTAssertEqual(server.simulator.stats.connectionsAccepted, 1)
    }

    // MARK: Log and records

    func testEveryRequestIsLoggedAsJSONLines() throws {
        server.simulator.setScenario(.unregistered, for: token)
        _ = try push()
        _ = try push(to: "abcd", headers: ["apns-priority: 5", "apns-collapse-id: c1", "apns-expiration: 1764412345"])
        let recorded = server.simulator.recorded
        server.simulator.close()
        let lines = try String(contentsOfFile: server.logFile, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 2, "one line per request")
        let entries = try lines.map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(entries[0]["status"] as? Int, 410)
        XCTAssertEqual(entries[0]["reason"] as? String, ApnsReason.unregistered.text)
        XCTAssertEqual(entries[0]["token"] as? String, token)
        XCTAssertEqual(entries[1]["status"] as? Int, 200)
        XCTAssertTrue(entries[1]["reason"] is NSNull)
        XCTAssertEqual(entries[1]["path"] as? String, "/3/device/abcd")
        XCTAssertEqual(entries[1]["push_type"] as? String, "voip")
        XCTAssertEqual(entries[1]["topic"] as? String, "com.example.app.voip")
        XCTAssertEqual(entries[1]["priority"] as? String, "5")
        XCTAssertEqual(entries[1]["expiration"] as? String, "1764412345")
        XCTAssertEqual(entries[1]["collapse_id"] as? String, "c1")
        XCTAssertEqual(entries[1]["method"] as? String, "POST")
        XCTAssertEqual(entries[1]["payload_bytes"] as? Int, recorded[1].bodyCount)
        XCTAssertEqual(entries[1]["apns_id"] as? String, recorded[1].apnsID)
        for key in ["time_ms", "conn", "stream"] { XCTAssertTrue(entries[1][key] is Int, "\(key) is a number") }
        XCTAssertEqual(recorded[1].header("apns-collapse-id"), "c1", "the in-memory record keeps the headers")
        XCTAssertEqual(String(decoding: recorded[1].body, as: UTF8.self), try String(contentsOfFile: voipBody, encoding: .utf8),
                       "and the body")
    }

    func testLogReachesTheFileWhileTheSimulatorRuns() throws {
        _ = try push()
        // The log is flushed at least once a second; turn the loop until the line shows up.
        var lines = 0
        server.loop.run(waitingFor: "the request's line in \(server.logFile)") {
            lines = textSoFar(server.logFile).split(separator: "\n").count
            return lines > 0
        }
        XCTAssertEqual(lines, 1, "a logged request reaches the file without waiting for close")
    }
}
