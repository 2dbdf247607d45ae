import EventLoop
import Foundation
import GatewayConfiguration
import GatewayRoles
import GatewayTestSupport
import IngestEndpoint
import TestSupport
import XCTest

/// The producers' HTTP API on real parts: a live router (`RouterHarness`: redis-server, the
/// APNs simulator), and `IngestEndpoint` on the same loop, writing through the router's store,
/// reached over loopback HTTP (or HTTPS with `tls`). Apps `acme` and `beta` have a key each.
final class IngestHarness {
    let router: RouterHarness
    let endpoint: IngestEndpoint
    let port: Int
    /// The API's config as started.
    let config: IngestConfig
    /// The API keys, by app (the config holds their hashes).
    let keys: [String: String]
    var loop: EventLoop { router.loop }

    init(redis: RedisDeployment = .tcp, startRouter: Bool = true, tls: Bool = false, clientCertificates: Bool = false,
         rate: (perSecond: Int, burst: Int) = (1_000, 1_000), file: StaticString = #filePath, line: UInt = #line) throws {
        router = try RouterHarness(redis: redis, startRouter: startRouter)
        keys = ["acme": APIKeys.newKey(), "beta": APIKeys.newKey()]
        var config = IngestConfig(listen: "127.0.0.1:\(freeLoopbackPort())")
        if tls {
            config.tlsCertFile = router.sim.pki.serverCert
            config.tlsKeyFile = router.sim.pki.serverKey
            if clientCertificates { config.tlsClientCAFile = router.sim.pki.caCert }
        }
        config.apps = keys.mapValues { IngestApp(keyHashes: [APIKeys.hash($0)], requestsPerSecond: rate.perSecond, burst: rate.burst) }
        self.config = config
        endpoint = IngestEndpoint(loop: router.loop, config: config, apps: router.apps, topology: router.store.topology,
                                  log: Log(minimum: .error))
        endpoint.start()
        port = try XCTUnwrap(endpoint.port, "the HTTP API listens", file: file, line: line)
    }

    func close() {
        endpoint.close()
        router.close()
    }

    /// One request over loopback HTTP; `key` goes into `Authorization: Bearer`.
    func request(_ method: String, _ path: String, key: String? = nil, body: String = "", headers: [String: String] = [:],
                 from: String? = nil, file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
        var all = headers
        if let key { all["Authorization"] = "Bearer " + key }
        if !body.isEmpty { all["Content-Type"] = "application/json" }
        return try LoopbackHTTP.request(method, path, port: port, headers: all, body: body, from: from, loop: loop, file: file, line: line)
    }

    /// An `incoming_call` event's JSON.
    static func call(_ id: String, voip: String? = "a0a0a0a0", alert: String? = nil, extra: [String: Any] = [:]) -> String {
        var event: [String: Any] = ["v": 1, "id": id, "type": "incoming_call",
                                    "voip": ["caller": "+15551234567", "callerName": "Alice"]]
        if let voip { event["voip_token"] = voip }
        if let alert { event["alert_token"] = alert }
        for (k, v) in extra { event[k] = v }
        let data = try! JSONSerialization.data(withJSONObject: event, options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    /// The JSON object of a reply's body.
    static func json(_ reply: HTTPReply, file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(reply.body.utf8)) as? [String: Any] else {
            XCTFail("not a JSON object: \(reply.status) \(reply.body)", file: file, line: line)
            return [:]
        }
        return object
    }

    /// Entries in `app`'s calls stream now.
    func callsLength(_ app: String = "acme") -> Int64 {
        router.command("XLEN", router.keys(app).calls)?.integer ?? -1
    }
}
