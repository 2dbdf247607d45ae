import APNs
import CNGHTTP2
import COpenSSL
import EventLoop

/// One accepted client connection: a `TLSStream` carrying an nghttp2 server session.
///
/// It collects each stream's request, hands it to the simulator to judge, and submits the
/// answer. It also plays APNs' connection behaviour: a stream limit of `initialMaxStreams`
/// raised after the first 200, and the `goawayEvery` GOAWAY followed by a close once the
/// streams the GOAWAY kept have been answered. Loop-owned; nghttp2 calls back on the loop.
///
/// Closing lingers: once everything is written the connection stops reading HTTP/2 and waits
/// up to `lingerMs` for the client to close first. Closing a socket with unread input makes
/// the kernel send RST, and an RST makes the client's kernel drop answers it has received
/// but the client has not read yet: h2load lost the last answers before a GOAWAY that way.
final class SimulatorConnection: TLSStreamDelegate {
    /// What the connection knows of one open stream.
    private struct StreamState {
        var request = IncomingRequest()
        /// The body, kept up to `ApnsSimulator.maxRecordedBody` bytes.
        var body: [UInt8] = []
        /// Set once judged: the `apns-id` of the answer.
        var apnsID: String?
        /// True for a judged stream that will never be answered (`blackhole`).
        var blackholed = false
        /// An FCM answer held back by `slow:MS`.
        var heldReply: SimulatedReply?
        /// The response body and how much of it nghttp2 has taken.
        var response: [UInt8] = []
        var responseOffset = 0
    }

    let id: Int
    private unowned let server: ApnsSimulator
    private var stream: TLSStream?
    private var session: OpaquePointer?
    private var streams: [Int32: StreamState] = [:]
    /// The bundle id of a verified client certificate (certificate auth); nil for token auth.
    private var certificateBundle: String?
    /// Complete requests judged on this connection.
    private var judgedCount = 0
    /// The highest stream id judged so far.
    private var highestJudged: Int32 = 0
    /// The last stream id promised by our GOAWAY; nil until one is submitted.
    private var goawayLastStreamID: Int32?
    private var raisedLimit = false
    private var maxOpenStreams = 0
    /// True once everything is said and the connection only waits for the client to close.
    private var lingering = false
    /// Set by a `drop_connection` request inside nghttp2's callbacks; the connection ends
    /// once nghttp2 has returned.
    private var dropRequested = false
    /// How long a finished connection waits for the client's close before closing itself.
    static let lingerMs = 1000

    /// Creates the nghttp2 session and queues the server's first SETTINGS; `attach` adds the stream.
    init(id: Int, server: ApnsSimulator) {
        self.id = id
        self.server = server
        let callbacks = Self.makeCallbacks()
        defer { nghttp2_session_callbacks_del(callbacks) }
        var session: OpaquePointer?
        let rv = nghttp2_session_server_new(&session, callbacks, Unmanaged.passUnretained(self).toOpaque())
        precondition(rv == 0 && session != nil, "nghttp2_session_server_new failed: out of memory")
        self.session = session
        submitMaxStreams(server.config.initialMaxStreams)
    }

    /// Starts serving `stream` (its TLS handshake may still be running).
    func attach(_ stream: TLSStream) {
        self.stream = stream
    }

    /// Drops the connection at once (simulator shutdown). No callback follows.
    func close() {
        teardown()
    }

    // MARK: TLSStreamDelegate

    func tlsStreamDidConnect(_ stream: TLSStream) {
        certificateBundle = stream.peerCertificateSubject(nid: NID_userId)
        pump()
    }

    func tlsStream(_ stream: TLSStream, didRead bytes: UnsafeRawBufferPointer) {
        guard let session, !lingering else { return }
        if HTTP2Wire.receive(session, bytes) != nil {
            // A protocol error: nghttp2 has queued a GOAWAY; send it, then let the client go.
            _ = HTTP2Wire.flush(session, to: stream)
            startLinger()
            return
        }
        if dropRequested {
            teardown()
            return
        }
        pump()
    }

    func tlsStreamDidDrainOutput(_ stream: TLSStream) {
        pump()
    }

    func tlsStream(_ stream: TLSStream, didCloseWithReason reason: String?) {
        teardown()
    }

    // MARK: Answers

    /// The client did not close within `lingerMs`: close from this side.
    func endLinger() {
        teardown()
    }

    /// Sends the answer held back by `slow:MS`, unless the stream is gone meanwhile.
    func releaseDelayed(streamID: Int32) {
        guard session != nil, let state = streams[streamID], let apnsID = state.apnsID else { return }
        if let reply = state.heldReply {
            submitReply(streamID: streamID, reply)
        } else {
            submitAnswer(streamID: streamID, reason: nil, apnsID: apnsID)
        }
        pump()
    }

    /// Submits `:status`, `apns-id` (and in sandbox `apns-unique-id`), plus a JSON body for a rejection.
    private func submitAnswer(streamID: Int32, reason: ApnsReason?, apnsID: String) {
        guard let session else { return }
        var headers = HeaderList()
        headers.add(":status", String(reason?.status ?? 200))
        headers.add("apns-id", apnsID, neverIndex: true)
        if server.config.sandbox { headers.add("apns-unique-id", server.makeUUID(), neverIndex: true) }
        if let reason {
            var body = "{\"reason\":\"\(reason.text)\""
            // Apple sends the timestamp only with 410, in milliseconds (Apple's response docs).
            if reason.status == 410 { body += ",\"timestamp\":\(Clock.unixMs())" }
            body += "}"
            streams[streamID]?.response = Array(body.utf8)
            headers.add("content-type", "application/json")
            headers.add("content-length", String(body.utf8.count))
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: Self.readBody)
            _ = headers.withNV { nva, count in nghttp2_submit_response(session, streamID, nva, count, &provider) }
        } else {
            _ = headers.withNV { nva, count in nghttp2_submit_response(session, streamID, nva, count, nil) }
            raiseLimitAfterSuccess()
        }
    }

    /// APNs allows one stream until a push succeeds, then many (Apple's request docs); the
    /// simulator's FCM side behaves the same, which the shared pool handles alike.
    private func raiseLimitAfterSuccess() {
        guard !raisedLimit else { return }
        raisedLimit = true
        submitMaxStreams(server.config.raisedMaxStreams)
        server.noteSettingsRaised()
    }

    /// Submits an answer as written (FCM's JSON, with `retry-after` when it has one).
    private func submitReply(streamID: Int32, _ reply: SimulatedReply) {
        guard let session else { return }
        var headers = HeaderList()
        headers.add(":status", String(reply.status))
        headers.add("content-type", "application/json; charset=UTF-8")
        headers.add("content-length", String(reply.body.count))
        if let seconds = reply.retryAfterSeconds { headers.add("retry-after", String(seconds)) }
        streams[streamID]?.response = reply.body
        if reply.body.isEmpty {
            _ = headers.withNV { nva, count in nghttp2_submit_response(session, streamID, nva, count, nil) }
        } else {
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil), read_callback: Self.readBody)
            _ = headers.withNV { nva, count in nghttp2_submit_response(session, streamID, nva, count, &provider) }
        }
        if reply.status == 200 { raiseLimitAfterSuccess() }
    }

    private func submitMaxStreams(_ n: Int) {
        guard let session else { return }
        var entry = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                           value: UInt32(clamping: n))
        _ = nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entry, 1)
    }

    // MARK: Requests (called from nghttp2 callbacks)

    private func beginRequest(streamID: Int32) {
        streams[streamID] = StreamState()
        if streams.count > maxOpenStreams {
            maxOpenStreams = streams.count
            server.noteOpenStreams(maxOpenStreams, connectionID: id)
        }
    }

    private func header(streamID: Int32, name: String, value: String) {
        switch name {
        case ":method": streams[streamID]?.request.method = value
        case ":path": streams[streamID]?.request.path = value
        default:
            if !name.hasPrefix(":") { streams[streamID]?.request.headers.append(.init(name: name, value: value)) }
        }
    }

    private func bodyChunk(streamID: Int32, _ bytes: UnsafeBufferPointer<UInt8>) {
        guard streams[streamID] != nil else { return }
        streams[streamID]!.request.bodyCount += bytes.count
        let room = ApnsSimulator.maxRecordedBody - streams[streamID]!.body.count
        if room > 0 { streams[streamID]!.body.append(contentsOf: bytes.prefix(room)) }
    }

    /// The client finished sending a request: judge it and answer, hold or drop it.
    private func requestComplete(streamID: Int32) {
        // Above our GOAWAY's last stream id the client will resend elsewhere: not processed.
        if let last = goawayLastStreamID, streamID > last { return }
        guard let state = streams[streamID], let session else { return }
        let verdict = server.judge(state.request, body: state.body, certificateBundle: certificateBundle)
        switch verdict.outcome {
        case .refuseStream:
            // Not processed: neither judged nor recorded, and the client may resend it.
            _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_REFUSED_STREAM.rawValue)
            server.noteRefusedStream()
            return
        case .dropConnection:
            // nghttp2 is on the call stack: the session goes once it has returned (didRead).
            dropRequested = true
            server.noteDroppedConnection()
            return
        case .answer, .answerLater, .never, .reply, .replyLater:
            break
        }
        judgedCount += 1
        highestJudged = max(highestJudged, streamID)
        let apnsID = state.request.header("apns-id").flatMap { PushNotification.isCanonicalUUID($0) ? $0 : nil } ?? server.makeUUID()
        server.record(verdict, request: state.request, body: state.body, apnsID: apnsID, connectionID: id, streamID: streamID)
        streams[streamID]!.apnsID = apnsID
        switch verdict.outcome {
        case let .answer(reason): submitAnswer(streamID: streamID, reason: reason, apnsID: apnsID)
        case let .answerLater(ms): server.schedule(.answer(streamID: streamID), connectionID: id, afterMs: ms)
        case let .reply(reply): submitReply(streamID: streamID, reply)
        case let .replyLater(ms, reply):
            streams[streamID]!.heldReply = reply
            server.schedule(.answer(streamID: streamID), connectionID: id, afterMs: ms)
        case .never: streams[streamID]!.blackholed = true
        case .refuseStream, .dropConnection: break
        }
        if let every = server.config.goawayEvery, judgedCount >= every, goawayLastStreamID == nil {
            // Streams above `highestJudged` were not processed; nghttp2 closes them once the
            // GOAWAY is out, and the client must resend them on a new connection.
            goawayLastStreamID = highestJudged
            _ = nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), highestJudged,
                                      NGHTTP2_NO_ERROR.rawValue, nil, 0)
            server.noteGoaway()
        }
    }

    private func streamClosed(streamID: Int32) {
        streams[streamID] = nil
    }

    /// Copies the response body of `streamID` into nghttp2's buffer.
    private func readBody(streamID: Int32, into buffer: UnsafeMutablePointer<UInt8>, length: Int,
                          flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let state = streams[streamID] else { return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue) }
        let n = min(length, state.response.count - state.responseOffset)
        state.response.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + state.responseOffset, count: n) }
        streams[streamID]!.responseOffset += n
        if state.responseOffset + n == state.response.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return n
    }

    // MARK: Output and closing

    /// Writes what nghttp2 has queued; once the connection is done, starts lingering.
    private func pump() {
        guard let session, let stream, !lingering else { return }
        if HTTP2Wire.flush(session, to: stream) != nil {
            teardown()
            return
        }
        if isDone(session: session, stream: stream) { startLinger() }
    }

    /// Stops serving and waits for the client to close (or `lingerMs`, whichever is first).
    private func startLinger() {
        guard !lingering else { return }
        lingering = true
        server.schedule(.endLinger, connectionID: id, afterMs: Self.lingerMs)
    }

    /// True once nothing more will be said: nghttp2 is finished, or our GOAWAY is out, every
    /// stream it kept has its answer (blackholed ones never will), and the bytes are written.
    private func isDone(session: OpaquePointer, stream: TLSStream) -> Bool {
        if HTTP2Wire.isFinished(session) { return true }
        guard let last = goawayLastStreamID else { return false }
        let waiting = streams.contains { $0.key <= last && !$0.value.blackholed }
        return !waiting && nghttp2_session_want_write(session) == 0 && stream.pendingOutputBytes == 0
    }

    /// Frees the session and the stream; the simulator forgets the connection.
    private func teardown() {
        guard session != nil || stream != nil else { return }
        stream?.close()
        stream = nil
        if let session { nghttp2_session_del(session) }
        session = nil
        streams = [:]
        server.connectionDidClose(self)
    }

    // MARK: nghttp2 trampolines

    private static func connection(_ userData: UnsafeMutableRawPointer?) -> SimulatorConnection {
        Unmanaged<SimulatorConnection>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static func makeCallbacks() -> OpaquePointer {
        var callbacks: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&callbacks) == 0, "nghttp2_session_callbacks_new failed: out of memory")
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            let hd = frame!.pointee.hd
            if hd.type == UInt8(NGHTTP2_HEADERS.rawValue), frame!.pointee.headers.cat == NGHTTP2_HCAT_REQUEST {
                SimulatorConnection.connection(user).beginRequest(streamID: hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            SimulatorConnection.connection(user).header(streamID: frame!.pointee.hd.stream_id,
                                    name: String(decoding: UnsafeBufferPointer(start: name, count: nameLength), as: UTF8.self),
                                    value: String(decoding: UnsafeBufferPointer(start: value, count: valueLength), as: UTF8.self))
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            SimulatorConnection.connection(user).bodyChunk(streamID: streamID, UnsafeBufferPointer(start: data, count: length))
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            let hd = frame!.pointee.hd
            let endsStream = hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            if endsStream, hd.type == UInt8(NGHTTP2_HEADERS.rawValue) || hd.type == UInt8(NGHTTP2_DATA.rawValue) {
                SimulatorConnection.connection(user).requestComplete(streamID: hd.stream_id)
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            SimulatorConnection.connection(user).streamClosed(streamID: streamID)
            return 0
        }
        return callbacks!
    }

    private static let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        SimulatorConnection.connection(user).readBody(streamID: streamID, into: buffer!, length: length, flags: flags!)
    }
}
