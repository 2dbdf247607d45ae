import APNs
import COpenSSL
import FCM
import Foundation

/// An answer the simulator writes as it is: FCM's (and its token endpoint's) JSON answers,
/// which are not APNs reasons.
struct SimulatedReply: Equatable {
    var status: Int
    var body: [UInt8]
    /// `retry-after` in seconds.
    var retryAfterSeconds: Int?
    /// FCM's code of a refused message (for the record and the log).
    var fcmCode: String?
}

/// FCM's two endpoints on the simulator (docs/simulator.md, "FCM"): the OAuth 2.0 token
/// endpoint (`fcmTokenPath`, the JWT-bearer grant, the JWT checked against the service
/// account's public key, the scope and the times) and `POST /v1/projects/P/messages:send`
/// (the bearer one of the tokens it issued and not expired; the message checked as FCM checks
/// its form; then the token's scenario, the same spellings as for APNs). Loop-owned.
final class FcmEndpoints {
    /// EVP_PKEY* by client email; freed in `close()`.
    private var keys: [String: OpaquePointer] = [:]
    private let tokenPath: String
    private let accessTokenLifeSeconds: Int64
    private let retryAfterSeconds: Int
    private let projects: [String]
    /// Access tokens issued → unix seconds they expire at.
    private var issued: [String: Int64] = [:]
    private var uuids = UUIDGenerator()
    private(set) var tokensGranted = 0
    private(set) var tokensRefused = 0

    init(config: SimulatorConfig) throws(SimulatorError) {
        tokenPath = config.fcmTokenPath
        accessTokenLifeSeconds = Int64(config.fcmAccessTokenLifeSeconds)
        retryAfterSeconds = config.fcmRetryAfterSeconds
        projects = config.fcmProjects
        keys = try PublicKeyFile.loadAll(config.fcmServiceAccounts, where: { EVP_PKEY_get_base_id($0) == EVP_PKEY_RSA },
                                         failure: { SimulatorError.unusableServiceAccountKey(email: $0, file: $1) })
    }

    func close() {
        for key in keys.values { EVP_PKEY_free(key) }
        keys = [:]
    }

    /// True for a request to one of the two endpoints.
    func serves(path: String?) -> Bool {
        guard let path else { return false }
        return path == tokenPath || path.hasPrefix("/v1/projects/")
    }

    /// Every access token issued so far expires now: the next message with one is refused 401
    /// `UNAUTHENTICATED`, as Google refuses an expired token.
    func expireAccessTokens() {
        for token in issued.keys { issued[token] = 0 }
    }

    func judge(_ request: IncomingRequest, body: [UInt8], scenarios: inout ScenarioBook, nowSeconds: Int64) -> Verdict {
        if request.path == tokenPath { return Verdict(token: nil, pushType: nil, outcome: .reply(exchange(request, body, nowSeconds))) }
        return send(request, body, scenarios: &scenarios, nowSeconds: nowSeconds)
    }

    // MARK: The token endpoint

    private func exchange(_ request: IncomingRequest, _ body: [UInt8], _ now: Int64) -> SimulatedReply {
        func refuse(_ error: String, _ description: String) -> SimulatedReply {
            tokensRefused += 1
            return Self.json(400, ["error": error, "error_description": description])
        }
        guard request.method == "POST" else { return refuse("invalid_request", "Method not allowed.") }
        let form = Self.form(String(decoding: body, as: UTF8.self))
        guard form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
            return refuse("unsupported_grant_type", "Invalid grant_type: \(form["grant_type"] ?? "")")
        }
        guard let jwt = form["assertion"] else { return refuse("invalid_request", "Missing required parameter: assertion") }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]), let claimsBytes = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              case let .object(header)? = Self.value(headerBytes), case let .object(claims)? = Self.value(claimsBytes) else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.")
        }
        guard header["alg"] == .string("RS256"), case let .string(iss)? = claims["iss"], let key = keys[iss] else {
            return refuse("invalid_grant", "Invalid JWT Signature.")
        }
        let signed = Array(jwt.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        guard Self.verifyRS256(key: key, message: signed, signature: signature) else {
            return refuse("invalid_grant", "Invalid JWT Signature.")
        }
        guard case let .string(scope)? = claims["scope"], scope.split(separator: " ").contains(Substring(ServiceAccount.messagingScope)) else {
            return refuse("invalid_scope", "Invalid OAuth scope or ID token audience provided.")
        }
        guard case let .string(aud)? = claims["aud"], aud.hasSuffix(tokenPath) else {
            return refuse("invalid_grant", "Invalid JWT: Audience is not the token endpoint.")
        }
        guard case let .number(iat)? = claims["iat"], case let .number(exp)? = claims["exp"],
              iat <= Double(now + 60), exp > Double(now), exp - iat <= 3600 else {
            return refuse("invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        }
        if issued.count >= 100_000 { issued = issued.filter { $0.value > now } }
        let token = "ya29.sim-" + uuids.make()
        issued[token] = now + accessTokenLifeSeconds
        tokensGranted += 1
        return SimulatedReply(status: 200, body: Array(
            "{\"access_token\":\"\(token)\",\"expires_in\":\(accessTokenLifeSeconds),\"token_type\":\"Bearer\"}".utf8))
    }

    // MARK: messages:send

    private func send(_ request: IncomingRequest, _ body: [UInt8], scenarios: inout ScenarioBook, nowSeconds now: Int64) -> Verdict {
        var verdict = Verdict(token: nil, pushType: nil, outcome: .reply(Self.error(.notFound, status: 404, "Requested entity was not found.")))
        guard let path = request.path, path.hasSuffix("/messages:send"), request.method == "POST" else { return verdict }
        let project = path.dropFirst("/v1/projects/".count).dropLast("/messages:send".count)
        guard !project.isEmpty, !project.contains("/") else { return verdict }
        let message: [String: JSONValue]?
        if case let .object(root)? = Self.value(body), case let .object(m)? = root["message"] { message = m } else { message = nil }
        if case let .string(token)? = message?["token"], !token.isEmpty { verdict.token = token }
        func reply(_ r: SimulatedReply) -> Verdict {
            verdict.outcome = .reply(r)
            return verdict
        }
        // The scenario table keeps tokens in lower case (APNs' are hex); FCM's are matched so too.
        let scenarioKey = verdict.token?.lowercased()
        if let key = scenarioKey, let fault = scenarios.transportFault(for: key) {
            verdict.outcome = fault
            return verdict
        }
        let unauthenticated = Self.error(.unauthenticated, status: 401,
                                         "Request had invalid authentication credentials. Expected OAuth 2 access token.")
        if let key = scenarioKey, scenarios.takeExpiredProviderToken(for: key) { return reply(unauthenticated) }
        guard let authorization = request.header("authorization"), authorization.lowercased().hasPrefix("bearer "),
              let expires = issued[String(authorization.dropFirst(7))], expires > now else { return reply(unauthenticated) }
        if !projects.isEmpty, !projects.contains(String(project)) { return verdict }
        guard let message, let key = scenarioKey else {
            return reply(Self.error(.invalidArgument, status: 400, "Request contains an invalid argument.", fieldViolation: "message.token"))
        }
        if let problem = Self.formProblem(message) { return reply(Self.error(.invalidArgument, status: 400, problem)) }
        let name = Array("{\"name\":\"projects/\(project)/messages/\(uuids.make())\"}".utf8)
        let accepted = SimulatedReply(status: 200, body: name)
        switch scenarios.outcome(for: key) {
        case .answer(nil), .refuseStream, .dropConnection, .reply, .replyLater:
            return reply(accepted)
        case .answerLater(let ms):
            verdict.outcome = .replyLater(ms: ms, accepted)
            return verdict
        case .never:
            verdict.outcome = .never
            return verdict
        case let .answer(reason?):
            return reply(refusal(for: reason))
        }
    }

    /// FCM's answer for the APNs reason a scenario names, so one spelling means the same fault
    /// for both providers (docs/simulator.md).
    private func refusal(for reason: ApnsReason) -> SimulatedReply {
        switch reason {
        case .unregistered, .expiredToken: return Self.error(.unregistered, status: 404, "Requested entity was not found.")
        case .badDeviceToken: return Self.error(.invalidArgument, status: 400, "The registration token is not a valid FCM registration token",
                                                fieldViolation: "message.token")
        case .deviceTokenNotForTopic: return Self.error(.senderIDMismatch, status: 403, "SenderId mismatch")
        case .tooManyRequests:
            var r = Self.error(.quotaExceeded, status: 429, "Quota exceeded for quota metric 'Send requests'.")
            r.retryAfterSeconds = retryAfterSeconds
            return r
        case .serviceUnavailable:
            var r = Self.error(.unavailable, status: 503, "The service is currently unavailable.")
            r.retryAfterSeconds = retryAfterSeconds
            return r
        case .payloadTooLarge: return Self.error(.invalidArgument, status: 400, "Message is too big.")
        case .invalidProviderToken: return Self.error(.thirdPartyAuthError, status: 401, "Auth error from APNS or Web Push Service")
        default: return Self.error(.internalError, status: 500, "Internal error encountered.")
        }
    }

    /// What FCM refuses in a message's form: data values that are not strings, a priority other
    /// than HIGH or NORMAL, a TTL not written as seconds (`"27s"`, `"3.5s"`).
    private static func formProblem(_ message: [String: JSONValue]) -> String? {
        if let data = message["data"] {
            guard case let .object(fields) = data, fields.values.allSatisfy({ if case .string = $0 { return true }; return false }) else {
                return "Invalid value at 'message.data': every value must be a string."
            }
        }
        if let android = message["android"] {
            guard case let .object(a) = android else { return "Invalid value at 'message.android'." }
            if let p = a["priority"], p != .string("HIGH"), p != .string("NORMAL") {
                return "Invalid value at 'message.android.priority'."
            }
            if let ttl = a["ttl"] {
                guard case let .string(text) = ttl, text.hasSuffix("s"), Double(text.dropLast()).map({ $0 >= 0 }) == true else {
                    return "Invalid value at 'message.android.ttl': Illegal duration format."
                }
            }
        }
        return nil
    }

    // MARK: Writing and reading

    /// Google's error body with FCM's detail (`errorCode`) for a code of the FcmError set, only
    /// the API status for `UNAUTHENTICATED`, and a `BadRequest` detail for a field violation.
    private static func error(_ code: FcmErrorCode, status: Int, _ message: String, fieldViolation: String? = nil) -> SimulatedReply {
        let apiStatus: FcmErrorCode
        switch status {
        case 400: apiStatus = .invalidArgument
        case 401: apiStatus = .unauthenticated
        case 403: apiStatus = .permissionDenied
        case 404: apiStatus = .notFound
        case 429: apiStatus = .resourceExhausted
        case 503: apiStatus = .unavailable
        default: apiStatus = .internalError
        }
        var details: [[String: Any]] = []
        // The API's own statuses come without FCM's detail (a refused access token has none).
        if ![FcmErrorCode.unauthenticated, .permissionDenied, .notFound, .resourceExhausted].contains(code) {
            details.append(["@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode": code.text])
        }
        if let fieldViolation {
            details.append(["@type": "type.googleapis.com/google.rpc.BadRequest",
                            "fieldViolations": [["field": fieldViolation, "description": message]]])
        }
        var error: [String: Any] = ["code": status, "message": message, "status": apiStatus.text]
        if !details.isEmpty { error["details"] = details }
        var reply = json(status, ["error": error])
        reply.fcmCode = code.text
        return reply
    }

    private static func json(_ status: Int, _ object: [String: Any]) -> SimulatedReply {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
        return SimulatedReply(status: status, body: [UInt8](data))
    }

    private static func value(_ bytes: [UInt8]) -> JSONValue? {
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(bytes)) else { return nil }
        return JSONValue(serialized: parsed)
    }

    /// `application/x-www-form-urlencoded` fields, decoded.
    private static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(s) }
            fields[decode(kv[0])] = kv.count == 2 ? decode(kv[1]) : ""
        }
        return fields
    }

    private static func verifyRS256(key: OpaquePointer, message: [UInt8], signature: [UInt8]) -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return false }
        let ok = message.withUnsafeBufferPointer { m in
            signature.withUnsafeBufferPointer { s in EVP_DigestVerify(ctx, s.baseAddress, s.count, m.baseAddress, m.count) }
        }
        ERR_clear_error()
        return ok == 1
    }

}
