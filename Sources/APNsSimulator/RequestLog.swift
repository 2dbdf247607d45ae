import EventLoop
import Glibc
import JSONOutput

/// The JSONL log of every judged request (one object per line; fields in docs/simulator.md).
///
/// Lines collect in memory and reach the file when 64 KiB are pending, at most a second
/// after they were added, and on `close()`: a benchmark at 100k requests/s must not pay a
/// write(2) per request, while someone tailing the file still sees it move.
final class RequestLog {
    private let fd: Int32
    private var pending: [UInt8] = []
    private let flushThreshold = 64 * 1024
    private var timer: LoopTimer?

    /// Opens `path` for appending (creating it).
    init(loop: EventLoop, path: String) throws(SimulatorError) {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .logFile(path: path, reason: String(cString: strerror(errno))) }
        pending.reserveCapacity(flushThreshold * 2)
        timer = LoopTimer(loop: loop) { [unowned self] in self.flush() }
    }

    /// Appends one line built by `LogLine`.
    func append(_ line: LogLine) {
        if pending.isEmpty, let timer, !timer.isScheduled { timer.schedule(afterMs: 1000) }
        pending.append(contentsOf: line.bytes)
        pending.append(UInt8(ascii: "\n"))
        if pending.count >= flushThreshold { flush() }
    }

    /// Writes what is pending. A failing disk only loses log lines, never requests.
    func flush() {
        writeAll(pending, to: fd)
        pending.removeAll(keepingCapacity: true)
    }

    /// Flushes and closes the file.
    func close() {
        flush()
        timer?.close()
        timer = nil
        Glibc.close(fd)
    }
}

/// One JSON object written field by field (no Foundation on the hot path).
struct LogLine {
    private(set) var bytes: [UInt8] = [UInt8(ascii: "{")]

    init() { bytes.reserveCapacity(384) }

    mutating func field(_ name: String, _ value: String?) {
        key(name)
        guard let value else { bytes.append(contentsOf: "null".utf8); return }
        OrderedJSON.quote(value, into: &bytes)
    }

    mutating func field<I: BinaryInteger>(_ name: String, _ value: I?) {
        key(name)
        bytes.append(contentsOf: (value.map { String($0) } ?? "null").utf8)
    }

    /// Closes the object; call once, last.
    mutating func finish() { bytes.append(UInt8(ascii: "}")) }

    private mutating func key(_ name: String) {
        if bytes.count > 1 { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: name.utf8)
        bytes.append(contentsOf: "\":".utf8)
    }
}

/// Writes `bytes` to `fd` with write(2), again after an interrupted or short write; stops at
/// the first failure (the simulator's log and its command line have nobody to tell).
func writeAll(_ bytes: [UInt8], to fd: Int32) {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return }
        offset += n
    }
}
