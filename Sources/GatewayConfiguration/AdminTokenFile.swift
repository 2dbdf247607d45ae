import Foundation

/// The files of the admin endpoint's tokens (`admin.token_file`, `admin.readonly_token_file`,
/// config/README.md) and what makes a token strong enough to guard replays and purges: read
/// here for `config check` and for `pushgw run` alike, so both refuse the same tokens.
///
/// A token is at least `minimumCharacters` of visible ASCII (it travels in an
/// `Authorization` header and a form field) and not obviously guessable: at least
/// `minimumDistinct` different characters, not a shorter piece repeated, not mostly a run of
/// neighbouring characters (`abcdef…`, `aaaa…`). `openssl rand -hex 32` passes every time.
/// Messages never quote the token nor say more of it than that it breaks the rule.
package enum AdminTokenFile {
    package static let minimumCharacters = 32
    static let minimumDistinct = 8
    /// A token file holds one line; anything longer than this is not a token file.
    static let maxBytes = 4_096

    /// How to make a good token for `path`.
    package static func fix(_ path: String) -> String {
        "write a random token: openssl rand -hex 32 > \(path) && chmod 600 \(path)"
    }

    /// The token in `path`, white space around it dropped; or what is wrong with the file.
    package static func read(_ path: String) -> Result<String, AdminTokenProblem> {
        let bytes: [UInt8]
        switch KeyFileInspection.readRegular(path, limit: maxBytes) {
        case let .success(read): bytes = read
        case let .failure(reason): return .failure(AdminTokenProblem("cannot be read: \(reason.text)"))
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { return .failure(AdminTokenProblem("is not UTF-8 text")) }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { return .failure(AdminTokenProblem("is empty")) }
        if let weakness = weakness(token) { return .failure(AdminTokenProblem(weakness)) }
        return .success(token)
    }

    /// Why `token` (already trimmed) is too weak to be a token, nil when it is not.
    package static func weakness(_ token: String) -> String? {
        let bytes = Array(token.utf8)
        guard bytes.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            return "holds characters other than visible ASCII (a token goes into an HTTP header)"
        }
        guard bytes.count >= minimumCharacters else { return "holds a token shorter than \(minimumCharacters) characters" }
        guard Set(bytes).count >= minimumDistinct else {
            return "holds a token with little entropy (fewer than \(minimumDistinct) different characters)"
        }
        if let period = (1...bytes.count / 2).first(where: { p in (p..<bytes.count).allSatisfy { bytes[$0] == bytes[$0 - p] } }) {
            return "holds a token with little entropy (a piece of \(period) characters repeated)"
        }
        let neighbours = zip(bytes, bytes.dropFirst()).filter { abs(Int($0) - Int($1)) <= 1 }.count
        if neighbours * 2 > bytes.count - 1 {
            return "holds a token with little entropy (mostly runs of neighbouring characters)"
        }
        return nil
    }
}

/// What is wrong with a token file, worded to follow its path ("… is empty").
package struct AdminTokenProblem: Error, Equatable, Sendable {
    package let text: String
    init(_ text: String) { self.text = text }
}
