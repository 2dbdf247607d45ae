import EventLoop
import GatewayRoles

/// Listening that does not give up: a server whose address is taken (a port in use) is bound
/// again every `everyMs` until it listens, with one error in the log at the first failure and
/// one line when it listens after all. Routing matters more than the endpoints: a process
/// whose admin endpoint or HTTP API cannot listen keeps routing. Loop-owned; `close()` ends
/// the retries.
package final class ListenRetry {
    private let loop: EventLoop
    private let everyMs: Int64
    private let log: Log
    /// What listens, for the log (`admin endpoint`, `HTTP API`), and how to fix a taken address.
    private let what: String
    private let fix: String
    private var timer: LoopTimer?
    private var failures = 0

    package init(loop: EventLoop, everyMs: Int64, log: Log, what: String, fix: String) {
        self.loop = loop
        self.everyMs = everyMs
        self.log = log
        self.what = what
        self.fix = fix
    }

    /// Binds `server` to `endpoint` now, and again later while that fails. True when it
    /// listens now: the caller says so in the log only then (a line saying where it listens
    /// right after one saying it cannot would be false).
    @discardableResult
    package func bind(_ server: AdminServer, to endpoint: Endpoint) -> Bool {
        do {
            try server.bind(endpoint)
            if failures > 0 { log.info("\(what) listening after all", ["listen": endpoint.description]) }
            failures = 0
            return true
        } catch {
            if failures == 0 {
                log.error("\(what) cannot listen; retrying", ["error": error.description, "retry_ms": everyMs, "fix": fix])
            }
            failures += 1
            if timer == nil {
                timer = LoopTimer(loop: loop) { [unowned self, weak server] in
                    guard let server else { return }
                    self.bind(server, to: endpoint)
                }
            }
            timer?.schedule(afterMs: everyMs)
            return false
        }
    }

    package func close() {
        timer?.close()
        timer = nil
    }
}
