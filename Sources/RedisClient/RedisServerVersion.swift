/// A Redis server's version, major and minor, as the server reports it (`HELLO`'s `version`
/// field, `INFO server`'s `redis_version`): `7.0.15` is 7.0. Clients pick commands by it
/// (`CLUSTER SHARDS` needs 7.0).
public struct RedisServerVersion: Comparable, Hashable, Sendable, CustomStringConvertible {
    public let major: Int
    public let minor: Int

    public init(major: Int, minor: Int) {
        precondition(major >= 0 && minor >= 0, "a version has no negative part")
        self.major = major
        self.minor = minor
    }

    /// Reads `MAJOR.MINOR[.PATCH…]` (digits only in the first two parts); nil for anything else.
    public init?(parsing text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count >= 2, let major = Self.number(parts[0]), let minor = Self.number(parts[1]) else { return nil }
        self.init(major: major, minor: minor)
    }

    /// Reads the `version` field of a `HELLO` answer (RESP2: a flat list of field names and
    /// values, `server`, `redis`, `version`, `7.0.15`, `proto`, 2, …); nil when it has none.
    public init?(hello reply: RedisReply) {
        guard let fields = reply.array, fields.count % 2 == 0 else { return nil }
        var index = 0
        while index < fields.count {
            if fields[index].string == "version", let text = fields[index + 1].string {
                self.init(parsing: text)
                return
            }
            index += 2
        }
        return nil
    }

    /// The version that brought `CLUSTER SHARDS`.
    public static let clusterShards = RedisServerVersion(major: 7, minor: 0)

    public static func < (a: RedisServerVersion, b: RedisServerVersion) -> Bool {
        (a.major, a.minor) < (b.major, b.minor)
    }

    public var description: String { "\(major).\(minor)" }

    private static func number(_ part: Substring) -> Int? {
        guard !part.isEmpty, part.count <= 6, part.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int(part)
    }
}
