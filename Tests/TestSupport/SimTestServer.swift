import APNsSimulator
import EventLoop
import Foundation

/// An `ApnsSimulator` on a fresh loop with the test PKI, listening on a free loopback port,
/// for any test target that needs an APNs to talk to.
///
/// Token auth accepts JWTs from `pki.jwtKey` with `keyID`/`teamID`; certificate auth accepts
/// `pki.clientCert` (bundle `com.example.app`); `bundleID` is the only app token auth may push to.
/// Its FCM token endpoint grants access tokens to the service account of `pki.fcmKey`.
public final class SimTestServer {
    public let loop: EventLoop
    public let pki: TestPKI
    public let simulator: ApnsSimulator
    public let keyID = "KEY1234567"
    public let teamID = "TEAM123456"
    public let bundleID = "com.example.app"
    /// The simulator's JSONL request log (in the tests' scratch directory).
    public let logFile: String

    /// Starts the simulator; `configure` may adjust the config first.
    public init(configure: (inout SimulatorConfig) -> Void = { _ in }) throws {
        pki = try TestPKI.shared()
        loop = EventLoop()
        logFile = TestScratch.file("requests") + ".jsonl"
        var config = SimulatorConfig(certFile: pki.serverCert, keyFile: pki.serverKey)
        config.clientCAFile = pki.caCert
        config.tokenKeys = [keyID: pki.jwtPublicKey]
        config.teamId = teamID
        config.bundleIDs = [bundleID]
        config.logFile = logFile
        config.fcmServiceAccounts = [pki.fcmClientEmail: pki.fcmPublicKey]
        configure(&config)
        simulator = try ApnsSimulator(loop: loop, config: config)
        try simulator.start()
    }

    /// The port the simulator listens on.
    public var port: Int { simulator.port }

    /// The `token_uri` of a service account whose tokens this simulator grants (`pki.fcmKey`).
    public var fcmTokenURI: String { "https://127.0.0.1:\(port)\(simulator.config.fcmTokenPath)" }

    /// A provider token for this server, issued now unless told otherwise.
    public func providerToken(issuedAt: Int64? = nil, keyID: String? = nil, teamID: String? = nil,
                              keyFile: String? = nil) throws -> String {
        try pki.providerToken(keyID: keyID ?? self.keyID, teamID: teamID ?? self.teamID,
                              issuedAt: issuedAt ?? Clock.unixMs() / 1000, keyFile: keyFile)
    }

    /// Closes the simulator and the loop.
    public func close() {
        simulator.close()
        try? FileManager.default.removeItem(atPath: logFile)
        // Let libevent run the callbacks the closes queued before freeing the base.
        loop.run(forMs: 0)
        loop.close()
    }

    /// One PKI per test process: generating it costs a second of `openssl` runs.
    public static func sharedPKI() throws -> TestPKI {
        try TestPKI.shared()
    }
}
