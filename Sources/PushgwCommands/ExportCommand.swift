import DeadLetters
import EventLoop
import Foundation
import GatewayConfiguration
import Glibc
import RedisClient
import VisibleText

/// `pushgw export results|feedback|dead APP`: an app's stream as JSON lines, oldest first, for a
/// pipeline or an archive (docs/operations.md, "Export"). Read through
/// `DeadLetterOperations.export` in a `DeadSession`, a bounded page at a time, paced as the
/// dead-letter tools' reads.
enum ExportCommand: Command {
    static let name = "export"
    static let summary = "an app's results, feedback or dead letters as JSON lines"
    static let help = """
        usage: pushgw export results|feedback|dead APP [--since T] [--limit N] [--output FILE]
                             [--config FILE]

        Writes the entries of one stream of app APP as JSON lines, oldest first, up to the
        newest entry when the export started:
          results    PREFIX:{APP}:results, one entry per event (its "result")
          feedback   PREFIX:{APP}:feedback, one entry per token APNs or FCM declared invalid
          dead       PREFIX:{APP}:dead, the dead letters (an event over 64 KB as its start and
                     "event_bytes", as dead show reads it)
        Each line is {"id","time_ms","fields":{…}}: the stream entry's id, its time (unix ms)
        and its fields by name, as the stream holds them (text), but a result's "result" as
        the JSON object it is; a value that is not UTF-8 is followed by NAME_base64 with its
        exact bytes. Redis is read 100 entries at a time with rests in between, so a long
        stream does not hold it up.

          --since T       only entries added at or after T: \(TimeArgument.forms)
          --limit N       write at most N entries (default: all), from 1 to 100000000
          --output FILE   write to FILE (created or truncated, mode 0600: feedback and dead
                          letters hold device tokens) instead of stdout, and say on stderr
                          how many were written
          --config FILE   the config (default \(GatewayConfig.defaultFile))

        Exit status: 0 done (also when the stream is empty), 1 Redis unreachable or FILE
        not writable (the lines written so far stay), 2 bad usage or config error.

        Example: pushgw export results acme --since 1h | jq -c 'select(.fields.result.outcome != "delivered_voip")'
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        DeadCommand.running(context) { () throws(DeadFailure) -> Int32 in
            guard let a = try DeadArguments.parse(args, command: name, verb: "", options: ["--config", "--since", "--limit", "--output"],
                                                  maxPositionals: 2) else {
                context.output.out(help)
                return 0
            }
            let streams = ExportedStream.allCases.map(\.rawValue).joined(separator: "|")
            guard let first = a.positionals.first else { throw a.usage("name the stream and the app: export \(streams) APP") }
            guard let stream = ExportedStream(rawValue: first) else {
                throw a.usage("unknown stream \(DeadFormat.quoted(TerminalText.field(first))) (known: \(streams))")
            }
            guard a.positionals.count == 2 else { throw a.usage("name the app: export \(stream.rawValue) APP") }
            let app = a.positionals[1]
            let sinceMs = try a.instant("--since", nowMs: Clock.unixMs())
            let limit = a.value("--limit") == nil ? nil : try a.integer("--limit", in: 1...100_000_000, fallback: 1)
            if let path = a.value("--output"), path.isEmpty { throw a.usage("--output needs a file name") }
            let session = try DeadSession(command: name, verb: "", configFile: a.value("--config"), appFilter: [app], context: context)
            defer { session.close() }
            let sink = try ExportSink(a.value("--output"), context: context)
            defer { sink.close() }
            var result: Result<Int, RedisError>?
            session.operations.export(app: app, stream: stream, sinceMs: sinceMs, limit: limit, onPage: sink.write) { result = $0 }
            session.loop.run(until: { result != nil })
            switch result! {
            case let .failure(error):
                throw .failed("pushgw export: \(error); \(DeadFormat.count(sink.written, "line")) written before")
            case let .success(count):
                if let failure = sink.failure {
                    throw .failed("pushgw export: writing \(TerminalText.field(a.value("--output") ?? "stdout")) failed: \(failure); "
                                  + "\(DeadFormat.count(sink.written, "line")) written before")
                }
                if let path = a.value("--output") {
                    context.output.err("pushgw export: \(DeadFormat.count(count, "entry", "entries")) of \(stream.rawValue) of app "
                                       + "\(TerminalText.field(app)) written to \(TerminalText.field(path))")
                }
                return 0
            }
        }
    }
}

/// Where `pushgw export` writes its lines: the command's output, or a file of its own.
private final class ExportSink {
    private let output: CommandOutput
    private var fd: Int32 = -1
    /// Lines written so far.
    private(set) var written = 0
    /// Why writing the file stopped (an errno's text); nil while it goes on.
    private(set) var failure: String?

    init(_ path: String?, context: CommandContext) throws(DeadFailure) {
        output = context.output
        guard let path else { return }
        let resolved = path.hasPrefix("/") ? path : context.workingDirectory + "/" + path
        fd = open(resolved, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw .failed("pushgw export: cannot write \(TerminalText.field(path)): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes one page's lines; false once a write failed.
    func write(_ lines: [String]) -> Bool {
        guard fd >= 0 else {
            lines.forEach(output.out)
            written += lines.count
            return true
        }
        // As on stdout (`CommandOutput.out`): control and bidi characters as `\uXXXX`, the same JSON.
        let bytes = Array((lines.map(TerminalText.line).joined(separator: "\n") + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                failure = String(cString: strerror(errno))
                return false
            }
            offset += n
        }
        written += lines.count
        return true
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}
