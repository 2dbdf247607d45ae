// swift-tools-version:6.0
// pushgw: a VoIP-first Apple push gateway. One module per room of docs/architecture.md;
// C libraries come from Debian through the system-library targets at the bottom.
import PackageDescription

let package = Package(
    name: "pushgw",
    products: [
        .executable(name: "pushgw", targets: ["pushgw"]),
    ],
    targets: [
        // MARK: Service modules (see docs/architecture.md)
        .target(name: "EventLoop", dependencies: ["CLibEvent", "COpenSSL", "CMacros"]),
        .target(name: "APNs", dependencies: ["EventLoop", "JSONOutput", "CNGHTTP2", "COpenSSL", "CLibEvent", "CMacros"]),
        // FCM HTTP v1 (Android phones) on the APNs module's HTTP/2 pool: service accounts, OAuth, messages, answers.
        .target(name: "FCM", dependencies: ["APNs", "EventLoop", "JSONOutput", "COpenSSL"]),
        .target(name: "APNsSimulator", dependencies: ["APNs", "FCM", "EventLoop", "RedisClient", "JSONOutput", "CNGHTTP2", "COpenSSL", "CLibEvent", "CMacros"]),
        .target(name: "RedisClient", dependencies: ["EventLoop", "CHiredis", "CLibEvent"]),
        .target(name: "Digests", dependencies: ["COpenSSL"]),
        .target(name: "CallStorage", dependencies: ["RedisClient", "EventLoop", "COpenSSL", "Digests"]),
        .target(name: "Routing", dependencies: ["APNs", "FCM", "Retry", "EventLoop"]),
        .target(name: "Retry", dependencies: []),
        .target(name: "VisibleText", dependencies: []),
        // The version and git commit of this build, written before each build by the plugin below.
        .target(name: "BuildVersion", dependencies: [], plugins: ["BuildVersionPlugin"]),
        .plugin(name: "BuildVersionPlugin", capability: .buildTool(), path: "Plugins/BuildVersion"),
        // The one JSON writer off the hot path: logs, command-line and console output, the provider token.
        .target(name: "JSONOutput", dependencies: []),
        // The admin endpoint's request and response values, shared by its server, its routes and the console.
        .target(name: "HTTPMessages", dependencies: []),
        .target(name: "DeadLetters", dependencies: ["CallStorage", "RedisClient", "EventLoop", "JSONOutput", "Digests"]),
        // The operators' console: pages, sessions and escaping, behind plain request/response values.
        .target(name: "OperatorsConsole", dependencies: ["DeadLetters", "CallStorage", "RedisClient", "EventLoop", "VisibleText",
                                                         "HTTPMessages", "JSONOutput"]),
        // Outgoing HTTP (webhook receivers) on libcurl's multi interface, on the loop.
        .target(name: "OutboundHTTP", dependencies: ["EventLoop", "CCurl", "CCurlOptions", "CLibEvent"]),
        // A webhook delivery without I/O: its signature and what follows each attempt.
        .target(name: "Webhooks", dependencies: ["Digests"]),
        // The process around the modules above, one room per job in a one-way chain that the
        // compiler enforces: configuration <- roles <- admin endpoint <- command line.
        // The config file read and checked: values only, no loop and no logging.
        .target(name: "GatewayConfiguration", dependencies: ["APNs", "FCM", "CallStorage", "RedisClient", "Routing", "Retry", "DeadLetters",
                                                             "EventLoop", "VisibleText"]),
        // The process roles that run the pure machines' actions on the loop, and the log.
        .target(name: "GatewayRoles", dependencies: ["GatewayConfiguration", "EventLoop", "APNs", "FCM", "CallStorage", "RedisClient",
                                                     "Routing", "Retry", "DeadLetters", "VisibleText", "JSONOutput",
                                                     "OutboundHTTP", "Webhooks"]),
        // Observability and operators: metrics, the HTTP admin server, the console's wiring.
        .target(name: "AdminEndpoint", dependencies: ["BuildVersion", "GatewayRoles", "GatewayConfiguration", "EventLoop", "APNs", "CallStorage",
                                                      "RedisClient", "Routing", "DeadLetters", "OperatorsConsole", "HTTPMessages", "CLibEvent",
                                                      "COpenSSL", "JSONOutput"]),
        // The producers' HTTP API: its own listener on the admin endpoint's server code.
        .target(name: "IngestEndpoint", dependencies: ["AdminEndpoint", "HTTPMessages", "CallStorage", "Routing", "EventLoop",
                                                       "GatewayConfiguration", "GatewayRoles", "RedisClient", "COpenSSL", "Digests"]),
        // The command line: one file per verb, and the one place that wires a process together.
        .target(name: "PushgwCommands", dependencies: ["BuildVersion", "AdminEndpoint", "IngestEndpoint", "GatewayRoles", "GatewayConfiguration", "EventLoop",
                                                       "APNs", "FCM", "APNsSimulator", "CallStorage", "RedisClient", "DeadLetters",
                                                       "VisibleText", "JSONOutput", "CSystemdCalls"]),
        .executableTarget(name: "pushgw", dependencies: ["PushgwCommands"]),
        // `make bench`: pushgw's side of the measurements (bench/run.sh runs the references).
        .executableTarget(name: "pushgw-bench", dependencies: ["APNs", "FCM", "EventLoop", "CallStorage", "RedisClient", "Routing", "Retry", "OutboundHTTP",
                                                               "GatewayConfiguration", "GatewayRoles", "AdminEndpoint"],
                         path: "bench/PushgwBench"),

        // MARK: C libraries (Debian packages, see scripts/debian-packages.txt)
        .systemLibrary(name: "CLibEvent", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(name: "CSystemd", providers: [.apt(["libsystemd-dev"])]),
        // sd_notify and sd_watchdog_enabled, libsystemd opened (dlopen, not linked) only when
        // systemd started the process.
        .target(name: "CSystemdCalls", dependencies: ["CSystemd"]),
        .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // libcurl opened on first use (dlopen, not linked), its functions called through it; its
        // variadic setters, which Swift cannot call; the address check of its sockets.
        .target(name: "CCurlOptions", dependencies: ["CCurl"]),
        // Function-like macros of OpenSSL that Swift cannot import, wrapped as functions.
        .target(name: "CMacros", dependencies: ["COpenSSL"]),

        // MARK: Tests mirror the modules
        .target(name: "TestSupport", dependencies: ["EventLoop", "APNs", "APNsSimulator", "CallStorage", "RedisClient"],
                path: "Tests/TestSupport"),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "TestSupport"]),
        .testTarget(name: "APNsTests", dependencies: ["APNs", "APNsSimulator", "EventLoop", "TestSupport"]),
        .testTarget(name: "FCMTests", dependencies: ["FCM", "APNs", "APNsSimulator", "EventLoop", "TestSupport"]),
        .testTarget(name: "APNsSimulatorTests", dependencies: ["APNsSimulator", "APNs", "EventLoop", "TestSupport"]),
        // Harnesses the Gateway modules' tests share: a config directory with keys, Redis per
        // deployment, the router on real parts. Only package API: no @testable here.
        .target(name: "GatewayTestSupport", dependencies: ["GatewayConfiguration", "GatewayRoles", "TestSupport", "APNs", "APNsSimulator",
                                                           "EventLoop", "CallStorage", "RedisClient", "Retry", "Routing"],
                path: "Tests/GatewayTestSupport"),
        .testTarget(name: "GatewayConfigurationTests", dependencies: ["GatewayConfiguration", "GatewayTestSupport", "TestSupport",
                                                                      "APNs", "DeadLetters", "EventLoop", "RedisClient", "Retry", "Routing"]),
        .testTarget(name: "GatewayRolesTests", dependencies: ["GatewayRoles", "GatewayConfiguration", "GatewayTestSupport", "TestSupport", "FCM",
                                                              "IngestEndpoint",
                                                              "APNs", "APNsSimulator", "CallStorage", "DeadLetters", "EventLoop", "RedisClient",
                                                              "Retry", "Routing"]),
        .testTarget(name: "AdminEndpointTests", dependencies: ["AdminEndpoint", "BuildVersion", "HTTPMessages", "GatewayRoles", "GatewayConfiguration", "GatewayTestSupport",
                                                               "TestSupport", "APNs", "APNsSimulator", "CallStorage", "EventLoop",
                                                               "RedisClient", "Routing"]),
        .testTarget(name: "IngestEndpointTests", dependencies: ["IngestEndpoint", "AdminEndpoint", "HTTPMessages", "GatewayRoles",
                                                                "GatewayConfiguration", "GatewayTestSupport", "TestSupport", "APNs",
                                                                "APNsSimulator", "CallStorage", "EventLoop", "RedisClient", "Routing"]),
        .testTarget(name: "PushgwCommandsTests", dependencies: ["PushgwCommands", "GatewayRoles", "GatewayConfiguration",
                                                                "GatewayTestSupport", "TestSupport", "APNs", "APNsSimulator",
                                                                "CallStorage", "DeadLetters", "EventLoop", "RedisClient", "Retry",
                                                                "Routing", "VisibleText", "JSONOutput"]),
        // Tests that start the `pushgw` binary (beside the test bundle) and talk to it as
        // operators and producers do.
        .testTarget(name: "PushgwProcessTests", dependencies: ["GatewayTestSupport", "TestSupport"]),
        .testTarget(name: "RetryTests", dependencies: ["Retry"]),
        .testTarget(name: "DigestsTests", dependencies: ["Digests"]),
        .testTarget(name: "WebhooksTests", dependencies: ["Webhooks", "OutboundHTTP", "CCurlOptions", "EventLoop", "TestSupport"]),
        .testTarget(name: "JSONOutputTests", dependencies: ["JSONOutput"]),
        .testTarget(name: "RoutingTests", dependencies: ["Routing", "APNs", "FCM", "Retry"]),
        .testTarget(name: "RedisClientTests", dependencies: ["RedisClient", "CallStorage", "EventLoop", "TestSupport", "CHiredis"]),
        .testTarget(name: "CallStorageTests", dependencies: ["CallStorage", "RedisClient", "EventLoop", "TestSupport"]),
        .testTarget(name: "DeadLettersTests", dependencies: ["DeadLetters", "CallStorage", "RedisClient", "EventLoop", "JSONOutput",
                                                             "TestSupport"]),
        .testTarget(name: "OperatorsConsoleTests", dependencies: ["OperatorsConsole", "HTTPMessages", "DeadLetters", "CallStorage", "RedisClient", "EventLoop", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)

// Release builds leave out Swift's run-time exclusivity check (the compile-time one stays);
// debug builds, which `make test` and its ASan pass run, keep it, so the suite still traps an
// overlapping access. The process is one thread on one loop, where such an access is a logic
// error the suite exists to catch, not a race; in release the check's begin/end calls and the
// thread-local access set they keep cost ~10 % of the router's CPU per event (bench/ab.sh, and
// docs/architecture.md, Benchmarks).
for target in package.targets where target.type == .regular || target.type == .executable {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]
}
