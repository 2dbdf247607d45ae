import EventLoop
import FCM
import Foundation
import GatewayConfiguration
import GatewayRoles
import JSONOutput

/// A hand-made FCM message, checked and resolved against the config: what `pushgw push
/// --fcm-token` hands to the app's FCM client.
struct ManualFcmPlan: Sendable {
    let message: FcmMessage
    let appId: String
    let credentialName: String
    /// The config the client is made from (its `fcm` section and credentials).
    let config: GatewayConfig
}

/// `pushgw push --fcm-token`: one FCM message by hand, a high-priority data message as a ring
/// is, printing FCM's answer (README.md).
extension PushCommand {
    static let fcmHelp = """
        usage: pushgw push --app APP --fcm-token TOKEN [--config FILE] [--payload JSON] [--ttl SECONDS] [--json]

        Sends one FCM data message at android.priority HIGH with APP's fcm_credential and
        prints FCM's answer.

          --fcm-token TOKEN  the device's FCM registration token
          --payload JSON     the data, a JSON object of string values; default {"type":"pushgw_test"}
          --ttl SECONDS      android.ttl (0: now or never); default 30
          --json             print the answer as one JSON line:
                             {"status":200,"name":"…","code":null,"kind":null,"retry_after":null}

        Exit status: 0 accepted (200), 1 refused or no answer, 2 bad usage or config error.
        """

    /// Checks every argument, then loads the config and resolves the app's FCM credential; nil
    /// when help was asked for. No network I/O.
    static func makeFcmPlan(_ args: [String], context: CommandContext) throws(SetupError) -> (ManualFcmPlan, json: Bool)? {
        let parsed: Arguments.Parsed
        do {
            parsed = try Arguments.parse(args, verb: name, flags: ["--json"],
                                         options: ["--config", "--app", "--fcm-token", "--token", "--payload", "--ttl"])
        } catch {
            throw .usage(error)
        }
        guard case let .arguments(a) = parsed else { return nil }
        func usage(_ problem: String) -> SetupError { .usage(UsageError(problem, verb: name)) }
        guard let appId = a.values["--app"] else { throw usage("--app is required") }
        guard a.values["--token"] == nil else { throw usage("--token and --fcm-token: give one (an APNs or an FCM token)") }
        guard let token = a.values["--fcm-token"] else { throw usage("--fcm-token is required") }
        var data: [(String, OrderedJSON)] = [("type", .string("pushgw_test"))]
        if let text = a.values["--payload"] {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else {
                throw usage("--payload is not a JSON object")
            }
            data = []
            for key in object.keys.sorted() {
                guard let value = object[key] as? String else { throw usage("--payload: FCM data values are strings, and \"\(key)\" is not") }
                data.append((key, .string(value)))
            }
        }
        var ttl: Int64 = 30
        if let text = a.values["--ttl"] {
            guard let value = Int64(text), value >= 0, value <= 2_419_200 else {
                throw usage("--ttl must be seconds from 0 to 2419200 (28 days), not \"\(text)\"")
            }
            ttl = value
        }
        let (config, app) = try loadApp(appId, arguments: a, context: context)
        guard let credential = app.fcmCredential else {
            throw .config("pushgw push: apps.\(appId) has no fcm_credential; name a service account of credentials there (config/README.md)")
        }
        let body = OrderedJSON.object([("message", .object([
            ("token", .string(token)), ("data", .object(data)),
            ("android", .object([("priority", .string("HIGH")), ("ttl", .string("\(ttl)s"))])),
        ]))]).text
        guard let message = FcmMessage(token: token, body: Array(body.utf8)) else {
            throw usage("--fcm-token must be 1-\(FcmMessage.maxTokenBytes) bytes of visible ASCII, and the message at most \(FcmMessage.maxBodyBytes) bytes")
        }
        return (ManualFcmPlan(message: message, appId: appId, credentialName: credential, config: config), a.flags.contains("--json"))
    }

    /// Sends the planned message on a loop of its own (the token exchange first) and prints the answer.
    static func sendFcm(_ plan: ManualFcmPlan, json: Bool, output: CommandOutput) -> Int32 {
        let loop = EventLoop()
        defer { loop.close() }
        let pools = FcmPools(loop: loop, config: plan.config)
        let client: FcmClient
        do {
            client = try pools.client(credential: plan.credentialName)
        } catch {
            output.err("pushgw push: \(error.description)")
            return 2
        }
        var status: Int32?
        client.send(plan.message) { result in status = printFcmAnswer(result, json: json, output: output) }
        loop.run(until: { status != nil })
        pools.close()
        return status ?? 1
    }
}

/// Prints FCM's answer to a hand-made message and returns `pushgw push`'s exit status: 0
/// accepted, 1 refused or no answer. With `json`, one line
/// `{"status":200,"name":"…","code":null,"kind":null,"retry_after":null}`; no answer gives
/// `"status":null` and an `"error"` key.
func printFcmAnswer(_ result: Result<FcmResponse, FcmClientError>, json: Bool, output: CommandOutput) -> Int32 {
    switch result {
    case let .success(response):
        if json {
            output.out(OrderedJSON.object([("status", .int(response.status)), ("name", .string(response.messageName)),
                                            ("code", .string(response.code?.text)), ("kind", .string(response.kind?.rawValue)),
                                            ("retry_after", .int(response.retryAfterSeconds))]).text)
        } else if response.isAccepted {
            output.out("accepted: 200, \(response.messageName ?? "(no name)")")
        } else {
            var line = "refused: \(response.status) \(response.reasonText)"
            if let kind = response.kind { line += " (\(kind.rawValue))" }
            if let seconds = response.retryAfterSeconds { line += ", retry after \(seconds) s" }
            if let message = response.message { line += ": \(message)" }
            output.out(line)
        }
        return response.isAccepted ? 0 : 1
    case let .failure(error):
        if json {
            output.out(OrderedJSON.object([("status", .null), ("name", .null), ("code", .null), ("kind", .null), ("retry_after", .null),
                                            ("error", .string(error.description))]).text)
        } else {
            output.err("pushgw push: no answer from FCM: \(error.description)")
        }
        return 1
    }
}
