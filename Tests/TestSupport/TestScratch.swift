import Foundation
import Glibc

/// Where a test process keeps its temporary files, and what makes sure nothing it started
/// outlives it.
///
/// Every temporary file and directory of the tests lives in `root`
/// (`$TMPDIR/pushgw-tests-<pid>`). Tests remove what they made; the root goes at the
/// process's normal exit. For an abnormal end (a crash, SIGKILL from `scripts/test.sh`'s time
/// limit or from a person), a reaper process watches the test process: it reads a pipe whose
/// only writer is the test process, so it sees end-of-file whenever and however the test
/// process ends. Then it kills every process that carries this test process's mark in its
/// environment (`childEnvironment`, which children pass on to what they start: the demo's
/// servers, a shell's `exec`) and removes `root`. Children started by `ChildProcess` also get
/// SIGKILL from the kernel when the test process dies.
public enum TestScratch {
    /// This process's scratch directory.
    public static var root: String { state.root }

    /// A fresh path in `root` named `prefix-<random>` (nothing is created).
    public static func file(_ prefix: String) -> String {
        root + "/" + prefix + "-" + UUID().uuidString.prefix(8)
    }

    /// The variable that marks a process as started (directly or not) by this test process.
    public static var childEnvironment: [String: String] { [markName: state.mark] }

    static let markName = "PUSHGW_TEST_OWNER"

    private final class State: @unchecked Sendable {
        let root: String
        let mark = String(getpid())
        private let reaper = Process()
        private let pipe = Pipe()

        init() {
            let temporary = NSTemporaryDirectory()
            State.removeOrphans(in: temporary)
            root = temporary + (temporary.hasSuffix("/") ? "" : "/") + "pushgw-tests-\(getpid())"
            do {
                try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o755])
            } catch {
                fatalError("cannot create the tests' scratch directory \(root): \(error)")
            }
            // In a session of its own: `scripts/test.sh` ends a run by killing its session.
            reaper.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
            reaper.arguments = ["/usr/bin/python3", "-c", State.reaperScript, root, TestScratch.markName + "=" + mark]
            reaper.standardInput = pipe
            reaper.standardOutput = FileHandle.nullDevice
            reaper.standardError = FileHandle.nullDevice
            do {
                try reaper.run()
            } catch {
                fatalError("cannot start the tests' reaper (python3): \(error)")
            }
            atexit { TestScratch.state.removeRoot() }
        }

        func removeRoot() {
            try? FileManager.default.removeItem(atPath: root)
        }

        /// Scratch directories of test processes that no longer exist (left when the reaper
        /// itself could not run, such as after a reboot).
        private static func removeOrphans(in temporary: String) {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
            for name in names where name.hasPrefix("pushgw-tests-") {
                guard let pid = Int32(name.dropFirst("pushgw-tests-".count)), kill(pid, 0) != 0, errno == ESRCH else { continue }
                try? FileManager.default.removeItem(atPath: temporary + "/" + name)
            }
        }

        /// Waits for end-of-file on stdin, then kills every process whose environment holds
        /// the mark (argv[2]), until none is left, and removes the scratch directory (argv[1]).
        static let reaperScript = """
            import os, shutil, signal, sys, time
            sys.stdin.buffer.read()
            mark = sys.argv[2].encode()
            for _ in range(20):
                found = []
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    try:
                        with open(f"/proc/{pid}/environ", "rb") as f:
                            if mark in f.read().split(b"\\0"): found.append(int(pid))
                    except OSError:
                        pass
                if not found: break
                for pid in found:
                    try: os.kill(pid, signal.SIGKILL)
                    except OSError: pass
                time.sleep(0.05)
            shutil.rmtree(sys.argv[1], ignore_errors=True)
            """
    }

    private static let state = State()
}
