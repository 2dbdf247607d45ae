/// A piece of a console page (as swift-html's `Node`): an element with its attributes and
/// children, text, or one of the few named constant fragments of `RawHTML`. The console's
/// pages are built as nodes and written only by `render`, which escapes every text and every
/// attribute value (`ConsoleEscaping`); so no value a producer, Redis or APNs gave can end an
/// element, open one, or leave an attribute, whatever code builds the page. Tag and attribute
/// names are `StaticString`: only the console's own code names them. Pure.
enum Node: Sendable {
    /// `<name a="v" …>children</name>`; an HTML void element (`input`, `meta`, `link`) has no
    /// end tag, an SVG shape without children ends in `/>`.
    indirect case element(StaticString, [Attribute], [Node])
    /// Text between tags, escaped, its controls made visible; its line feeds kept when
    /// `keepingLines` (a multi-line `<pre>`).
    case text(String, keepingLines: Bool = false)
    /// Nodes one after the other, without an element around them.
    indirect case group([Node])
    /// A fragment written as it is: only the named constants of `RawHTML`.
    case raw(RawHTML)
    /// Nodes this renderer already wrote (`prerendered`), copied as they are.
    case kept(RenderedHTML)

    /// Nothing (an empty group), for an optional part of a page.
    static let none = Node.group([])

    /// A line feed between elements, to keep the HTML readable. Not text: a text node's line
    /// feed is a control character, which the renderer shows as `\u000a`.
    static let newline = Node.raw(.newline)

    /// The page, or part of it, as HTML.
    var rendered: String { String(decoding: renderedBytes, as: UTF8.self) }

    /// The node rendered now, to be copied into a page rendered later: a preview renders each
    /// row in the scan's step that read it, each step on its own loop turn, so the answer's
    /// render copies 1,000 rows instead of holding the loop to render them (docs/operations.md,
    /// "Console").
    var prerendered: Node { .kept(RenderedHTML(bytes: renderedBytes)) }

    /// The page as the UTF-8 bytes of its HTML, what a response carries.
    var renderedBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(4_096)
        render(into: &out)
        return out
    }

    /// Writes the node's HTML. Bytes, not a `String`: every page is rendered on the loop, and
    /// appending each piece's UTF-8 to one buffer costs a fraction of growing a string piece by
    /// piece.
    func render(into out: inout [UInt8]) {
        switch self {
        case let .text(text, keepingLines):
            ConsoleEscaping.appendHTML(text, keepingLines: keepingLines, to: &out)
        case let .group(nodes):
            for node in nodes { node.render(into: &out) }
        case let .raw(fragment):
            out.append(contentsOf: fragment.html.utf8)
        case let .kept(html):
            out.append(contentsOf: html.bytes)
        case let .element(name, attributes, children):
            out.append(0x3C) // <
            name.append(to: &out)
            for attribute in attributes {
                out.append(0x20)
                attribute.name.append(to: &out)
                if let value = attribute.value {
                    out.append(0x3D) // =
                    out.append(0x22) // "
                    ConsoleEscaping.appendAttribute(value, to: &out)
                    out.append(0x22)
                }
            }
            if Node.isVoid(name) {
                out.append(0x3E) // >
                return
            }
            if children.isEmpty && Node.isSVGShape(name) {
                out.append(0x2F) // /
                out.append(0x3E)
                return
            }
            out.append(0x3E)
            for child in children { child.render(into: &out) }
            out.append(0x3C)
            out.append(0x2F)
            name.append(to: &out)
            out.append(0x3E)
        }
    }

    /// HTML elements that have no content and no end tag.
    static func isVoid(_ name: StaticString) -> Bool {
        name.isOne(of: ["input", "meta", "link", "br", "hr", "img"])
    }

    /// SVG elements the chart draws without children, written self-closed.
    static func isSVGShape(_ name: StaticString) -> Bool {
        name.isOne(of: ["line", "circle", "polyline", "rect", "path"])
    }
}

extension StaticString {
    fileprivate func append(to out: inout [UInt8]) {
        withUTF8Buffer { out.append(contentsOf: $0) }
    }

    /// True when the name's bytes are those of one of `names` (compared as bytes: no string is
    /// made per element rendered).
    fileprivate func isOne(of names: [StaticString]) -> Bool {
        withUTF8Buffer { mine in
            names.contains { name in name.withUTF8Buffer { $0.elementsEqual(mine) } }
        }
    }
}

/// One attribute of an element: `name="value"`, or `name` alone (a boolean attribute such as
/// `selected`, `Attribute.flag`). The value is escaped by the renderer.
struct Attribute: Sendable {
    let name: StaticString
    /// nil for a boolean attribute.
    let value: String?

    init(_ name: StaticString, _ value: String) {
        self.name = name
        self.value = value
    }

    private init(flag name: StaticString) {
        self.name = name
        value = nil
    }

    /// A boolean attribute (`selected`, `required`, `defer`): its name alone.
    static func flag(_ name: StaticString) -> Attribute { Attribute(flag: name) }
}

/// The fragments the console writes as they are: constants of its own, never built from a
/// value. Adding one is a reviewer's matter; nothing else can make a `Node.raw`.
struct RawHTML: Sendable {
    let html: String

    private init(_ html: StaticString) { self.html = html.description }

    /// The first line of every page.
    static let doctype = RawHTML("<!doctype html>")
    /// A line feed between elements (`Node.newline`).
    static let newline = RawHTML("\n")
}

/// HTML that `Node.render` wrote, kept to be copied into a page (`Node.prerendered`): escaped
/// as every node is; nothing else can make one.
struct RenderedHTML: Sendable {
    fileprivate let bytes: [UInt8]
}

// MARK: Building

/// Short builders for the pages: `el("td", ["class": …], …)` reads like the HTML it makes.
/// Attributes keep the order given (tests and the browser script find elements by them).
extension Node {
    static func el(_ name: StaticString, _ children: Node...) -> Node { .element(name, [], children) }

    static func el(_ name: StaticString, _ attributes: KeyValuePairs<StaticString, String>, _ children: Node...) -> Node {
        .element(name, attributes.map { Attribute($0.key, $0.value) }, children)
    }

    static func el(_ name: StaticString, _ attributes: KeyValuePairs<StaticString, String> = [:], children: [Node]) -> Node {
        .element(name, attributes.map { Attribute($0.key, $0.value) }, children)
    }

    /// An element with its attributes as a list, for those that depend on the data
    /// (`selected`, `aria-current`).
    static func el(_ name: StaticString, attributes: [Attribute], _ children: Node...) -> Node {
        .element(name, attributes, children)
    }

    static func group(_ nodes: Node...) -> Node { .group(nodes) }
}

extension Node: ExpressibleByStringLiteral, ExpressibleByStringInterpolation {
    /// A literal or an interpolated string is text (escaped like any other).
    init(stringLiteral value: String) { self = .text(value) }
}
