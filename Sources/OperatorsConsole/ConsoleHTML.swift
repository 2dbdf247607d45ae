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

    /// Nothing (an empty group), for an optional part of a page.
    static let none = Node.group([])

    /// The page, or part of it, as HTML.
    var rendered: String {
        var out = ""
        render(into: &out)
        return out
    }

    func render(into out: inout String) {
        switch self {
        case let .text(text, keepingLines):
            out += ConsoleEscaping.html(text, keepingLines: keepingLines)
        case let .group(nodes):
            for node in nodes { node.render(into: &out) }
        case let .raw(fragment):
            out += fragment.html
        case let .element(name, attributes, children):
            out += "<"
            out += name.description
            for attribute in attributes {
                out += " "
                out += attribute.name.description
                if let value = attribute.value {
                    out += "=\""
                    out += ConsoleEscaping.attribute(value)
                    out += "\""
                }
            }
            if Node.voidElements.contains(name.description) {
                out += ">"
                return
            }
            if children.isEmpty && Node.svgShapes.contains(name.description) {
                out += "/>"
                return
            }
            out += ">"
            for child in children { child.render(into: &out) }
            out += "</"
            out += name.description
            out += ">"
        }
    }

    /// HTML elements that have no content and no end tag.
    static let voidElements: Set<String> = ["input", "meta", "link", "br", "hr", "img"]
    /// SVG elements the chart draws without children, written self-closed.
    static let svgShapes: Set<String> = ["line", "circle", "polyline", "rect", "path"]
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
