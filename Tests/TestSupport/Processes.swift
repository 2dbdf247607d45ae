import Foundation
import Glibc
import XCTest

/// The package's root directory (for scripts/, examples/ and README.md).
public let packageRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<3 { url.deleteLastPathComponent() }
    return url.path
}()

/// The `pushgw` executable of the build this test bundle belongs to: it sits beside the
/// bundle (`swift build --show-bin-path`), whatever the configuration or triple. A missing
/// binary is an error, never a reason to skip: `make test` builds it first.
public func builtPushgw() throws -> String {
    let bundle = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let path = URL(fileURLWithPath: bundle).deletingLastPathComponent().appendingPathComponent("pushgw").path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw TestSupportError("pushgw is not built at \(path) (beside the test bundle): run `swift build` first (make test does)")
    }
    return path
}

/// A child process started by a test (redis-server, nghttpd, pushgw, a producer).
///
/// It cannot outlive the test process: it is started through `setpriv --pdeathsig KILL`, so
/// the kernel kills it when the test process dies, even by SIGKILL, and it carries the test
/// process's mark (`TestScratch.childEnvironment`), by which the reaper finds and kills what
/// it started in turn. Its output goes to files, so a chatty child never blocks. Every wait on
/// it has a deadline that fails the test with what it was waiting for.
public final class ChildProcess: @unchecked Sendable {
    public let process = Process()
    /// What `executable` was: for messages.
    public let name: String
    /// Files holding the child's stdout and stderr (nil when discarded).
    public let stdoutFile: String?
    public let stderrFile: String?

    /// Starts `executable` (looked up in PATH when not absolute) with `arguments`. With
    /// `captureOutput`, stdout and stderr go to files read by `output` and `errorOutput`
    /// (with `mergeStderr`, both into `output`, interleaved as written); `stdin` is a file to
    /// read from (default /dev/null).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                captureOutput: Bool = true, mergeStderr: Bool = false, stdin: String? = nil,
                currentDirectory: String? = nil) throws {
        let path = executable.hasPrefix("/") ? executable : try which(executable)
        name = (path as NSString).lastPathComponent
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--pdeathsig", "KILL", "--", path] + arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
            .merging(TestScratch.childEnvironment) { $1 }
        if let currentDirectory { process.currentDirectoryURL = URL(fileURLWithPath: currentDirectory) }
        process.standardInput = stdin.flatMap { FileHandle(forReadingAtPath: $0) } ?? FileHandle.nullDevice
        if captureOutput {
            let base = TestScratch.file("\(name)-output")
            stdoutFile = base + ".out"
            stderrFile = mergeStderr ? nil : base + ".err"
            for file in [stdoutFile, stderrFile].compactMap({ $0 }) { _ = FileManager.default.createFile(atPath: file, contents: nil) }
            let out = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutFile!))
            process.standardOutput = out
            process.standardError = try stderrFile.map { try FileHandle(forWritingTo: URL(fileURLWithPath: $0)) } ?? out
        } else {
            stdoutFile = nil
            stderrFile = nil
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
        // The parent's handles are not needed once the child has its own.
        for handle in [process.standardOutput, process.standardError, process.standardInput] {
            if let handle = handle as? FileHandle, handle !== FileHandle.nullDevice { try? handle.close() }
        }
    }

    public var isRunning: Bool { process.isRunning }
    public var pid: Int32 { process.processIdentifier }
    /// The exit status (or the signal that ended it); nil while it runs.
    public var exitStatus: Int32? { process.isRunning ? nil : process.terminationStatus }

    /// What the child wrote to stdout so far ("" when not captured). An unreadable output
    /// file fails the test: an empty text must mean the child wrote nothing.
    public var output: String { stdoutFile.map { Self.read($0) } ?? "" }
    /// What the child wrote to stderr so far ("" when not captured; merged into `output` with
    /// `mergeStderr`).
    public var errorOutput: String { stderrFile.map { Self.read($0) } ?? "" }

    private static func read(_ file: String) -> String {
        do {
            return try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            XCTFail("cannot read the child's output \(file): \(error)")
            return ""
        }
    }

    /// Waits until the child exits by itself; past `timeoutMs` fails the test, kills it and
    /// returns nil.
    @discardableResult
    public func waitForExit(timeoutMs: Int64 = 60_000, file: StaticString = #filePath, line: UInt = #line) -> Int32? {
        waitForExit("\(name) (pid \(pid)) to exit", timeoutMs: timeoutMs, file: file, line: line)
    }

    /// Sends `signal` (SIGTERM by default) and waits for the exit; a child still running after
    /// `timeoutMs` fails the test and is killed. Returns the exit status (nil when it had to be
    /// killed).
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeoutMs: Int64 = 15_000,
                     file: StaticString = #filePath, line: UInt = #line) -> Int32? {
        if process.isRunning { kill(pid, signal) }
        return waitForExit("\(name) (pid \(pid)) to exit after signal \(signal)", timeoutMs: timeoutMs, file: file, line: line)
    }

    private func waitForExit(_ what: String, timeoutMs: Int64, file: StaticString, line: UInt) -> Int32? {
        if waitUntil(what, timeoutMs: timeoutMs, pollMs: 5, file: file, line: line, { !process.isRunning }) {
            return process.terminationStatus
        }
        kill(pid, SIGKILL)
        _ = waitUntil("\(name) (pid \(pid)) to die of SIGKILL", timeoutMs: 10_000, pollMs: 5, file: file, line: line,
                      { !process.isRunning })
        return nil
    }

    deinit {
        if process.isRunning { stop(signal: SIGKILL) }
        for file in [stdoutFile, stderrFile].compactMap({ $0 }) { try? FileManager.default.removeItem(atPath: file) }
    }
}

/// The files process `pid` has mapped (/proc/PID/maps), read whole by cat: Foundation's read of a
/// /proc file stops at its first page.
public func mappedFiles(pid: Int32) throws -> String {
    try runCommand("/bin/cat", ["/proc/\(pid)/maps"]).1
}

/// Runs a command to its end and returns (exit status, stdout, stderr). `stdin` is written to
/// the command's standard input (a file, not a terminal). A command still running after
/// `timeoutMs` is killed and the call throws, naming it.
@discardableResult
public func runCommand(_ executable: String, _ arguments: [String], stdin: String? = nil,
                       environment: [String: String]? = nil, currentDirectory: String? = nil,
                       timeoutMs: Int64 = 120_000) throws -> (Int32, String, String) {
    var inputFile: String?
    if let stdin {
        inputFile = TestScratch.file("stdin")
        try stdin.write(toFile: inputFile!, atomically: false, encoding: .utf8)
    }
    defer { if let inputFile { try? FileManager.default.removeItem(atPath: inputFile) } }
    let child = try ChildProcess(executable, arguments, environment: environment, stdin: inputFile,
                                 currentDirectory: currentDirectory)
    let finished = waitUntil("", timeoutMs: timeoutMs, pollMs: 5, failing: false) { !child.isRunning }
    guard finished else {
        child.stop(signal: SIGKILL)
        throw TestSupportError("\(executable) \(arguments.prefix(3).joined(separator: " ")) did not finish within \(timeoutMs) ms")
    }
    let status = child.stop()
    return (status ?? -1, child.output, child.errorOutput)
}

/// The text of a file another process is still writing: "" while it cannot be read yet (not
/// created, not flushed). For polling in a wait with a deadline; read a finished file with
/// `String(contentsOfFile:)`, which throws.
public func textSoFar(_ file: String) -> String {
    (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
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

/// True when something accepts TCP connections on 127.0.0.1:`port` right now.
public func isListening(_ port: Int) -> Bool {
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    return accepts(AF_INET, &addr)
}

/// True when something accepts connections on the unix socket at `path` right now.
public func isListening(unixSocket path: String) -> Bool {
    var addr = sockaddr_un()
    addr.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &addr.sun_path) { raw in
        let bytes = Array(path.utf8.prefix(raw.count - 1))
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return accepts(AF_UNIX, &addr)
}

/// One connection attempt to `address`.
private func accepts<Address>(_ family: Int32, _ address: inout Address) -> Bool {
    let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    return withUnsafePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<Address>.size)) == 0 }
    }
}

/// Waits until something accepts connections on the unix socket at `path`; throws after `timeout` s.
public func waitForUnixSocket(_ path: String, timeout: Double = 10) throws {
    guard waitUntil("", timeoutMs: Int64(timeout * 1000), pollMs: 20, failing: false, { isListening(unixSocket: path) }) else {
        throw TestSupportError("nothing listening on \(path) after \(timeout) s")
    }
}

/// Waits until something accepts TCP connections on 127.0.0.1:`port`; throws after `timeout` s.
public func waitForPort(_ port: Int, timeout: Double = 10) throws {
    guard waitUntil("", timeoutMs: Int64(timeout * 1000), pollMs: 20, failing: false, { isListening(port) }) else {
        throw TestSupportError("nothing listening on 127.0.0.1:\(port) after \(timeout) s")
    }
}

/// A fresh temporary directory inside this test process's scratch directory (`TestScratch`),
/// removed by the caller when it is done, and with everything else at the process's end.
public func makeTemporaryDirectory(_ prefix: String = "pushgw-test") -> String {
    let path = TestScratch.file(prefix)
    do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    } catch {
        fatalError("cannot create \(path): \(error)")
    }
    return path
}
