import APNs

/// One request as it arrived on a stream: what the rules read. Built by the connection,
/// judged by `RequestJudge`, then recorded.
struct IncomingRequest {
    var method: String?
    var path: String?
    /// Regular (non-pseudo) header fields in arrival order.
    var headers: [RecordedRequest.Header] = []
    /// Bytes of body received (the body itself may be kept only up to a cap).
    var bodyCount = 0

    /// The first value of header `name` (lower case), or nil.
    func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// A value a rule extracted from a request, or the reason APNs would refuse the request.
enum Checked<Value> {
    case passed(Value)
    case rejected(ApnsReason)
}

/// The simulator's verdict on one request, with what it learned on the way (for the log).
struct Verdict: Equatable {
    /// The device token from `:path` (lower case), when the path had one.
    var token: String?
    /// The push type sent or inferred, when known.
    var pushType: PushType?
    var outcome: Outcome
}

/// Apple's request rules that need no state (Apple's request docs), checked in the
/// order documented in docs/simulator.md. Each returns the reason APNs would give, or nil.
enum RequestRules {
    static let pathPrefix = "/3/device/"

    /// The lower-case device token of a POST to `/3/device/<hex>`, or the rejection.
    static func target(method: String?, path: String?) -> Checked<String> {
        guard method == "POST" else { return .rejected(.methodNotAllowed) }
        guard let path, path.hasPrefix(pathPrefix) else { return .rejected(.badPath) }
        let token = path.dropFirst(pathPrefix.count)
        if token.isEmpty { return .rejected(.missingDeviceToken) }
        if token.contains("/") || token.contains("?") { return .rejected(.badPath) }
        guard PushNotification.isHexToken(String(token)) else { return .rejected(.badDeviceToken) }
        return .passed(token.lowercased())
    }

    /// Headers APNs reads that arrived more than once make the request ambiguous.
    static func duplicateHeaders(_ request: IncomingRequest) -> ApnsReason? {
        var seen = Set<String>()
        for h in request.headers where h.name.hasPrefix("apns-") || h.name == "authorization" {
            if !seen.insert(h.name).inserted { return .duplicateHeaders }
        }
        return nil
    }

    /// The push type of `apns-push-type`; when absent, inferred from the topic's suffix the
    /// way APNs served older clients (a `.voip` topic is a VoIP push), else `alert`.
    static func pushType(header: String?, topic: String?) -> Checked<PushType> {
        if let header {
            guard let type = PushType(rawValue: header) else { return .rejected(.invalidPushType) }
            return .passed(type)
        }
        guard let topic else { return .passed(.alert) }
        let bySuffix = PushType.allCases.filter { !$0.topicSuffix.isEmpty && topic.hasSuffix($0.topicSuffix) }
        return .passed(bySuffix.max { $0.topicSuffix.count < $1.topicSuffix.count } ?? .alert)
    }

    /// Whether `topic` is right for `type`. With a certificate the topic must be that app's;
    /// with a token it must belong to one of `bundleIDs` (any app when empty).
    static func topic(_ topic: String, type: PushType, certificateBundle: String?, bundleIDs: [String]) -> ApnsReason? {
        if let certificateBundle {
            // Certificate connections support only a subset of push types (Apple, "Sending…").
            if type.requiresTokenAuth { return .topicDisallowed }
            return topic == type.topic(bundleID: certificateBundle) ? nil : .badTopic
        }
        if bundleIDs.isEmpty {
            return topic.hasSuffix(type.topicSuffix) && topic.count > type.topicSuffix.count ? nil : .badTopic
        }
        return bundleIDs.contains { type.topic(bundleID: $0) == topic } ? nil : .badTopic
    }

    /// The checks of `apns-priority`, `apns-id`, `apns-collapse-id`, `apns-expiration` and the
    /// payload size, in that order.
    static func fields(_ request: IncomingRequest, type: PushType) -> ApnsReason? {
        if let text = request.header("apns-priority") {
            guard let n = Int(text), let priority = Priority(rawValue: n), type.allows(priority) else { return .badPriority }
        }
        if let id = request.header("apns-id"), !PushNotification.isCanonicalUUID(id) { return .badMessageId }
        if let collapse = request.header("apns-collapse-id"), collapse.utf8.count > 64 { return .badCollapseId }
        if let expiration = request.header("apns-expiration") {
            guard !expiration.isEmpty, expiration.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), Int64(expiration) != nil else {
                return .badExpirationDate
            }
        }
        if request.bodyCount == 0 { return .payloadEmpty }
        if request.bodyCount > type.maxPayloadBytes { return .payloadTooLarge }
        return nil
    }
}

/// Runs a request through the rules, authentication and the scenarios: the simulator's
/// whole decision, free of sockets so that its order is easy to read and to test.
struct RequestJudge {
    var scenarios: ScenarioBook
    let bundleIDs: [String]
    let verifier: ProviderTokenVerifier

    /// The verdict on `request`. `certificateBundle` is the UID of the client's verified
    /// certificate (certificate auth), nil for token auth.
    mutating func judge(_ request: IncomingRequest, certificateBundle: String?, nowSeconds: Int64) -> Verdict {
        let token: String
        switch RequestRules.target(method: request.method, path: request.path) {
        case let .rejected(reason): return Verdict(token: nil, pushType: nil, outcome: .answer(reason))
        case let .passed(t): token = t
        }
        var verdict = Verdict(token: token, pushType: nil, outcome: .answer(nil))
        if let fault = scenarios.transportFault(for: token) {
            verdict.outcome = fault
            return verdict
        }
        func reject(_ reason: ApnsReason) -> Verdict {
            verdict.outcome = .answer(reason)
            return verdict
        }
        if let reason = RequestRules.duplicateHeaders(request) { return reject(reason) }
        if scenarios.takeExpiredProviderToken(for: token) { return reject(.expiredProviderToken) }
        if certificateBundle == nil,
           let reason = verifier.check(authorization: request.header("authorization"), nowSeconds: nowSeconds) {
            return reject(reason)
        }
        // A certificate for a single app implies its topic (Apple: the topic then defaults to
        // the certificate subject).
        guard let topic = request.header("apns-topic").flatMap({ $0.isEmpty ? nil : $0 }) ?? certificateBundle else { return reject(.missingTopic) }
        switch RequestRules.pushType(header: request.header("apns-push-type"), topic: topic) {
        case let .rejected(reason): return reject(reason)
        case let .passed(type): verdict.pushType = type
        }
        let type = verdict.pushType!
        if let reason = RequestRules.topic(topic, type: type, certificateBundle: certificateBundle, bundleIDs: bundleIDs) {
            return reject(reason)
        }
        if let reason = RequestRules.fields(request, type: type) { return reject(reason) }
        verdict.outcome = scenarios.outcome(for: token)
        return verdict
    }
}
