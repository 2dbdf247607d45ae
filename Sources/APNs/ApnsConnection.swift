import CNGHTTP2
import EventLoop

/// What a connection tells its pool. Called on the loop, never from inside nghttp2 (events
/// raised during a callback are delivered once nghttp2 returns).
protocol ApnsConnectionDelegate: AnyObject {
    /// The first SETTINGS arrived, or the stream limit rose, or streams closed: room to send.
    func connectionHasCapacity(_ connection: ApnsConnection)
    /// The server answered these pushes (in the order their streams closed): each holds its
    /// status, headers and body (`PendingPush.answer()` types them for its kind).
    func connection(_ connection: ApnsConnection, answered batch: [PendingPush])
    /// No server processed these pushes (REFUSED_STREAM, above GOAWAY's last stream, never
    /// written): send them again elsewhere.
    func connection(_ connection: ApnsConnection, returned pushes: [PendingPush])
    /// These pushes were written but the connection died before their answer.
    func connection(_ connection: ApnsConnection, lost pushes: [PendingPush], reason: String)
    /// The server sent GOAWAY; the pool opens a replacement.
    func connectionGoingAway(_ connection: ApnsConnection, reason: String?)
    /// The connection is closed; `wasReady` tells a failed connect from a lost connection.
    func connectionClosed(_ connection: ApnsConnection, reason: String?, wasReady: Bool)
}

/// One HTTP/2-over-TLS connection to APNs: a `TLSStream` carrying an nghttp2 client session.
///
/// Loop-owned. Keeps its own table of in-flight streams because `nghttp2_session_del` does
/// not report the streams it drops; every push it takes ends in exactly one delegate call.
/// Its life is `StateMachine` (ApnsConnection+StateMachine.swift); the callbacks below feed it
/// events and `run(_:)` performs what it answers.
final class ApnsConnection: TLSStreamDelegate {
    let id: Int
    private unowned(unsafe) let delegate: ApnsConnectionDelegate
    private var machine = StateMachine()
    var state: StateMachine.State { machine.state }
    private var stream: TLSStream?
    private var session: OpaquePointer?
    private var streams = InFlightTable()
    private let headerBlock: RequestHeaderBlock
    /// Upper bound we put on concurrent streams, whatever the server allows.
    private let streamCap: Int

    /// Monotonic ms of the last byte received (for PING keep-alive and dead-peer detection).
    private(set) var lastReadMs: Int64
    /// Monotonic ms when our unanswered PING left, or nil.
    private(set) var pingSentMs: Int64?
    /// Monotonic ms when the connect started (for the connect timeout).
    let startedMs = Clock.monotonicMs()
    /// Highest MAX_CONCURRENT_STREAMS the server announced on this connection.
    private(set) var peakAnnouncedStreams = 0

    // Events raised inside nghttp2 callbacks, delivered after nghttp2 returns.
    private var nestingDepth = 0
    private var answered: [PendingPush] = []
    private var answeredSpare: [PendingPush] = []
    private var returned: [PendingPush] = []
    private var lost: [PendingPush] = []
    private var lostReason = ""
    private var capacityChanged = false
    private var goAwayReason: String??

    /// Who the connection talks to, in its failure reasons (`ApnsClientSettings.serverName`).
    private let serverName: String

    init(id: Int, delegate: ApnsConnectionDelegate, authority: String, streamCap: Int, serverName: String = "APNs") {
        self.id = id
        self.serverName = serverName
        self.delegate = delegate
        self.headerBlock = RequestHeaderBlock(authority: authority)
        self.streamCap = max(1, streamCap)
        self.lastReadMs = Clock.monotonicMs()
    }

    /// Starts the TCP + TLS connect.
    func start(loop: EventLoop, tls: TLSContext, host: String, port: Int) {
        do {
            stream = try TLSStream.connect(loop: loop, context: tls, host: host, port: port, delegate: self)
        } catch {
            run(machine.onFailure(reason: error.message))
        }
    }

    /// Pushes in flight on this connection.
    var inFlight: Int { streams.count }

    /// Streams that may be opened now.
    var freeStreams: Int {
        guard state.acceptsStreams, let session else { return 0 }
        let announced = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
        return min(announced, streamCap) - streams.count
    }

    /// Opens a stream for `push`. Returns false (and keeps nothing) when nghttp2 refuses.
    /// Call `flush()` after a batch of submits.
    /// - Throws: `RequestHeadersTooLarge` when the push's headers cannot be laid out; nothing
    ///   was sent and the push can never be (the caller fails it).
    func submit(_ push: PendingPush, bearerToken: String?) throws(RequestHeadersTooLarge) -> Bool {
        guard state.acceptsStreams, let session else { return false }
        var provider = nghttp2_data_provider()
        provider.read_callback = { session, streamID, buf, length, flags, _, user in
            ApnsConnection.with(user) { $0.readPayload(streamID: streamID, into: buf!, length: length, flags: flags!) }
        }
        let fields: (UnsafePointer<nghttp2_nv>, Int)
        switch push.request {
        case let .apns(notification): fields = try headerBlock.build(notification, bearerToken: bearerToken)
        case let .post(post): fields = try headerBlock.build(post)
        }
        let (nva, count) = fields
        // The table holds the strong reference; nghttp2 holds an unretained one as stream user
        // data, cleared whenever the push leaves the table before its stream closes.
        let streamID = nghttp2_submit_request(session, nil, nva, count, &provider,
                                              Unmanaged.passUnretained(push).toOpaque())
        guard streamID > 0 else { return false }
        push.streamID = streamID
        streams.insert(push)
        hasUnflushedRequests = true
        return true
    }

    /// The push on `streamID`, through nghttp2's stream user data.
    private func push(on streamID: Int32) -> PendingPush? {
        guard let session, let p = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Unmanaged<PendingPush>.fromOpaque(p).takeUnretainedValue()
    }

    /// Runs `body` on the push of `streamID` without retaining it: the in-flight table holds
    /// it for as long as nghttp2 has it as user data. (Callbacks run ~10 times per request;
    /// a retain and release each showed up in callgrind.)
    @inline(__always)
    private func withPush<R>(on streamID: Int32, _ body: (PendingPush) -> R) -> R? {
        guard let session, let p = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        return Unmanaged<PendingPush>.fromOpaque(p)._withUnsafeGuaranteedRef(body)
    }

    /// Runs `body` on the connection behind nghttp2's user data, without a retain: the client
    /// owns the connection, and nothing releases it during an nghttp2 call.
    @inline(__always)
    private static func with<R>(_ user: UnsafeMutableRawPointer?, _ body: (ApnsConnection) -> R) -> R {
        Unmanaged<ApnsConnection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
    }

    /// True after `submit` until the next `flush`: the client flushes only these connections.
    private(set) var hasUnflushedRequests = false

    /// Writes what nghttp2 has queued. Safe to call any time on the loop.
    func flush() {
        guard nestingDepth == 0, let session, let stream else { return }
        hasUnflushedRequests = false
        nestingDepth += 1
        let failure = HTTP2Wire.flush(session, to: stream)
        nestingDepth -= 1
        if let failure {
            fail(reason: "nghttp2: \(String(cString: nghttp2_strerror(failure)))")
            return
        }
        deliverEvents()
    }

    /// Calls `body` for each push in flight.
    func forEachInFlight(_ body: (PendingPush) -> Void) {
        for push in streams.pushes { body(push) }
    }

    /// Abandons `push` (its timeout fired): resets its stream. The caller completes it.
    func cancel(_ push: PendingPush) {
        guard push.streamID != 0, streams.remove(push) else { return }
        if let session {
            nghttp2_session_set_stream_user_data(session, push.streamID, nil)
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), push.streamID, UInt32(NGHTTP2_CANCEL.rawValue))
        }
        push.streamID = 0
    }

    /// Sends a PING; its ACK proves the peer is alive.
    func ping(nowMs: Int64) {
        guard let session, pingSentMs == nil else { return }
        nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
        pingSentMs = nowMs
        flush()
    }

    /// True until the first SETTINGS arrived: TCP, TLS or HTTP/2 set-up still under way.
    var isConnecting: Bool { state.isConnecting }

    /// Gives up a connect that is taking too long; the pool hears `connectionClosed`.
    func abandonConnect(reason: String) {
        run(machine.onConnectTimedOut(reason: reason))
    }

    /// Closes now. Pushes still in flight are reported lost (they may have been delivered),
    /// those never written are returned. `graceful` sends GOAWAY first.
    func close(reason: String, graceful: Bool) {
        // GOAWAY leaves before the machine closes: nghttp2 may close the streams it had not
        // sent yet inside this flush, and those are settled like any other stream.
        if graceful, let session {
            nghttp2_session_terminate_session(session, UInt32(NGHTTP2_NO_ERROR.rawValue))
            if let stream { _ = HTTP2Wire.flush(session, to: stream) }
        }
        run(machine.onCloseRequested(reason: reason))
    }

    // MARK: TLSStreamDelegate

    func tlsStreamDidConnect(_ stream: TLSStream) {
        // APNs speaks only HTTP/2, chosen in the TLS handshake (ALPN). A server that did not
        // pick h2 (a proxy or a host that is not APNs) would answer the connection preface
        // with HTTP/1.1 or nothing; the connect fails now, saying so.
        let alpn = stream.negotiatedALPN
        guard alpn == "h2" else {
            return fail(reason: "the server did not choose HTTP/2 in the TLS handshake (ALPN: \(alpn ?? "none")): not an \(serverName) endpoint")
        }
        run(machine.onTransportConnected())
    }

    func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer) {
        guard let session else { return }
        lastReadMs = Clock.monotonicMs()
        nestingDepth += 1
        let failure = HTTP2Wire.receive(session, bytes)
        nestingDepth -= 1
        if let failure {
            fail(reason: "HTTP/2 protocol error: \(String(cString: nghttp2_strerror(failure)))")
            return
        }
        flush()
    }

    func tlsStreamDidDrainOutput(_ stream: TLSStream) { flush() }

    func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?) {
        fail(reason: reason ?? "closed by \(serverName)")
    }

    // MARK: Performing the machine's actions

    /// Does what the machine decided: the only place where its state becomes I/O or a report
    /// to the pool.
    private func run(_ action: StateMachine.Action) {
        switch action {
        case .none:
            break
        case .openSession:
            openSession()
        case .reportCapacity:
            capacityChanged = true
        case .reportGoingAway(let reason):
            goAwayReason = .some(reason)
        case .close(let closing):
            tearDown(closing)
        }
    }

    private func fail(reason: String) { run(machine.onFailure(reason: reason)) }

    /// Creates the nghttp2 client session on the connected transport and sends our SETTINGS.
    private func openSession() {
        var callbacks: OpaquePointer?
        nghttp2_session_callbacks_new(&callbacks)
        defer { nghttp2_session_callbacks_del(callbacks) }
        installCallbacks(callbacks)
        var option: OpaquePointer?
        nghttp2_option_new(&option)
        defer { nghttp2_option_del(option) }
        // Until the first SETTINGS, assume APNs' starting limit of one stream.
        nghttp2_option_set_peer_max_concurrent_streams(option, 1)
        var session: OpaquePointer?
        guard nghttp2_session_client_new2(&session, callbacks, Unmanaged.passUnretained(self).toOpaque(), option) == 0 else {
            fail(reason: "nghttp2_session_client_new failed")
            return
        }
        self.session = session
        var settings = [nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
                        nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: 1 << 20)]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &settings, settings.count)
        lastReadMs = Clock.monotonicMs()
        flush()
    }

    // MARK: nghttp2 callbacks

    private func installCallbacks(_ cbs: OpaquePointer?) {
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, _, user in
            ApnsConnection.with(user) {
                $0.header(streamID: frame!.pointee.hd.stream_id,
                          name: UnsafeRawBufferPointer(start: name, count: namelen),
                          value: UnsafeRawBufferPointer(start: value, count: valuelen))
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, streamID, data, len, user in
            ApnsConnection.with(user) { c in
                _ = c.withPush(on: streamID) { push in
                    // An APNs push keeps only a rejection's body (`PendingPush.response`): keeping
                    // the body of every 200 cost an array allocation per answer. A provider's
                    // POST keeps its answer (`PendingPush.keepsBody`).
                    let limit = push.bodyLimit
                    if push.keepsBody, push.body.count < limit {
                        push.body.append(contentsOf: UnsafeBufferPointer(start: data, count: min(len, limit - push.body.count)))
                    }
                }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, user in
            ApnsConnection.with(user) { $0.frameReceived(frame!) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs) { _, frame, user in
            let hd = frame!.pointee.hd
            if hd.type == UInt8(NGHTTP2_HEADERS.rawValue) {
                ApnsConnection.with(user) { c in _ = c.withPush(on: hd.stream_id) { $0.headersSent = true } }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, streamID, errorCode, user in
            ApnsConnection.with(user) { $0.streamClosed(streamID, errorCode: errorCode) }
            return 0
        }
    }

    private func header(streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        // Match the name before looking the push up: most headers of an answer (server, date,
        // content-length, …) are ignored, and the lookup cost a retain and release each.
        if name.count == 7, name[0] == 0x3A /* ":status" */ {
            var status = 0
            for b in value where b >= 0x30 && b <= 0x39 { status = status * 10 + Int(b - 0x30) }
            _ = withPush(on: streamID) { $0.status = status }
        } else if name.count == 7, name[0] == 0x61, name[5] == 0x69 /* "apns-id" */ {
            _ = withPush(on: streamID) { $0.apnsID = String(decoding: value, as: UTF8.self) }
        } else if name.count == 14, name[5] == 0x75 /* "apns-unique-id" */ {
            _ = withPush(on: streamID) { $0.apnsUniqueID = String(decoding: value, as: UTF8.self) }
        } else if name.count == 11, name.elementsEqual("retry-after".utf8) {
            // Seconds (FCM's 429 and 503); an HTTP-date is not used by the providers and is ignored.
            var seconds: Int64 = 0
            guard !value.isEmpty, value.count <= 9, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return }
            for b in value { seconds = seconds * 10 + Int64(b - 0x30) }
            _ = withPush(on: streamID) { $0.retryAfterSeconds = seconds }
        }
    }

    private func frameReceived(_ frame: UnsafePointer<nghttp2_frame>) {
        let hd = frame.pointee.hd
        switch hd.type {
        case UInt8(NGHTTP2_SETTINGS.rawValue) where hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
            if let session {
                let announced = Int(nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
                peakAnnouncedStreams = max(peakAnnouncedStreams, announced)
            }
            run(machine.onSettingsReceived())
        case UInt8(NGHTTP2_GOAWAY.rawValue):
            let goaway = frame.pointee.goaway
            let text = goaway.opaque_data_len > 0
                ? String(decoding: UnsafeBufferPointer(start: goaway.opaque_data, count: goaway.opaque_data_len), as: UTF8.self)
                : nil
            let reason = text.map { ErrorBody.stringValue(of: "reason", in: Array($0.utf8)) ?? $0 }
            run(machine.onGoAwayReceived(lastStreamID: goaway.last_stream_id, reason: reason))
        case UInt8(NGHTTP2_PING.rawValue) where hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) != 0:
            pingSentMs = nil
        default:
            break
        }
    }

    private func streamClosed(_ streamID: Int32, errorCode: UInt32) {
        guard let push = push(on: streamID), streams.remove(push) else { return }
        capacityChanged = true
        switch machine.onStreamClosed(streamID, hasStatus: push.status != 0, refused: errorCode == NGHTTP2_REFUSED_STREAM.rawValue,
                                      headersSent: push.headersSent) {
        case .answered: answered.append(push)
        case .returned: returned.append(push)
        case .lost:
            lost.append(push)
            lostReason = "stream reset by \(serverName) (HTTP/2 error \(errorCode))"
        }
    }

    private func readPayload(streamID: Int32, into buf: UnsafeMutablePointer<UInt8>, length: Int,
                             flags: UnsafeMutablePointer<UInt32>) -> Int {
        let n = withPush(on: streamID) { push in
            let payload = push.payload
            let n = payload.withUnsafeBytes { src in
                let n = min(length, src.count - push.payloadOffset)
                UnsafeMutableRawPointer(buf).copyMemory(from: src.baseAddress! + push.payloadOffset, byteCount: n)
                return n
            }
            push.payloadOffset += n
            if push.payloadOffset == payload.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return n
        }
        guard let n else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        return n
    }

    // MARK: Delivering events and closing

    /// Hands the events collected inside nghttp2 to the delegate, outside of nghttp2.
    private func deliverEvents() {
        if let reason = goAwayReason {
            goAwayReason = nil
            delegate.connectionGoingAway(self, reason: reason)
        }
        if !answered.isEmpty {
            // Swapped with a spare rather than copied: copying and emptying allocated a new
            // buffer on every delivery.
            swap(&answered, &answeredSpare)
            delegate.connection(self, answered: answeredSpare)
            answeredSpare.removeAll(keepingCapacity: true)
        }
        if !returned.isEmpty {
            let batch = returned
            returned.removeAll()
            delegate.connection(self, returned: batch)
        }
        if !lost.isEmpty {
            let batch = lost
            lost.removeAll()
            delegate.connection(self, lost: batch, reason: lostReason)
        }
        if capacityChanged {
            capacityChanged = false
            if state.acceptsStreams { delegate.connectionHasCapacity(self) }
        }
        run(machine.onEventsDelivered(inFlight: streams.count))
    }

    /// Tears down the session and the stream, settles every push still held, delivers what
    /// was collected and tells the pool when the machine says so.
    private func tearDown(_ closing: StateMachine.Closing) {
        stream?.close()
        stream = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        for push in streams.removeAll().sorted(by: { $0.streamID < $1.streamID }) {
            switch StateMachine.outcome(ofStream: push.streamID, hasStatus: push.status != 0, refused: false,
                                        headersSent: push.headersSent, lastProcessedStreamID: closing.lastProcessedStreamID) {
            case .answered:
                // Headers came but the body did not: the status alone still tells the outcome.
                answered.append(push)
            case .returned:
                returned.append(push)
            case .lost:
                lost.append(push)
                lostReason = closing.reason
            }
        }
        capacityChanged = false
        deliverEvents()
        if let report = closing.report {
            delegate.connectionClosed(self, reason: report.reason, wasReady: report.wasReady)
        }
    }
}
