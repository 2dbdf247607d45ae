import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage

/// Signing in: the form's token checked by the caller's `signInCheck` (under its guess
/// limits), a session opened and its cookie set. Signing out is a route of `serve`.
extension OperatorsConsole {
    func signIn(_ request: HTTPRequest, _ answer: @escaping (HTTPResponse) -> Void) {
        guard ConsoleGate.isSameOrigin(request) else {
            return answer(refused(request, 403, "This sign-in came from a page of another origin.", viewer: nil, why: "cross-origin sign-in"))
        }
        let form = request.formItems
        let token = form.first { $0.0 == "token" }?.1 ?? ""
        let given = (form.first { $0.0 == "name" }?.1 ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let check: SignInCheck = token.isEmpty ? .wrong : signInCheck(token, request)
        let role: ConsoleRole
        switch check {
        case let .signedIn(r):
            role = r
        case .wrong:
            log(.warn, "console sign-in refused: wrong token", [("from", request.peer ?? "?")])
            return answer(.html(401, ConsolePages.signIn(problem: "That token is not valid.", readOnlyAvailable: readOnlyAvailable)))
        case let .throttled(seconds):
            // Not checked, not logged one by one: the guess limits log each burst.
            return answer(.html(429, ConsolePages.signIn(problem: "Too many wrong tokens from this address: try again in \(seconds) s.",
                                                         readOnlyAvailable: readOnlyAvailable),
                                headers: ["Retry-After": String(seconds)]))
        }
        let name = given.isEmpty ? "console" : String(given.prefix(64))
        let session = sessions.open(role: role, name: name, nowMs: Clock.unixMs(), random: random)
        log(.info, "console sign-in", [("role", role.rawValue), ("name", name), ("from", request.peer ?? "?")])
        var signedIn = HTTPResponse.redirect("/console/overview", headers: ["Set-Cookie": ConsoleSessions.cookie(session, secure: request.isTLS)])
        signedIn.trusted = true
        answer(signedIn)
    }

}
