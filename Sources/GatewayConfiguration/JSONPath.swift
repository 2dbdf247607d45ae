import Routing
import VisibleText
/// A location in the config's JSON, printed as `apps.acme.retry.voip`; a key that is not a
/// plain word is quoted (`apps."my app"`). A value that came from an environment variable
/// carries its name, printed after the path.
struct JSONPath: Equatable, CustomStringConvertible {
    var components: [String] = []
    /// The environment variable the value came from, if any.
    var variable: String?

    static let root = JSONPath()

    func appending(_ key: String) -> JSONPath {
        var copy = self
        copy.components.append(key)
        copy.variable = nil
        return copy
    }

    /// The last key, or "" at the root.
    var key: String { components.last ?? "" }

    /// The path without the environment variable: the key of `ConfigEnvironment.overrides`.
    /// A key that is not a plain word of at most 64 characters is quoted, at most a short
    /// prefix of it.
    var plain: String {
        components.map { JSONPath.isPlain($0) && $0.utf8.count <= InvalidEvent.quoteLimit ? $0
                                                  : "\"\(TerminalText.field(InvalidEvent.quote($0)))\"" }.joined(separator: ".")
    }

    var description: String {
        if let variable { return "\(plain) (\(variable))" }
        return plain
    }

    private static func isPlain(_ key: String) -> Bool {
        !key.isEmpty && key.unicodeScalars.allSatisfy {
            ($0 >= "a" && $0 <= "z") || ($0 >= "A" && $0 <= "Z") || ($0 >= "0" && $0 <= "9") || $0 == "_" || $0 == "-"
        }
    }
}
