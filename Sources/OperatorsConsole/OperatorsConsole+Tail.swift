import CallStorage
import EventLoop
import Foundation
import HTTPMessages

// The live tail (docs/operations.md, "Console"): an app's newest results or feedback entries,
// newest first, the page refreshing itself every 2 s, so what the gateways write shows up as
// it happens. One XREVRANGE of `tailSize` entries per view.
extension OperatorsConsole {
    /// Entries one view of the tail shows.
    static let tailSize = 50

    func tail(_ request: HTTPRequest, _ viewer: ConsolePages.Viewer, _ answer: @escaping (HTTPResponse) -> Void) {
        let items = request.queryItems
        let app = items.first { $0.0 == "app" }?.1 ?? apps.first ?? ""
        let stream = CallHistoryStore.Stream(rawValue: items.first { $0.0 == "stream" }?.1 ?? "results") ?? .results
        guard apps.contains(app) else {
            return answer(.html(404, ConsolePages.message(title: "Live tail", viewer: viewer, text: "No such app.",
                                                          back: ("/console/overview", "Overview"))))
        }
        let history = CallHistoryStore(topology: operations.store.topology)
        history.newest(operations.keys(app), stream, count: Self.tailSize) { [weak self] result in
            guard let self else { return }
            let rows = (try? result.get())?.map { ConsolePages.TailRow($0, of: stream) } ?? []
            let problem = result.failureText
            answer(.html(200, ConsolePages.tail(viewer: viewer, apps: self.apps, app: app, stream: stream, rows: rows, problem: problem,
                                                nowMs: Clock.unixMs())))
        }
    }
}

extension Result {
    /// The failure's text; nil on success.
    var failureText: String? {
        if case let .failure(error) = self { return "\(error)" }
        return nil
    }
}
