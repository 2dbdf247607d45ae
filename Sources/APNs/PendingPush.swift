/// One push on its way: queued in the client, or on a stream of a connection. A reference
/// type because the queue, a connection's stream table and the timeout sweep share it.
///
/// Invariant: `answer` or `fail` runs the caller's completion exactly once; afterwards the
/// push is inert and every holder drops it.
final class PendingPush {
    /// What goes on the stream: an APNs push, or another provider's POST (`ProviderPost`).
    enum Request {
        case apns(PushNotification)
        case post(ProviderPost)
    }

    /// Who hears the answer, of the request's kind.
    enum Completion {
        case apns((Result<PushNotificationResponse, ApnsClientError>) -> Void)
        case post((Result<ProviderPostAnswer, ApnsClientError>) -> Void)
    }

    let request: Request
    private var completion: Completion?
    /// Monotonic ms by which the push must be written: its time budget (the client's request
    /// timeout from `send`, or sooner for a VoIP push of a call whose deadline comes first).
    /// A push not written by then fails as a timeout without ever leaving the process, so a
    /// retry of it cannot reach the phone twice.
    let writeByMs: Int64
    /// Its place in the client's queue (`PushQueue`): the lane, and the share (the caller's
    /// tenant) whose turns it waits for.
    let lane: PushLane
    let share: Int
    /// Monotonic ms after which the caller gets `.timeout`: `writeByMs` while queued; once
    /// written, the write time plus the request timeout (the answer's own time).
    var deadlineMs: Int64
    /// Resends after 403 ExpiredProviderToken; not attempts (docs/protocol.md). Bounded so a
    /// server that always says so cannot loop us.
    var providerTokenResends = 0
    /// Resends because no server processed it (REFUSED_STREAM, above a GOAWAY's last stream).
    var unprocessedResends = 0

    // The answer being assembled on a stream.
    var status = 0
    /// `retry-after` in seconds, when the answer had one.
    var retryAfterSeconds: Int64?
    var apnsID: String?
    var apnsUniqueID: String?
    var body: [UInt8] = []
    /// True once the HEADERS frame left: from then on APNs may have seen the push.
    var headersSent = false
    /// Bytes of the payload already handed to nghttp2.
    var payloadOffset = 0
    /// The stream carrying it, 0 while queued.
    var streamID: Int32 = 0
    /// Its index in the connection's `InFlightTable`, -1 when not in one.
    var slot = -1

    init(_ notification: PushNotification, writeByMs: Int64, lane: PushLane = .live, share: Int = 0,
         completion: @escaping (Result<PushNotificationResponse, ApnsClientError>) -> Void) {
        self.request = .apns(notification)
        self.writeByMs = writeByMs
        self.lane = lane
        self.share = max(0, share)
        self.deadlineMs = writeByMs
        self.completion = .apns(completion)
    }

    init(_ post: ProviderPost, writeByMs: Int64, lane: PushLane = .live, share: Int = 0,
         completion: @escaping (Result<ProviderPostAnswer, ApnsClientError>) -> Void) {
        self.request = .post(post)
        self.writeByMs = writeByMs
        self.lane = lane
        self.share = max(0, share)
        self.deadlineMs = writeByMs
        self.completion = .post(completion)
    }

    /// The request body.
    var payload: [UInt8] {
        switch request {
        case let .apns(notification): return notification.payload
        case let .post(post): return post.body
        }
    }

    /// True for another provider's POST, whose answer body is kept on success too.
    var isPost: Bool {
        if case .post = request { return true }
        return false
    }

    /// How much of the answer's body is kept: APNs' error JSON (a 200 has none worth keeping:
    /// keeping it cost an array allocation per answer), a provider's whole answer up to 16 KiB.
    var keepsBody: Bool { isPost || status != 200 }
    var bodyLimit: Int { isPost ? 16 * 1024 : 4096 }

    /// True once the completion ran.
    var isCompleted: Bool { completion == nil }

    /// The client's count of streams per share, while this push holds a stream in it.
    private var streamsHeld: StreamsByShare?

    /// The push got a stream: counted in its share's until it is answered, lost or returned.
    func holdStream(in counts: StreamsByShare) {
        counts.held[share] += 1
        streamsHeld = counts
    }

    private func releaseStream() {
        guard let counts = streamsHeld else { return }
        counts.held[share] -= 1
        streamsHeld = nil
    }

    /// Runs the completion (once) with `error`, whatever the request's kind.
    func fail(_ error: ApnsClientError) {
        releaseStream()
        guard let completion else { return }
        self.completion = nil
        switch completion {
        case let .apns(reply): reply(.failure(error))
        case let .post(reply): reply(.failure(error))
        }
    }

    /// Runs the completion (once) with the answer the stream received, typed for its kind.
    func answer() {
        releaseStream()
        guard let completion else { return }
        self.completion = nil
        switch completion {
        case let .apns(reply): reply(.success(response()))
        case let .post(reply):
            reply(.success(ProviderPostAnswer(status: status, body: body, retryAfterSeconds: retryAfterSeconds)))
        }
    }

    /// Forgets a partial answer before the push is sent again (it is queued again, with what
    /// is left of its budget to be written in).
    func resetForResend() {
        releaseStream()
        deadlineMs = writeByMs
        status = 0
        retryAfterSeconds = nil
        apnsID = nil
        apnsUniqueID = nil
        body.removeAll(keepingCapacity: true)
        headersSent = false
        payloadOffset = 0
        streamID = 0
    }

    /// The typed answer from what the stream received. The body is APNs' JSON error
    /// (`{"reason": …, "timestamp": ms}`), empty on success.
    func response() -> PushNotificationResponse {
        var reason: ApnsReason?
        var timestamp: Int64?
        if status != 200 {
            let parsed = ErrorBody.parse(body)
            reason = parsed.reason.map { ApnsReason(text: $0, status: status) }
            if status == 410 { timestamp = parsed.timestampMs }
        }
        return PushNotificationResponse(status: status, reason: reason, apnsID: apnsID,
                                        apnsUniqueID: apnsUniqueID, invalidationTimestampMs: timestamp)
    }
}

/// APNs' JSON error body, parsed without Foundation on the hot path's error branch.
enum ErrorBody {
    /// Reads `reason` (string) and `timestamp` (integer ms) from a small JSON object.
    static func parse(_ body: [UInt8]) -> (reason: String?, timestampMs: Int64?) {
        (stringValue(of: "reason", in: body), intValue(of: "timestamp", in: body))
    }

    private static func valueStart(of key: String, in body: [UInt8]) -> Int? {
        let needle = Array("\"\(key)\"".utf8)
        guard body.count >= needle.count else { return nil }
        var i = 0
        while i + needle.count <= body.count {
            if body[i] == needle[0], Array(body[i..<(i + needle.count)]) == needle {
                var j = i + needle.count
                while j < body.count, body[j] == 0x20 || body[j] == 0x3A || body[j] == 0x09 { j += 1 }
                return j
            }
            i += 1
        }
        return nil
    }

    static func stringValue(of key: String, in body: [UInt8]) -> String? {
        guard let start = valueStart(of: key, in: body), start < body.count, body[start] == 0x22 else { return nil }
        var end = start + 1
        while end < body.count, body[end] != 0x22 { end += 1 }
        guard end < body.count else { return nil }
        return String(decoding: body[(start + 1)..<end], as: UTF8.self)
    }

    static func intValue(of key: String, in body: [UInt8]) -> Int64? {
        guard let start = valueStart(of: key, in: body) else { return nil }
        var end = start
        while end < body.count, body[end] >= 0x30, body[end] <= 0x39 { end += 1 }
        return end > start ? Int64(String(decoding: body[start..<end], as: UTF8.self)) : nil
    }
}

/// A client's streams in use per share (the caller's tenant): how `ApnsClient.dispatch` keeps
/// one share from holding every stream of a pool others use too. A class: the pushes holding
/// streams count themselves out when answered, lost or returned.
final class StreamsByShare {
    var held: [Int] = []
    /// Which shares ever sent through the client: `held` is indexed by share, so its length
    /// says the highest share, not how many there are (one app whose share is 3 is alone).
    private var sent: [Bool] = []
    /// How many distinct shares ever sent through the client; above 1 the per-share cap applies.
    private(set) var seen = 0

    /// Makes `share`'s count (shares are small numbers from 0) and counts it once as a sender.
    func note(_ share: Int) {
        while held.count <= share {
            held.append(0)
            sent.append(false)
        }
        if !sent[share] {
            sent[share] = true
            seen += 1
        }
    }
}
