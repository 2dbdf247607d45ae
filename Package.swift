// swift-tools-version:6.0
// pushgw: a VoIP-first Apple push gateway. One module per box of DESIGN.md §4;
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
        .target(name: "APNs", dependencies: ["EventLoop", "CNGHTTP2", "COpenSSL", "CLibEvent", "CMacros"]),
        .target(name: "APNsSimulator", dependencies: ["APNs", "EventLoop", "CNGHTTP2", "COpenSSL", "CLibEvent", "CMacros"]),
        .target(name: "RedisStreams", dependencies: ["EventLoop", "CHiredis", "CLibEvent"]),
        .target(name: "Routing", dependencies: ["APNs", "Retry"]),
        .target(name: "Retry", dependencies: []),
        .target(name: "DeadLetters", dependencies: ["RedisStreams", "EventLoop", "COpenSSL"]),
        .target(name: "Gateway", dependencies: ["EventLoop", "APNs", "APNsSimulator", "RedisStreams", "Routing", "Retry", "DeadLetters"]),
        .executableTarget(name: "pushgw", dependencies: ["Gateway"]),
        // `make bench`: pushgw's side of the measurements (bench/run.sh runs the references).
        .executableTarget(name: "pushgw-bench", dependencies: ["APNs", "EventLoop", "Gateway", "RedisStreams", "Routing"],
                         path: "bench/PushgwBench"),

        // MARK: C libraries (Debian packages, see scripts/debian-packages.txt)
        .systemLibrary(name: "CLibEvent", pkgConfig: "libevent_openssl", providers: [.apt(["libevent-dev"])]),
        .systemLibrary(name: "CNGHTTP2", pkgConfig: "libnghttp2", providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CHiredis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),
        // Function-like macros of OpenSSL that Swift cannot import, wrapped as functions.
        .target(name: "CMacros", dependencies: ["COpenSSL"]),

        // MARK: Tests mirror the modules
        .target(name: "TestSupport", dependencies: ["EventLoop", "APNs", "APNsSimulator", "RedisStreams"], path: "Tests/TestSupport"),
        .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "TestSupport"]),
        .testTarget(name: "APNsTests", dependencies: ["APNs", "APNsSimulator", "EventLoop", "TestSupport"]),
        .testTarget(name: "APNsSimulatorTests", dependencies: ["APNsSimulator", "APNs", "EventLoop", "TestSupport"]),
        .testTarget(name: "GatewayTests", dependencies: ["Gateway", "TestSupport", "Retry", "RedisStreams", "Routing", "APNs", "APNsSimulator", "EventLoop", "DeadLetters"]),
        .testTarget(name: "RoutingTests", dependencies: ["Routing", "APNs", "Retry"]),
        .testTarget(name: "RedisStreamsTests", dependencies: ["RedisStreams", "EventLoop", "TestSupport"]),
        .testTarget(name: "DeadLettersTests", dependencies: ["DeadLetters", "RedisStreams", "EventLoop", "TestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
