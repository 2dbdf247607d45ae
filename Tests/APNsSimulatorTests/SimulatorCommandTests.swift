import APNsSimulator
import EventLoop
import Foundation
import TestSupport
import XCTest

/// `pushgw simulator` end to end: the verb serves on its own loop (here on a second thread)
/// until SIGTERM, then returns 0.
final class SimulatorCommandTests: XCTestCase {
    /// The verb's exit code, written by its thread and read by the test's.
    private final class ExitCode: @unchecked Sendable {
        private let lock = NSLock()
        private var value: Int32?
        func set(_ code: Int32) { lock.withLock { value = code } }
        var code: Int32? { lock.withLock { value } }
    }

    func testVerbServesItsConfigUntilSIGTERMAndExitsZero() throws {
        let pki = try TestPKI.shared()
        let loop = EventLoop()
        defer { loop.close() }
        // A free port for --port: bind port 0, read it, let it go.
        let probe = try TCPListener(loop: loop, host: "127.0.0.1", port: 0) { fd in _ = close(fd) }
        let port = probe.port
        probe.close()
        let dir = makeTemporaryDirectory("pushgw-sim-cli")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let configFile = dir + "/sim.json"
        try """
            { "cert_file": "\(pki.serverCert)", "key_file": "\(pki.serverKey)", "token_keys": { "KEY1234567": "\(pki.jwtPublicKey)" },
              "team_id": "TEAM123456", "bundle_ids": ["com.example.app"], "default_scenario": "unregistered" }
            """.write(toFile: configFile, atomically: true, encoding: .utf8)
        let body = dir + "/body.json"
        try #"{"caller":"Alice"}"#.write(toFile: body, atomically: true, encoding: .utf8)
        let jwt = try pki.providerToken(keyID: "KEY1234567", teamID: "TEAM123456", issuedAt: Clock.unixMs() / 1000)

        let exit = ExitCode()
        let verb = Thread { exit.set(runSimulatorCommand(arguments: ["--config", configFile, "--port", String(port)])) }
        verb.start()

        // The verb may still be starting.
        try waitForPort(port)
        let result = try SimTools.nghttp(port: port, path: "/3/device/abcd",
                                         headers: ["apns-push-type: voip", "apns-topic: com.example.app.voip",
                                                   "authorization: bearer \(jwt)"],
                                         bodyFile: body, on: loop)
        XCTAssertEqual(result.statuses, [410], "the verb answers with its config's default scenario\n" + result.run.output)

        // An answer means the verb's loop runs, so its SIGTERM watch is in place.
        kill(getpid(), SIGTERM)
        loop.run(waitingFor: "the verb to return after SIGTERM") { exit.code != nil }
        XCTAssertEqual(exit.code, 0, "SIGTERM stops the verb with exit code 0")
    }
}
