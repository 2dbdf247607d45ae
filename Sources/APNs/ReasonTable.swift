/// A provider's refusal reasons as one table (APNs' `ApnsReason`, FCM's `FcmErrorCode`): each
/// of the provider's strings once, with the HTTP status the provider pairs it with and what a
/// caller should do about it. A string not in the table keeps its spelling and is classified by
/// the status it came with (`kind(ofStatus:)`).
public protocol ReasonTable: Hashable, Sendable {
    associatedtype Kind: Sendable
    /// The one table.
    static var table: [(reason: Self, text: String, status: Int, kind: Kind)] { get }
    /// `table`'s rows by text, made once by `index(of:)`.
    static var rowsByText: [String: Int] { get }
    /// A reason the table does not know.
    static func unlisted(text: String, status: Int) -> Self
    /// The text and status of a reason the table does not know; nil for one it does.
    var unlistedSpelling: (text: String, status: Int)? { get }
    /// The class of a reason the table does not know, by its HTTP status.
    static func kind(ofStatus status: Int) -> Kind
}

extension ReasonTable {
    /// The index `rowsByText` holds.
    public static func index(of table: [(reason: Self, text: String, status: Int, kind: Kind)]) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: table.enumerated().map { ($1.text, $0) })
    }

    /// The reason for the provider's `text`; an unknown text keeps its spelling and `status`.
    public init(text: String, status: Int) {
        if let i = Self.rowsByText[text] {
            self = Self.table[i].reason
        } else {
            self = Self.unlisted(text: text, status: status)
        }
    }

    private var row: (reason: Self, text: String, status: Int, kind: Kind)? {
        if unlistedSpelling != nil { return nil }
        return Self.table.first { $0.reason == self }
    }

    /// The provider's string for this reason.
    public var text: String { unlistedSpelling?.text ?? row!.text }

    /// The HTTP status the provider sends with this reason.
    public var status: Int { unlistedSpelling?.status ?? row!.status }

    /// What to do about it: the table's class, or by status for a reason it does not know.
    public var kind: Kind { row?.kind ?? Self.kind(ofStatus: status) }
}
