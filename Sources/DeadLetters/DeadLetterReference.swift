/// A dead letter named by an operator (on the command line, in a console address): `ID`
/// (`1764412345000-0`) or `APP/ID`.
public struct DeadLetterReference: Equatable, Sendable {
    public let app: String?
    public let id: String

    public init(app: String?, id: String) {
        self.app = app
        self.id = id
    }

    /// `APP/ID`, or `ID` without an app (the form `init?(_:)` reads).
    public var text: String { app.map { $0 + "/" + id } ?? id }

    /// Nil when `text` is neither form.
    public init?(_ text: String) {
        if let slash = text.firstIndex(of: "/") {
            let app = String(text[..<slash])
            let id = String(text[text.index(after: slash)...])
            guard !app.isEmpty, DeadLetterRecord.isEntryID(id) else { return nil }
            self.app = app
            self.id = id
        } else {
            guard DeadLetterRecord.isEntryID(text) else { return nil }
            app = nil
            id = text
        }
    }
}
