import Foundation

/// A throwaway PKI made by `scripts/make-pki.sh` (the demo uses the same script): a CA, the
/// simulator's server certificate for 127.0.0.1, an APNs-style client certificate (PEM and
/// PKCS#12) and an ES256 key. Made once per test process.
public struct TestPKI: Sendable {
    public let dir: String
    public var caFile: String { dir + "/ca.pem" }
    public var serverCert: String { dir + "/server.pem" }
    public var serverKey: String { dir + "/server.key" }
    public var clientCert: String { dir + "/client.pem" }
    public var clientKey: String { dir + "/client.key" }
    public var clientP12: String { dir + "/client.p12" }
    public var clientP12Password: String { "test-password" }
    public var authKeyP8: String { dir + "/AuthKey.p8" }
    public var authKeyPublic: String { dir + "/AuthKey.pub.pem" }
    /// The bundle id in the client certificate's subject UID.
    public let bundleID = "com.example.app"

    nonisolated(unsafe) private static var shared: TestPKI?

    /// The process's PKI, made on first use.
    public static func make() throws -> TestPKI {
        if let shared { return shared }
        let dir = makeTemporaryDirectory("pushgw-pki")
        let (status, _, err) = try runCommand("/bin/bash", [packageRoot + "/scripts/make-pki.sh", dir, "com.example.app"])
        guard status == 0 else { throw TestSupportError("make-pki.sh failed: \(err)") }
        let pki = TestPKI(dir: dir)
        shared = pki
        return pki
    }
}
