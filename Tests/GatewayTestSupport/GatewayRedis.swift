import Foundation
import GatewayConfiguration
import RedisClient
import TestSupport
import XCTest

/// How a gateway under test reaches Redis: the deployments the router's end-to-end tests and
/// the dead-letter tools run on (docs/operations.md, "Deploying on Redis").
package enum RedisDeployment: String, CaseIterable, Sendable {
    /// One redis-server over plain TCP, as the default user.
    case tcp
    /// Over TLS (`rediss://`), trusting the test CA.
    case tls
    /// Over TLS to a server that requires a client certificate.
    case mutualTLS
    /// Plain TCP as an ACL user with only `GatewayRedis.leastPrivilege`.
    case leastPrivilege
    /// Through a sentinel that watches the primary (`redis.sentinel`).
    case sentinel
}

/// The Redis of one test in a deployment: the server (and its sentinel), pushgw's `redis`
/// section for it, and a full-rights connection for the test's producers and checks.
package final class GatewayRedis {
    /// The least ACL permissions pushgw needs, as measured, read from docs/operations.md
    /// (`DocumentedACL`): the commands it sends and those its Lua scripts run, on keys under its
    /// prefix, no channels.
    package static var leastPrivilege: [String] { get throws { try DocumentedACL.gateway() } }
    package static let aclUser = "pushgw"
    package static let aclPassword = "least-privilege-SECRET"

    package let deployment: RedisDeployment
    package let server: RedisServer
    package let sentinel: RedisSentinelServer?
    /// pushgw's `redis` section for this deployment.
    package let config: RedisConfig
    /// The default user on the same server (through the unix socket for TLS deployments, so
    /// the test's own commands do not depend on what is tested).
    package let admin: RedisConnection.Config

    package init(_ deployment: RedisDeployment) throws {
        self.deployment = deployment
        switch deployment {
        case .tcp, .leastPrivilege, .sentinel: server = try RedisServer.start(.tcp)
        case .tls: server = try RedisServer.start(.tls)
        case .mutualTLS: server = try RedisServer.start(.mutualTLS)
        }
        admin = RedisConnection.Config(url: try RedisURL(parsing: server.unixURL))
        switch deployment {
        case .tcp:
            sentinel = nil
            config = RedisConfig(url: server.url)
        case .tls, .mutualTLS:
            sentinel = nil
            config = RedisConfig(url: server.url, tls: server.tls)
        case .leastPrivilege:
            sentinel = nil
            _ = try server.cli(["ACL", "SETUSER", Self.aclUser, "reset", "on", ">" + Self.aclPassword] + (try Self.leastPrivilege))
            config = RedisConfig(url: "redis://\(Self.aclUser):\(Self.aclPassword)@127.0.0.1:\(server.port)/0")
        case .sentinel:
            let watcher = try RedisSentinelServer.start(watching: server)
            sentinel = watcher
            config = RedisConfig(url: "redis://\(watcher.master)/0",
                                 sentinel: RedisSentinelOptions(master: watcher.master, addresses: [watcher.address]))
        }
    }

    /// pushgw's `redis` section as JSON, for config files.
    package var json: [String: Any] {
        var section: [String: Any] = ["url": config.url]
        var tls: [String: Any] = [:]
        if let ca = config.tls.caFile { tls["ca_file"] = ca }
        if let cert = config.tls.certFile, let key = config.tls.keyFile { tls["cert_file"] = cert; tls["key_file"] = key }
        if !tls.isEmpty { section["tls"] = tls }
        if let s = config.sentinel {
            section["sentinel"] = ["master": s.master, "addresses": s.addresses.map(\.description)]
        }
        return section
    }

    /// Commands the least-privileged user was refused (`ACL LOG`); empty in other deployments.
    package func refusedCommands() throws -> [String] {
        guard deployment == .leastPrivilege else { return [] }
        let log = try server.cli(["ACL", "LOG"]).split(separator: "\n").map(String.init)
        // Flattened entries: "...", "object", "<command or key>", ...
        return zip(log, log.dropFirst()).filter { $0.0 == "object" }.map { "\($0.1)" }
    }

    package func stop() {
        sentinel?.stop()
        server.stop()
    }
}
