import HTTPMessages

// OperatorsConsole: the operators' web console on the admin endpoint (docs/operations.md,
// "Console"). It knows nothing of the gateway's HTTP server: requests and responses cross its
// seam as the admin endpoint's plain values (`HTTPRequest`, `HTTPResponse` of HTTPMessages),
// and the gateway passes in the dead-letter operations and a way to read its figures.

extension HTTPRequest {
    /// True when the request reached us over TLS: the admin endpoint itself speaks plain HTTP,
    /// so only a TLS-terminating proxy in front of it says so (`X-Forwarded-Proto: https`).
    public var isTLS: Bool { headers["x-forwarded-proto"]?.lowercased() == "https" }
}

extension HTTPResponse {
    static func html(_ status: Int, _ page: Node, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(status: status, contentType: "text/html; charset=utf-8", bytes: page.renderedBytes, headers: headers)
    }

    /// 303 See Other to `location` (after a POST, so a reload does not post again).
    static func redirect(_ location: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        HTTPResponse(status: 303, contentType: "text/plain; charset=utf-8", body: "see \(location)\n",
                     headers: ["Location": location] + headers)
    }
}
