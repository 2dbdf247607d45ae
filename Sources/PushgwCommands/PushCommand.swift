import APNs
import EventLoop
import Foundation
import GatewayConfiguration

/// A hand-made push, checked and resolved against the config: the push itself and where and
/// with which credential to send it. What `pushgw push` hands to the APNs client.
struct ManualPushPlan: Equatable, Sendable {
    package let notification: PushNotification
    let appId: String
    package let credentialName: String
    package let credential: Credential
    /// The app's environment, or sandbox when `--sandbox` was given.
    package let environment: ApnsEnvironment
    package let endpoint: Endpoint
    /// From `apns.ca_file`; nil for the system trust store.
    package let caFile: String?
    package let requestTimeoutMs: Int
}

/// `pushgw push`: one push by hand, printing APNs' answer (README.md).
enum PushCommand: Command {
    static let name = "push"
    static let summary = "send one push by hand and print APNs' answer"
    static let help = """
        usage: pushgw push --app APP --token HEX [--config FILE] [--type TYPE] [--payload JSON]
                           [--sandbox] [--priority 10|5|1] [--expiration UNIXSECONDS]
                           [--collapse-id ID] [--apns-id UUID] [--json]
               pushgw push --app APP --fcm-token TOKEN [--config FILE] [--payload JSON] [--ttl S] [--json]
                           (an Android device, through FCM: pushgw push --fcm-token --help)

        Sends one push for APP of the config (default \(GatewayConfig.defaultFile)) with the
        app's credential, to the app's environment, and prints APNs' answer.

          --app APP          an app id declared under apps
          --token HEX        the device token (PushKit token for voip)
          --type TYPE        \(PushType.allCases.map(\.rawValue).joined(separator: "|")) (default voip)
          --payload JSON     the body, a JSON object sent as given; default {} for voip,
                             {"aps":{"alert":"pushgw test"}} for alert,
                             {"aps":{"content-available":1}} for background; required otherwise
          --sandbox          send to the sandbox whatever the app's environment
          --priority N       apns-priority: 10 now, 5 power-friendly, 1 never wakes
          --expiration S     apns-expiration in unix seconds (0: deliver now or never)
          --collapse-id ID   apns-collapse-id (at most 64 bytes)
          --apns-id UUID     apns-id; default: APNs generates one
          --json             print the answer as one JSON line:
                             {"status":200,"apns_id":"…","reason":null,"timestamp":null}

        Exit status: 0 accepted (200), 1 rejected or no answer, 2 bad usage or config error.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        if args.contains("--fcm-token") { return runFcm(args, context: context) }
        let plan: ManualPushPlan
        let json: Bool
        do {
            guard let made = try makePlan(args, context: context) else {
                context.output.out(help)
                return 0
            }
            (plan, json) = made
        } catch {
            context.output.err(error.line)
            return 2
        }
        return send(plan, json: json, output: context.output)
    }

    /// `pushgw push --fcm-token` (PushCommand+FCM.swift).
    static func runFcm(_ args: [String], context: CommandContext) -> Int32 {
        do {
            guard let (plan, json) = try makeFcmPlan(args, context: context) else {
                context.output.out(fcmHelp)
                return 0
            }
            return sendFcm(plan, json: json, output: context.output)
        } catch {
            context.output.err(error.line)
            return 2
        }
    }

    /// Sends the planned push on a loop of its own and prints the answer.
    static func send(_ plan: ManualPushPlan, json: Bool, output: CommandOutput) -> Int32 {
        let loop = EventLoop()
        defer { loop.close() }
        let client: ApnsClient
        do {
            var settings = ApnsClientSettings(host: plan.endpoint.host, port: plan.endpoint.port,
                                              caFile: plan.caFile,
                                              authentication: try plan.credential.authentication())
            settings.connections = 1
            settings.requestTimeoutMs = Int64(plan.requestTimeoutMs)
            client = try ApnsClient(loop: loop, settings: settings)
        } catch {
            output.err("pushgw push: credentials.\(plan.credentialName): \(error)")
            return 2
        }
        var status: Int32?
        client.send(plan.notification) { result in
            status = printPushAnswer(result, json: json, output: output)
        }
        loop.run(until: { status != nil })
        client.close()
        return status ?? 1
    }

    /// The config of `--config` (or the default file) and its app `appId`; the error is the
    /// config's first problem in one line, or an unknown app naming the declared ones.
    static func loadApp(_ appId: String, arguments a: Arguments, context: CommandContext) throws(SetupError) -> (GatewayConfig, AppConfig) {
        let file = a.values["--config"] ?? GatewayConfig.defaultFile
        let report = GatewayConfig.load(file: file, environment: context.environment,
                                        workingDirectory: context.workingDirectory)
        guard let config = report.config else {
            let errors = report.errors
            let more = errors.count > 1 ? " (and \(errors.count - 1) more errors)" : ""
            throw .config("pushgw push: \(errors.first?.description ?? "\(file): unusable")\(more); run pushgw config check \(file)")
        }
        guard let app = config.apps[appId] else {
            throw .usage(UsageError("no app \"\(appId)\" in \(file) (declared: \(config.apps.keys.sorted().joined(separator: ", ")))", verb: name))
        }
        return (config, app)
    }

    /// Why `pushgw push` could not start: bad usage, or a config that cannot be used.
    enum SetupError: Error, Equatable {
        case usage(UsageError)
        /// The one line to print.
        case config(String)

        var line: String {
            switch self {
            case let .usage(error): return error.line
            case let .config(text): return text
            }
        }
    }

    /// Checks every argument, then loads the config and resolves the app; nil when help was
    /// asked for. No network I/O.
    static func makePlan(_ args: [String], context: CommandContext) throws(SetupError) -> (ManualPushPlan, json: Bool)? {
        let parsed: Arguments.Parsed
        do {
            parsed = try Arguments.parse(args, verb: name, flags: ["--sandbox", "--json"],
                                         options: ["--config", "--app", "--token", "--type", "--payload", "--priority",
                                                   "--expiration", "--collapse-id", "--apns-id"])
        } catch {
            throw .usage(error)
        }
        guard case let .arguments(a) = parsed else { return nil }
        func usage(_ problem: String) -> SetupError { .usage(UsageError(problem, verb: name)) }

        // Arguments first, so that a typo is reported before the config is read.
        guard let appId = a.values["--app"] else { throw usage("--app is required") }
        guard let token = a.values["--token"] else { throw usage("--token is required") }
        let typeName = a.values["--type"] ?? PushType.voip.rawValue
        guard let type = PushType(rawValue: typeName) else {
            throw usage("unknown push type \"\(typeName)\" (known: \(PushType.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
        let payload: [UInt8]
        if let text = a.values["--payload"] {
            guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)), object is [String: Any] else {
                throw usage("--payload is not a JSON object")
            }
            payload = Array(text.utf8)
        } else {
            switch type {
            case .voip: payload = Array("{}".utf8)
            case .alert: payload = Array(#"{"aps":{"alert":"pushgw test"}}"#.utf8)
            case .background: payload = Array(#"{"aps":{"content-available":1}}"#.utf8)
            default: throw usage("--type \(type.rawValue) needs --payload")
            }
        }
        var priority: Priority?
        if let text = a.values["--priority"] {
            guard let number = Int(text), let value = Priority(rawValue: number) else {
                throw usage("--priority must be 10, 5 or 1, not \"\(text)\"")
            }
            priority = value
        }
        var expiration: Int64?
        if let text = a.values["--expiration"] {
            guard let value = Int64(text), value >= 0 else {
                throw usage("--expiration must be unix seconds (0 or more), not \"\(text)\"")
            }
            expiration = value
        }
        let apnsID = a.values["--apns-id"]?.lowercased()

        // Then the config, then the push itself.
        let (config, app) = try loadApp(appId, arguments: a, context: context)
        guard let credential = config.credentials[app.credential] else {
            preconditionFailure("a usable config names only declared credentials")
        }
        if type.requiresTokenAuth && !credential.isToken {
            throw usage("\(type.rawValue) pushes need token auth, and app \"\(appId)\" uses a certificate")
        }
        let notification: PushNotification
        do {
            notification = try PushNotification(deviceToken: token, bundleID: app.bundleId, pushType: type,
                                                payload: payload, priority: priority, expiration: expiration,
                                                apnsID: apnsID, collapseID: a.values["--collapse-id"])
        } catch {
            throw usage(error.description)
        }
        let environment: ApnsEnvironment = a.flags.contains("--sandbox") ? .sandbox : app.environment
        let plan = ManualPushPlan(notification: notification, appId: appId, credentialName: app.credential,
                            credential: credential, environment: environment,
                            endpoint: config.apns.endpoint(for: environment), caFile: config.apns.caFile,
                            requestTimeoutMs: config.apns.requestTimeoutMs)
        return (plan, a.flags.contains("--json"))
    }
}
