import EventLoop
import Foundation
import GatewayTestSupport
import TestSupport
import XCTest

/// docs/http-api.yaml: a well-formed OpenAPI 3.1 document (checked by openapi-spec-validator
/// when it is installed; Debian 12 has no package of it, so its own checks here otherwise: every
/// `$ref` resolves, every path parameter is declared, every operation has an id and answers),
/// and a true description of the API: requests built from it (its paths, parameters and
/// example bodies) sent to a live gateway get only the statuses it lists, with bodies of the
/// schemas it gives.
final class IngestOpenAPITests: XCTestCase {
    private static let file = packageRoot + "/docs/http-api.yaml"

    /// The YAML as JSON, through python3-yaml (a test dependency already).
    private func document() throws -> [String: Any] {
        let (status, out, err) = try runCommand("/usr/bin/python3", ["-c", "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))))",
                                                                     Self.file])
        XCTAssertEqual(status, 0, err)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any])
    }

    func testTheDocumentIsWellFormed() throws {
        let doc = try document()
        XCTAssertTrue((doc["openapi"] as? String)?.hasPrefix("3.1.") == true, "OpenAPI 3.1")
        XCTAssertNotNil((doc["info"] as? [String: Any])?["title"])
        // Every $ref points at something in the document.
        var refs: [String] = []
        func collect(_ value: Any) {
            if let object = value as? [String: Any] {
                if let ref = object["$ref"] as? String { refs.append(ref) }
                object.values.forEach(collect)
            } else if let array = value as? [Any] {
                array.forEach(collect)
            }
        }
        collect(doc)
        XCTAssertFalse(refs.isEmpty)
        for ref in refs { XCTAssertNotNil(resolve(ref, in: doc), "\(ref) resolves") }
        let paths = try XCTUnwrap(doc["paths"] as? [String: [String: Any]])
        var operationIDs = Set<String>()
        for (path, item) in paths {
            let declared = Set(((item["parameters"] as? [Any]) ?? []).compactMap { parameter($0, in: doc)?["name"] as? String })
            let templated = path.split(separator: "{").dropFirst().compactMap { $0.split(separator: "}").first.map(String.init) }
            for name in templated { XCTAssertTrue(declared.contains(name), "\(path) declares {\(name)}") }
            for (method, value) in item where method != "parameters" {
                let operation = try XCTUnwrap(value as? [String: Any])
                let id = try XCTUnwrap(operation["operationId"] as? String, "\(method) \(path) has an operationId")
                XCTAssertTrue(operationIDs.insert(id).inserted, "operationId \(id) is unique")
                XCTAssertFalse((operation["responses"] as? [String: Any] ?? [:]).isEmpty, "\(id) lists its answers")
            }
        }
        XCTAssertEqual(operationIDs, ["sendCall", "readResult", "cancelCall", "answerCall", "declineCall", "ringingCall"])
        // The validator, where it is installed (PyPI's openapi-spec-validator; no Debian package).
        let (found, _, _) = try runCommand("/usr/bin/python3", ["-c", "import openapi_spec_validator"])
        if found == 0 {
            let (status, out, err) = try runCommand("/usr/bin/python3", ["-m", "openapi_spec_validator", Self.file])
            XCTAssertEqual(status, 0, "openapi-spec-validator: \(out)\(err)")
        }
    }

    /// Every operation, as the document describes it, against a live gateway: with the key, then
    /// without; then the call again (its duplicate). Each answer's status is one the operation
    /// lists, and its body matches that answer's schema.
    func testRequestsBuiltFromTheDocumentGetTheAnswersItDescribes() throws {
        let doc = try document()
        let h = try IngestHarness()
        defer { h.close() }
        let paths = try XCTUnwrap(doc["paths"] as? [String: [String: Any]])
        let order = ["sendCall", "readResult", "cancelCall", "answerCall", "declineCall", "ringingCall"]
        var operations: [(id: String, method: String, path: String, operation: [String: Any])] = []
        for (path, item) in paths {
            for (method, value) in item where method != "parameters" {
                let operation = value as! [String: Any]
                operations.append((operation["operationId"] as! String, method.uppercased(), path, operation))
            }
        }
        operations.sort { order.firstIndex(of: $0.id)! < order.firstIndex(of: $1.id)! }
        var seen: [String: [Int]] = [:]
        for round in ["with the key", "without a key", "again"] {
            for op in operations where round != "again" || op.id == "sendCall" {
                var target = op.path.replacingOccurrences(of: "{app}", with: "acme")
                    .replacingOccurrences(of: "{id}", with: "call-openapi-1")
                let parameters = ((op.operation["parameters"] as? [Any]) ?? []).compactMap { parameter($0, in: doc) }
                if let wait = parameters.first(where: { $0["name"] as? String == "wait" }), let example = wait["example"] as? String {
                    target += "?wait=" + example
                }
                var body = ""
                if let content = ((op.operation["requestBody"] as? [String: Any])?["content"] as? [String: Any])?["application/json"] as? [String: Any],
                   let example = ((content["examples"] as? [String: Any])?.values.first as? [String: Any])?["value"] {
                    body = String(decoding: try JSONSerialization.data(withJSONObject: example, options: [.sortedKeys]), as: UTF8.self)
                }
                let reply = try h.request(op.method, target, key: round == "without a key" ? nil : h.keys["acme"], body: body)
                seen[op.id, default: []].append(reply.status)
                let responses = try XCTUnwrap(op.operation["responses"] as? [String: Any])
                guard let listed = responses[String(reply.status)] else {
                    XCTFail("\(op.id) \(round): \(reply.status) is not among \(responses.keys.sorted()): \(reply.body)")
                    continue
                }
                let response = try XCTUnwrap(resolved(listed, in: doc))
                let schema = ((response["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"]
                let json = try JSONSerialization.jsonObject(with: Data(reply.body.utf8))
                if let schema {
                    let problems = validate(json, against: schema, in: doc, at: "body")
                    XCTAssertEqual(problems, [], "\(op.id) \(round) \(reply.status): \(reply.body)")
                }
                for (name, _) in (response["headers"] as? [String: Any]) ?? [:] {
                    XCTAssertNotNil(reply.headers[name.lowercased()], "\(op.id) \(round) \(reply.status) sends \(name)")
                }
            }
        }
        XCTAssertEqual(seen["sendCall"], [200, 401, 409], "delivered, refused, then its duplicate")
        XCTAssertEqual(seen["readResult"], [200, 401])
        XCTAssertEqual(seen["cancelCall"], [200, 401])
        XCTAssertEqual(seen["answerCall"], [409, 401], "the call was cancelled first: its answer is the cancel's duplicate")
        XCTAssertEqual(seen["ringingCall"], [200, 401], "the receipt's own result")
    }

    // MARK: The document's references and a small JSON Schema check

    private func resolve(_ ref: String, in doc: [String: Any]) -> Any? {
        guard ref.hasPrefix("#/") else { return nil }
        var node: Any? = doc
        for part in ref.dropFirst(2).split(separator: "/") { node = (node as? [String: Any])?[String(part)] }
        return node
    }

    private func resolved(_ value: Any, in doc: [String: Any]) -> [String: Any]? {
        guard let object = value as? [String: Any] else { return nil }
        if let ref = object["$ref"] as? String { return resolve(ref, in: doc).flatMap { resolved($0, in: doc) } }
        return object
    }

    private func parameter(_ value: Any, in doc: [String: Any]) -> [String: Any]? { resolved(value, in: doc) }

    /// What of `type`, `required`, `properties`, `enum` and `const` the value breaks.
    private func validate(_ value: Any, against schemaValue: Any, in doc: [String: Any], at path: String) -> [String] {
        guard let schema = resolved(schemaValue, in: doc) else { return ["\(path): no schema"] }
        var problems: [String] = []
        switch schema["type"] as? String {
        case "object"?:
            guard let object = value as? [String: Any] else { return ["\(path): not an object"] }
            for key in (schema["required"] as? [String]) ?? [] where object[key] == nil { problems.append("\(path).\(key): missing") }
            for (key, sub) in (schema["properties"] as? [String: Any]) ?? [:] {
                if let inner = object[key] { problems += validate(inner, against: sub, in: doc, at: "\(path).\(key)") }
            }
        case "string"?:
            guard let text = value as? String else { return ["\(path): not a string"] }
            if let allowed = schema["enum"] as? [String], !allowed.contains(text) { problems.append("\(path): \(text) not in \(allowed)") }
            if let constant = schema["const"] as? String, constant != text { problems.append("\(path): \(text) is not \(constant)") }
        case "integer"?:
            if !(value is NSNumber) { problems.append("\(path): not an integer") }
        case "boolean"?:
            if !(value is NSNumber) { problems.append("\(path): not a boolean") }
        default:
            break
        }
        return problems
    }
}
