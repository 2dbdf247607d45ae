import Foundation
import Glibc
import TestSupport
import XCTest

/// The console's fleet page in headless Chromium (Tests/Browser/fleet_browser.py): three live
/// `pushgw run` gateways on one Redis route one app's calls between them; each gateway's own
/// overview counts what it routed, and the fleet page of any of them shows the sum and the
/// three gateways live, then two once one stopped, still counting the stopped one's calls; and
/// the live tail of results and feedback; Pause and Resume from the console, held and routed on
/// every live gateway.
final class FleetConsoleBrowserTests: XCTestCase {
    func testTheFleetPageShowsTheSumOfThreeGatewaysAndTheLiveOnes() throws {
        guard ProcessWorld.browserInstalled() else { return }
        let unregistered = String(repeating: "dead", count: 16)
        let world = try ProcessWorld(simulator: #""scenarios": { "\#(unregistered)": "unregistered" }"#)
        defer { world.stop() }
        let dir = world.directory
        try "admin-token-for-the-fleet-console-test-0123\n".write(toFile: dir + "/admin-token", atomically: true, encoding: .utf8)
        chmod(dir + "/admin-token", 0o600)
        var consoles: [String] = [], pids: [Int] = [], logs: [String] = []
        for n in 1...3 {
            let port = freeLoopbackPort()
            let config = try world.writeConfig("gateway-\(n).json", apps: ["acme": ProcessWorld.app()],
                                               admin: #""listen": "127.0.0.1:\#(port)", "token_file": "\#(dir)/admin-token""#)
            let log = dir + "/gateway-\(n).log"
            let gateway = try world.gateway(config: config, consumer: "fleet-\(n)", log: log)
            do { try waitForPort(port) } catch { throw TestSupportError("gateway \(n) does not listen: \(textSoFar(log).suffix(2_000))") }
            consoles.append("http://127.0.0.1:\(port)")
            pids.append(Int(gateway.pid))
            logs.append(log)
        }
        let settings: [String: Any] = [
            "consoles": consoles, "gateway_pids": pids, "admin_token": "admin-token-for-the-fleet-console-test-0123",
            "redis_port": world.redis.port, "unregistered_token": unregistered, "profile": dir + "/chromium-profile",
            "screenshots": ProcessInfo.processInfo.environment["PUSHGW_SCREENSHOTS"] ?? "",
        ]
        try JSONSerialization.data(withJSONObject: settings).write(to: URL(fileURLWithPath: dir + "/browser.json"))
        let (status, out, err) = try runCommand("/usr/bin/python3", [packageRoot + "/Tests/Browser/fleet_browser.py", dir + "/browser.json"],
                                                 timeoutMs: 180_000)
        print("fleet browser test: \(out)")
        XCTAssertEqual(status, 0, "the browser checks: \(err)\nlogs end:\n" + logs.map { String(textSoFar($0).suffix(1_500)) }.joined(separator: "\n"))
    }
}
