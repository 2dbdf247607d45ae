import GatewayConfiguration
import IngestEndpoint

/// `pushgw apikey new APP`: a new API key for the HTTP API and the hash the config holds
/// (docs/protocol.md, "The HTTP API"). No I/O beyond its output: the key is printed once,
/// for the producer; only its hash goes into the config.
enum ApiKeyCommand: Command {
    static let name = "apikey"
    static let summary = "make a new API key of an app for the HTTP API, and its hash for the config"
    static let help = """
        usage: pushgw apikey new APP

        Prints a new random API key for app APP (256 bits from OpenSSL, as pgw_ and 64 hex
        digits) and its SHA-256, the line to add to ingest.apps.APP.api_keys in the config.
        Give the key to the producer (it sends Authorization: Bearer KEY); the gateway keeps
        only the hash, so a lost key cannot be shown again: make a new one. An app may have
        several keys at once, to rotate them.
        """

    static func run(_ args: [String], context: CommandContext) -> Int32 {
        if args.contains("--help") || args.contains("-h") {
            context.output.out(help)
            return 0
        }
        guard args.first == "new" else {
            context.output.err(UsageError(args.isEmpty ? "missing \"new APP\"" : "unknown apikey command \"\(args[0])\"", verb: name).line)
            return 2
        }
        guard args.count == 2 else {
            context.output.err(UsageError(args.count < 2 ? "missing the app id" : "unexpected argument \"\(args[2])\"", verb: name).line)
            return 2
        }
        let app = args[1]
        guard GatewayConfig.isName(app) else {
            context.output.err(UsageError("app id \"\(app)\" must be \(GatewayConfig.nameRule)", verb: name).line)
            return 2
        }
        let key = APIKeys.newKey()
        context.output.out("key:    \(key)")
        context.output.out("sha256: \(APIKeys.hash(key))")
        context.output.out("config: \"ingest\": { \"apps\": { \"\(app)\": { \"api_keys\": [\"\(APIKeys.hash(key))\"] } } }")
        return 0
    }
}
