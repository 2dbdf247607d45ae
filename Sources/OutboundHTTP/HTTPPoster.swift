// OutboundHTTP: POST requests to other people's servers (webhook receivers), on libcurl's
// multi interface driven by the process's libevent loop: curl does HTTP, TLS (verification on)
// and DNS; this file only hands its sockets and its timer to the loop.
// Owns: outgoing HTTP and which addresses it may reach. Must not know about Redis, results or
// signatures.
import CCurl
import CCurlOptions
import CLibEvent
import EventLoop

/// What a POST came back with: a status, or why there was none.
public enum HTTPPostOutcome: Equatable, Sendable {
    /// The server answered with `status` after `latencyMs`.
    case answered(status: Int, latencyMs: Int64)
    /// Every address of the host was refused before connecting: loopback, private, link-local
    /// and the like (`HTTPPostRequest.allowPrivateTargets` off).
    case refusedAddress
    /// No answer: DNS, connect, TLS, timeout or a broken connection (curl's own words).
    case transportFailed(String)
}

/// One POST.
public struct HTTPPostRequest: Sendable {
    public var url: String
    /// Header lines, `Name: value` (no CR or LF: the caller built them from checked values).
    public var headers: [String]
    public var body: [UInt8]
    /// The whole exchange, connect included.
    public var timeoutMs: Int
    /// Whether addresses in loopback and private ranges may be reached (tests; receivers inside
    /// the operator's own network, on purpose).
    public var allowPrivateTargets: Bool

    public init(url: String, headers: [String], body: [UInt8], timeoutMs: Int, allowPrivateTargets: Bool) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
        self.allowPrivateTargets = allowPrivateTargets
    }
}

/// POSTs on the loop, many at once, each completed once on the loop.
///
/// Loop-owned. `close()` before the loop is freed; transfers still running then complete with
/// `.transportFailed("closed")`. libcurl is opened by the first `post` (or `HTTPPoster.load()`),
/// not at start: a poster that never posts costs no library.
public final class HTTPPoster {
    private let loop: EventLoop
    /// curl's multi handle, made by the first `post`.
    private var multi: UnsafeMutableRawPointer?
    private var timer: LoopTimer!
    /// Libevent's event per socket curl watches.
    private var sockets: [curl_socket_t: OpaquePointer] = [:]
    private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
    /// Transfers running now.
    public var running: Int { transfers.count }

    private final class Transfer {
        let easy: UnsafeMutableRawPointer
        var headers: UnsafeMutablePointer<curl_slist>?
        let refused = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
        let completion: (HTTPPostOutcome) -> Void
        init(easy: UnsafeMutableRawPointer, completion: @escaping (HTTPPostOutcome) -> Void) {
            self.easy = easy
            self.completion = completion
            refused.pointee = 0
        }
        deinit { refused.deallocate() }
    }

    /// Opens libcurl for this process, once (every later call says the same): nil when it is
    /// ready, else why it cannot be (the library missing or broken), for a log line at start.
    public static func load() -> String? {
        pushgw_curl_load() == 0 ? nil : String(cString: pushgw_curl_load_error())
    }

    public init(loop: EventLoop) {
        self.loop = loop
        timer = LoopTimer(loop: loop) { [unowned self] in self.act(socket: CURL_SOCKET_BAD, flags: 0) }
    }

    /// Makes the multi handle if this is the first post: nil when it is there, else why not
    /// (libcurl cannot be opened, or no memory).
    private func openMulti() -> String? {
        if multi != nil { return nil }
        if let problem = HTTPPoster.load() { return problem }
        guard let multi = pushgw_curl_multi_init() else { return "curl_multi_init failed: out of memory" }
        self.multi = multi
        let me = Unmanaged.passUnretained(self).toOpaque()
        pushgw_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, me)
        pushgw_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        pushgw_multi_setopt_socket_function(multi) { _, socket, what, userp, _ in
            Unmanaged<HTTPPoster>.fromOpaque(userp!).takeUnretainedValue().watch(socket: socket, what: what)
            return 0
        }
        pushgw_multi_setopt_timer_function(multi) { _, timeoutMs, userp in
            let poster = Unmanaged<HTTPPoster>.fromOpaque(userp!).takeUnretainedValue()
            if timeoutMs < 0 { poster.timer.cancel() } else { poster.timer.schedule(afterMs: Int64(timeoutMs)) }
            return 0
        }
        return nil
    }

    /// Starts `request`; `completion` runs on the loop once: later, or at once when curl cannot
    /// even take the request (out of memory, an option it refuses).
    public func post(_ request: HTTPPostRequest, completion: @escaping (HTTPPostOutcome) -> Void) {
        loop.assertInLoop()
        if let problem = openMulti() { return completion(.transportFailed(problem)) }
        guard let multi else { preconditionFailure("openMulti made the multi handle") }
        guard let easy = pushgw_curl_easy_init() else { return completion(.transportFailed("curl_easy_init failed: out of memory")) }
        let transfer = Transfer(easy: easy, completion: completion)
        var list: UnsafeMutablePointer<curl_slist>?
        // No `Expect: 100-continue` round trip before the body.
        for line in request.headers + ["Expect:"] { list = pushgw_curl_slist_append(list, line) }
        transfer.headers = list
        var failed: CURLcode = CURLE_OK
        func set(_ code: CURLcode) { if failed == CURLE_OK { failed = code } }
        set(pushgw_easy_setopt_pointer(easy, CURLOPT_URL, request.url))
        set(pushgw_easy_setopt_pointer(easy, CURLOPT_PROTOCOLS_STR, "http,https"))
        set(pushgw_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(pushgw_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, request.timeoutMs))
        set(pushgw_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        set(pushgw_easy_setopt_long(easy, CURLOPT_POSTFIELDSIZE, request.body.count))
        request.body.withUnsafeBytes { bytes in
            // COPYPOSTFIELDS copies: the request's bytes need not outlive this call. An empty
            // body still needs a non-null pointer.
            set(pushgw_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
        }
        set(pushgw_easy_setopt_pointer(easy, CURLOPT_HTTPHEADER, list))
        set(pushgw_easy_setopt_pointer(easy, CURLOPT_PRIVATE, easy))
        set(pushgw_easy_discard_body(easy))
        set(pushgw_easy_check_addresses(easy, request.allowPrivateTargets ? 1 : 0, transfer.refused))
        guard failed == CURLE_OK else {
            let text = String(cString: pushgw_curl_easy_strerror(failed))
            release(transfer)
            return completion(.transportFailed(text))
        }
        transfers[easy] = transfer
        pushgw_curl_multi_add_handle(multi, easy)
    }

    /// Stops every transfer (each completes with `.transportFailed("closed")`) and frees curl's side.
    public func close() {
        timer.close()
        guard let multi else { return }  // never posted: curl has nothing of ours
        let left = transfers.values
        transfers = [:]
        for transfer in left {
            pushgw_curl_multi_remove_handle(multi, transfer.easy)
            release(transfer)
            transfer.completion(.transportFailed("closed"))
        }
        for event in sockets.values { event_free(event) }
        sockets = [:]
        pushgw_curl_multi_cleanup(multi)
        self.multi = nil
    }

    private func release(_ transfer: Transfer) {
        pushgw_curl_easy_cleanup(transfer.easy)
        pushgw_curl_slist_free_all(transfer.headers)
    }

    /// curl's socket callback: watch `socket` for what curl asks, or stop watching it.
    private func watch(socket: curl_socket_t, what: Int32) {
        if let old = sockets.removeValue(forKey: socket) { event_free(old) }
        guard what != CURL_POLL_REMOVE else { return }
        var flags = Int16(EV_PERSIST)
        if what & CURL_POLL_IN != 0 { flags |= Int16(EV_READ) }
        if what & CURL_POLL_OUT != 0 { flags |= Int16(EV_WRITE) }
        let me = Unmanaged.passUnretained(self).toOpaque()
        guard let event = event_new(loop.base, socket, flags, { fd, events, arg in
            var flags: Int32 = 0
            if events & Int16(EV_READ) != 0 { flags |= CURL_CSELECT_IN }
            if events & Int16(EV_WRITE) != 0 { flags |= CURL_CSELECT_OUT }
            Unmanaged<HTTPPoster>.fromOpaque(arg!).takeUnretainedValue().act(socket: fd, flags: flags)
        }, me) else { return }
        sockets[socket] = event
        event_add(event, nil)
    }

    /// Lets curl work on `socket` (or its timeouts) and completes what finished.
    private func act(socket: curl_socket_t, flags: Int32) {
        guard let multi else { return }
        var stillRunning: Int32 = 0
        pushgw_curl_multi_socket_action(multi, socket, flags, &stillRunning)
        var left: Int32 = 0
        while let message = pushgw_curl_multi_info_read(multi, &left) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                  let transfer = transfers.removeValue(forKey: easy) else { continue }
            let code = message.pointee.data.result
            let outcome: HTTPPostOutcome
            if code == CURLE_OK {
                outcome = .answered(status: pushgw_easy_response_code(easy),
                                    latencyMs: Int64(pushgw_easy_total_time(easy) * 1000))
            } else if transfer.refused.pointee != 0 {
                outcome = .refusedAddress
            } else {
                outcome = .transportFailed(String(cString: pushgw_curl_easy_strerror(code)))
            }
            pushgw_curl_multi_remove_handle(multi, easy)
            release(transfer)
            transfer.completion(outcome)
        }
    }
}
