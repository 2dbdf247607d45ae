import DeadLetters

/// JSON text for hand-built output lines, whose key order is part of the format.
enum JSONText {
    /// `s` as a JSON string literal, quotes included.
    static func string(_ s: String) -> String { DeadLetters.JSONValue.string(s).text }

    /// `s` as a JSON string, or `null`.
    static func string(_ s: String?) -> String { s.map { string($0) } ?? "null" }

    /// `n` as a JSON number, or `null`.
    static func number<N: BinaryInteger>(_ n: N?) -> String { n.map { "\($0)" } ?? "null" }
}
