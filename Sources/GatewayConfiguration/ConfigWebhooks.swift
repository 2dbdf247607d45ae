import Foundation
import Routing

/// `apps.APP.webhooks` (config/README.md, docs/webhooks.md): where the app's results are
/// POSTed, signed with the secret in `secretFile`. Off unless the section is present.
package struct WebhookConfig: Equatable, Sendable {
    /// `http://` or `https://` URL of the receiver.
    package var url: String
    /// The signing secret's file (a secret: checked like the admin token, never logged).
    package var secretFile: String
    /// The outcomes sent; nil: every result.
    package var events: Set<CallOutcome>?
    /// Whether the receiver may be on loopback or in a private range (refused otherwise, after DNS).
    package var allowPrivateTargets = false
    /// One attempt's whole exchange.
    package var timeoutMs = WebhookConfig.defaultTimeoutMs
    /// How long a delivery is retried (network errors, 5xx, 429), from its result's time.
    package var retryForSeconds = WebhookConfig.defaultRetryForSeconds

    static let defaultTimeoutMs = 10_000
    static let defaultRetryForSeconds = 86_400

    package init(url: String, secretFile: String, events: Set<CallOutcome>? = nil, allowPrivateTargets: Bool = false,
                 timeoutMs: Int = WebhookConfig.defaultTimeoutMs, retryForSeconds: Int = WebhookConfig.defaultRetryForSeconds) {
        self.url = url
        self.secretFile = secretFile
        self.events = events
        self.allowPrivateTargets = allowPrivateTargets
        self.timeoutMs = timeoutMs
        self.retryForSeconds = retryForSeconds
    }

    /// Whether a result with `outcome` (its `outcome` field) is sent.
    package func sends(outcome: String) -> Bool {
        guard let events else { return true }
        return CallOutcome(rawValue: outcome).map(events.contains) ?? false
    }
}

extension ConfigParser {
    /// `webhooks`: `{ "url": …, "secret_file": …, "events": [outcome…], "allow_private_targets":
    /// false, "timeout_ms": 10000, "retry_for_seconds": 86400 }`. `.some(nil)` when absent; nil
    /// after recording a problem.
    func parseWebhooks(_ entry: [String: Any], in parent: JSONPath) -> WebhookConfig?? {
        guard reader.lookup(entry, "webhooks", in: parent) != nil else { return .some(nil) }
        let path = parent.appending("webhooks")
        guard let section = reader.section(entry, "webhooks", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["url", "secret_file", "events", "allow_private_targets", "timeout_ms",
                                                      "retry_for_seconds"])
        var url: String?
        if let (text, at) = reader.string(section, "url", in: path, required: true, example: "https://hooks.example.com/pushgw") {
            if let parsed = URL(string: text), let scheme = parsed.scheme?.lowercased(), scheme == "https" || scheme == "http",
               let host = parsed.host, !host.isEmpty, parsed.user == nil, parsed.password == nil,
               !text.utf8.contains(where: { $0 < 0x21 || $0 == 0x7F }) {
                url = text
                if scheme == "http", !["127.0.0.1", "localhost", "::1", "[::1]"].contains(host.lowercased()) {
                    reader.warning(at, "\(reader.quoted(text)) sends results and their signatures unencrypted",
                                   fix: "use an https:// URL")
                }
            } else {
                reader.error(at, "\(reader.quoted(text)) is not an http:// or https:// URL with a host (and no user or password)",
                             fix: "write the receiver's URL, such as \"https://hooks.example.com/pushgw\"")
            }
        }
        let secret = reader.filePath(section, "secret_file", in: path, role: .webhookSecret, required: true,
                                     example: "secrets/webhook-secret")
        var events: Set<CallOutcome>?? = .some(nil)
        if let found = reader.lookup(section, "events", in: path) {
            let names = found.value as? [Any]
            let outcomes = names?.compactMap { ($0 as? String).flatMap(CallOutcome.init(rawValue:)) }
            if let names, let outcomes, outcomes.count == names.count, !outcomes.isEmpty {
                events = .some(Set(outcomes))
            } else {
                reader.error(found.path, "expected a list of outcomes",
                             fix: "write some of " + CallOutcome.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
                                 + " in brackets, or remove the key to send every result")
                events = nil
            }
        }
        let allowPrivate = reader.boolean(section, "allow_private_targets", in: path, fallback: false)
        let timeout = reader.positiveInteger(section, "timeout_ms", in: path, fallback: WebhookConfig.defaultTimeoutMs, most: 60_000)
        let retryFor = reader.positiveInteger(section, "retry_for_seconds", in: path, fallback: WebhookConfig.defaultRetryForSeconds,
                                              most: 7 * 86_400)
        guard let url, let secret, let events, let allowPrivate, let timeout, let retryFor else { return nil }
        return .some(WebhookConfig(url: url, secretFile: secret, events: events, allowPrivateTargets: allowPrivate,
                                   timeoutMs: timeout, retryForSeconds: retryFor))
    }
}
