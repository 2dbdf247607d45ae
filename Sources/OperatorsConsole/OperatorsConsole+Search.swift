import HTTPMessages
import DeadLetters
import EventLoop
import Foundation
import CallStorage
import RedisClient

/// What the search box of every page asked for (`GET /console/search?q=…`): a call id,
/// `APP/ID`, or a device token. Pure.
enum ConsoleSearch: Equatable {
    /// No text: the page explains the box.
    case empty
    /// Longer than any call id (128 characters) or token (400 hex digits) with its app.
    case tooLong
    /// Call `callID` in each of `apps` (the one named by `APP/ID`, else every app), and the
    /// text as a device token (normalized) when it is one.
    case lookUp(callID: String, apps: [String], token: String?)

    /// Characters of a search at most.
    static let maxCharacters = 500

    static func parse(_ text: String, apps: [String]) -> ConsoleSearch {
        let text = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return .empty }
        guard text.count <= maxCharacters else { return .tooLong }
        if let slash = text.firstIndex(of: "/"), apps.contains(String(text[..<slash])), text.index(after: slash) != text.endIndex {
            return .lookUp(callID: String(text[text.index(after: slash)...]), apps: [String(text[..<slash])], token: nil)
        }
        return .lookUp(callID: text, apps: apps, token: TokenStore.normalized(text))
    }
}

/// The search box of every page: a call id shows the call (`CallLookup.call`, what `pushgw
/// calls show APP/ID` prints), a token the token's state (`CallLookup.token`, what `pushgw
/// tokens show` prints). Both roles may search (a GET changes nothing). Reads app after app:
/// a few round trips each, and for a call the paced scan of the app's dead stream
/// (`DeadLetterOperations.newest`), a bounded step per loop turn.
extension OperatorsConsole {
    func search(_ request: HTTPRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let text = request.queryItems.first { $0.0 == "q" }?.1 ?? ""
        switch ConsoleSearch.parse(text, apps: apps) {
        case .empty:
            return answer(.html(200, ConsolePages.searchHelp(viewer: viewer, apps: apps)))
        case .tooLong:
            return answer(.html(400, ConsolePages.message(title: "Search", viewer: viewer,
                                                          text: "Longer than any call id or device token (\(ConsoleSearch.maxCharacters) "
                                                              + "characters at most); nothing was looked up.")))
        case let .lookUp(callID, apps, token):
            let lookup = CallLookup(operations: operations)
            var calls: [CallReport] = []
            func unavailable(_ error: RedisError) {
                answer(.html(503, ConsolePages.message(title: "Unavailable", viewer: viewer, text: "Redis: \(error)", back: nil)))
            }
            func tokens() {
                guard let token else { return found([]) }
                lookup.token(token, apps: self.apps) { reports in
                    switch reports {
                    case let .success(reports): found(reports)
                    case let .failure(error): unavailable(error)
                    }
                }
            }
            func found(_ tokenReports: [TokenReport]) {
                let now = Clock.unixMs()
                let knownToken = tokenReports.contains(where: \.isKnown)
                if calls.isEmpty && !knownToken {
                    return answer(.html(404, ConsolePages.searchNotFound(viewer: viewer, query: text, callID: callID, apps: apps,
                                                                         token: token)))
                }
                answer(.html(200, ConsolePages.searchResults(viewer: viewer, query: text, calls: calls,
                                                             tokens: knownToken ? tokenReports : [], nowMs: now)))
            }
            func next(_ index: Int) {
                guard index < apps.count else { return tokens() }
                lookup.call(app: apps[index], callID: callID) { report in
                    switch report {
                    case let .success(report):
                        if report.isKnown { calls.append(report) }
                        next(index + 1)
                    case let .failure(error): unavailable(error)
                    }
                }
            }
            next(0)
        }
    }
}
