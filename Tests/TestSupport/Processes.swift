import Foundation
import Glibc

/// The package's root directory (for scripts/ and the built binary).
public let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// A child process started by a test (redis-server, nghttpd, the simulator), killed at the end.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    public let stdoutPipe = Pipe()
    public let stderrPipe = Pipe()

    /// Starts `executable` (looked up in PATH when not absolute) with `arguments`.
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                captureOutput: Bool = true) throws {
        process.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : try which(executable))
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        if captureOutput {
            process.standardOutput = stdoutPipe
            process.standardError = stderrPipe
        } else {
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
    }

    public var isRunning: Bool { process.isRunning }
    public var pid: Int32 { process.processIdentifier }

    /// Sends `signal` (SIGTERM by default) and waits for the exit.
    public func stop(signal: Int32 = SIGTERM) {
        if process.isRunning {
            kill(process.processIdentifier, signal)
            process.waitUntilExit()
        }
    }

    deinit { stop(signal: SIGKILL) }
}

/// Runs a command to its end and returns (exit status, stdout, stderr).
@discardableResult
public func runCommand(_ executable: String, _ arguments: [String], stdin: String? = nil) throws -> (Int32, String, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable.hasPrefix("/") ? executable : try which(executable))
    p.arguments = arguments
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    let input = Pipe()
    p.standardInput = input
    try p.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try? input.fileHandleForWriting.close()
    let o = out.fileHandleForReading.readDataToEndOfFile()
    let e = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, String(decoding: o, as: UTF8.self), String(decoding: e, as: UTF8.self))
}

/// The full path of `name` in PATH.
public func which(_ name: String) throws -> String {
    for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
        let path = "\(dir)/\(name)"
        if access(path, X_OK) == 0 { return path }
    }
    throw TestSupportError("\(name) not found in PATH (make test installs it)")
}

/// A failure of the test harness itself.
public struct TestSupportError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for a test's own servers).
public func freeLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    withUnsafeMutablePointer(to: &addr) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
            _ = bind(fd, sa, len)
            _ = getsockname(fd, sa, &len)
        }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port` (at most `timeout` s).
public func waitForPort(_ port: Int, timeout: Double = 10) throws {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    try waitForListener(AF_INET, &addr, timeout: timeout, what: "127.0.0.1:\(port)")
}

/// Waits until something accepts connections on the unix socket at `path` (at most `timeout` s).
public func waitForUnixSocket(_ path: String, timeout: Double = 10) throws {
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    try waitForListener(AF_UNIX, &addr, timeout: timeout, what: path)
}

/// Connects to `address` every 20 ms until it accepts, for at most `timeout` s.
private func waitForListener<Address>(_ family: Int32, _ address: inout Address, timeout: Double, what: String) throws {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        let ok = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<Address>.size)) == 0 }
        }
        close(fd)
        if ok { return }
        usleep(20_000)
    }
    throw TestSupportError("nothing listening on \(what) after \(timeout) s")
}

/// A fresh temporary directory, removed by the caller when it wants.
public func makeTemporaryDirectory(_ prefix: String = "pushgw-test") -> String {
    let path = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
