import Digests

/// The digest that names an event's replay ledger: SHA-256 of the event's bytes, in
/// lower-case hex. The router stores an event's bytes unchanged in its dead letter, so a
/// replayed event that dies again has the same digest, whether or not it has a readable id.
public enum EventDigest {
    public static func of(_ event: String) -> String {
        of(Array(event.utf8))
    }

    public static func of(_ event: [UInt8]) -> String { SHA256.hex(event) }
}
