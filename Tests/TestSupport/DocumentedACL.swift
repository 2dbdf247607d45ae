import Foundation

/// The Redis ACL rules docs/operations.md gives ("The least ACL permissions pushgw needs",
/// "The producers' ACL", the cluster's additions), read from the doc itself so that the tests
/// run as the doc says and the doc cannot drift from what was tested.
public enum DocumentedACL {
    /// The rules of the first ` ``` ` block line in docs/operations.md that starts with `command`
    /// (`ACL SETUSER pushgw on >PASSWORD`), with the block's following indented lines joined
    /// to it, split as redis-cli splits arguments (a double-quoted selector stays one
    /// argument), `PASSWORD` left out: what follows `command`.
    public static func rules(after command: String) throws -> [String] {
        let doc = try String(contentsOfFile: packageRoot + "/docs/operations.md", encoding: .utf8)
        var inBlock = false
        var found: [String]?
        for line in doc.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("```") {
                if found != nil { break }
                inBlock.toggle()
                continue
            }
            guard inBlock else { continue }
            if found == nil {
                if line.hasPrefix(command + " ") { found = [String(line.dropFirst(command.count + 1))] }
            } else if line.hasPrefix("  ") {
                found?.append(String(line))
            } else {
                break
            }
        }
        guard let found else { throw TestSupportError("docs/operations.md has no block line starting with \(command)") }
        return try arguments(found.joined(separator: " "))
    }

    /// The gateway's own least permissions (`ACL SETUSER pushgw on >PASSWORD …`).
    public static func gateway() throws -> [String] {
        try rules(after: "ACL SETUSER pushgw on >PASSWORD")
    }

    /// The least permissions plus the cluster's additions (`ACL SETUSER pushgw … …`).
    public static func gatewayOnCluster() throws -> [String] {
        try gateway() + rules(after: "ACL SETUSER pushgw …")
    }

    /// A producer's permissions for app `acme` (`ACL SETUSER acme-backend on >PASSWORD …`).
    public static func producer() throws -> [String] {
        try rules(after: "ACL SETUSER acme-backend on >PASSWORD")
    }

    /// Splits `text` at spaces, keeping "double-quoted" parts whole (without their quotes).
    static func arguments(_ text: String) throws -> [String] {
        var out: [String] = []
        var current = ""
        var quoted = false
        var started = false
        for c in text {
            if c == "\"" {
                quoted.toggle()
                started = true
            } else if c == " " && !quoted {
                if started { out.append(current) }
                current = ""
                started = false
            } else {
                current.append(c)
                started = true
            }
        }
        guard !quoted else { throw TestSupportError("an unclosed quote in \(text)") }
        if started { out.append(current) }
        return out
    }
}
