import APNs

/// The simulator's counters, as a snapshot. Tests assert on them; the demo prints them.
public struct SimulatorStats: Sendable, Equatable {
    /// Complete requests judged (answered, delayed or blackholed). Streams above a GOAWAY's
    /// last stream id are not counted: the simulator did not process them.
    public var requests = 0
    /// Answers submitted, by HTTP status (a delayed answer counts when it is decided).
    public var statusCounts: [Int: Int] = [:]
    /// Requests deliberately left unanswered (`blackhole`).
    public var unanswered = 0
    /// TCP connections accepted.
    public var connectionsAccepted = 0
    /// GOAWAY frames submitted by the `goawayEvery` rule.
    public var goawaysSent = 0
    /// Streams refused unprocessed (`refused_stream:N`); not counted in `requests`.
    public var refusedStreams = 0
    /// Connections ended at once by a request (`drop_connection`); the request is not
    /// counted in `requests`.
    public var droppedConnections = 0
    /// Connections whose stream limit was raised after their first 200.
    public var settingsRaised = 0
    /// The most streams a connection had open at once, by connection id (1, 2, … in accept order).
    public var maxConcurrentStreams: [Int: Int] = [:]

    /// The count for one status (0 when none).
    public func count(status: Int) -> Int { statusCounts[status, default: 0] }
}

/// One judged request with its headers and body, as kept by `ApnsSimulator.recorded`.
public struct RecordedRequest: Sendable, Equatable {
    /// A header field as received.
    public struct Header: Sendable, Equatable {
        public let name: String
        public let value: String
    }
    /// Unix milliseconds when the request was judged.
    public let timeMs: Int64
    public let connectionID: Int
    public let streamID: Int32
    public let method: String?
    public let path: String?
    /// The device token (lower case) when `:path` carried one; for an FCM message, its
    /// registration token as sent.
    public let token: String?
    /// Regular header fields in arrival order (pseudo-headers are `method` and `path`).
    public let headers: [Header]
    /// The body, up to `ApnsSimulator.maxRecordedBody` bytes.
    public let body: [UInt8]
    /// Bytes of body received.
    public let bodyCount: Int
    /// The status sent (or to be sent); nil for a blackholed request.
    public let status: Int?
    /// The reason sent; nil for 200 and blackholed requests.
    public let reason: ApnsReason?
    /// The `apns-id` of the answer (the request's or a generated one).
    public let apnsID: String
    /// FCM's code of a refused message (`UNREGISTERED`, …); nil for APNs and for 200.
    public var fcmCode: String? = nil

    /// The first value of header `name` (lower case), or nil.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// Keeps the last requests and the per-token counts, bounded so a benchmark cannot exhaust memory.
struct RequestRecorder {
    let limit: Int
    /// Ring buffer of the last `limit` requests; `next` is where the next one goes.
    private var ring: [RecordedRequest] = []
    private var next = 0
    private(set) var perToken: [String: Int] = [:]
    /// Tokens beyond this many are counted only in the totals.
    let tokenLimit = 100_000

    init(limit: Int) { self.limit = limit }

    mutating func record(_ request: RecordedRequest) {
        if let token = request.token, perToken[token] != nil || perToken.count < tokenLimit {
            perToken[token, default: 0] += 1
        }
        guard limit > 0 else { return }
        if ring.count < limit {
            ring.append(request)
        } else {
            ring[next] = request
        }
        next = (next + 1) % limit
    }

    /// Oldest first.
    var requests: [RecordedRequest] {
        ring.count < limit ? ring : Array(ring[next...] + ring[..<next])
    }
}
