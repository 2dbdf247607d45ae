import Glibc

/// The process's own figures for the `process_*` metrics, read from `/proc/self` as
/// Prometheus' client libraries read them (the names and units of their process collector):
/// CPU time, resident and virtual memory, open and allowed descriptors, start time.
///
/// A value type: `read()` does the I/O (a few small reads of `/proc`, once per rendered scrape),
/// `parse` is pure, so the arithmetic is tested on fixed text.
package struct ProcessFigures: Equatable, Sendable {
    /// User plus system CPU time, seconds.
    package var cpuSeconds: Double
    /// Resident set size, bytes.
    package var residentBytes: Double
    /// Virtual memory size, bytes.
    package var virtualBytes: Double
    /// When the process started, unix seconds.
    package var startTimeSeconds: Double
    /// Descriptors open, not counting the one `read()` lists them with; nil when unreadable.
    package var openFDs: Double?
    /// The soft `RLIMIT_NOFILE`; nil when unlimited.
    package var maxFDs: Double?

    /// Parses `/proc/self/stat` (`stat`) with the boot time of `/proc/stat` (`btime`), the
    /// clock's ticks per second and the page size. Nil when the text is not that file's.
    ///
    /// The command name (field 2) is in parentheses and may hold spaces and parentheses
    /// itself, so the fields are counted from the last `)`: field 3 (state) is the first after it.
    package static func parse(stat: String, bootTimeSeconds: Double, ticksPerSecond: Double, pageBytes: Double) -> ProcessFigures? {
        guard ticksPerSecond > 0, let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // field n is fields[n - 3]: utime 14, stime 15, starttime 22, vsize 23, rss 24.
        func field(_ n: Int) -> Double? {
            let i = n - 3
            guard fields.indices.contains(i) else { return nil }
            return Double(fields[i].trimmingSuffix("\n"))
        }
        guard let utime = field(14), let stime = field(15), let start = field(22), let vsize = field(23), let rss = field(24) else {
            return nil
        }
        return ProcessFigures(cpuSeconds: (utime + stime) / ticksPerSecond, residentBytes: rss * pageBytes, virtualBytes: vsize,
                              startTimeSeconds: bootTimeSeconds + start / ticksPerSecond, openFDs: nil, maxFDs: nil)
    }

    /// The `btime` line of `/proc/stat`: the boot time, unix seconds.
    package static func bootTime(procStat: String) -> Double? {
        for line in procStat.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingSuffix(" "))
        }
        return nil
    }

    /// This process's figures now; nil where `/proc` cannot be read (not Linux, no procfs).
    package static func read() -> ProcessFigures? {
        guard let stat = readSmallFile("/proc/self/stat"), let procStat = readSmallFile("/proc/stat"),
              let boot = bootTime(procStat: procStat),
              var figures = parse(stat: stat, bootTimeSeconds: boot, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))),
                                  pageBytes: Double(sysconf(Int32(_SC_PAGESIZE)))) else { return nil }
        figures.openFDs = openDescriptors().map(Double.init)
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            figures.maxFDs = Double(limit.rlim_cur)
        }
        return figures
    }

    /// Entries of `/proc/self/fd` but `.`, `..` and the directory's own descriptor.
    private static func openDescriptors() -> Int? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        var count = 0
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A file of `/proc` read whole (its size reads as 0, so by `read` until the end), at most 64 KiB.
    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += buffer[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

private extension Substring {
    func trimmingSuffix(_ suffix: Character) -> Substring {
        var s = self
        while s.last == suffix { s = s.dropLast() }
        return s
    }
}
