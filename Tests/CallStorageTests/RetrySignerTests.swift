import TestSupport
import XCTest
@testable import CallStorage

/// The MAC of the internal `retry` field: made only with the key, bound to the app, the event
/// and the state, checked with the current key and the recent ones.
final class RetrySignerTests: XCTestCase {
    private let event = Array(#"{"v":1,"id":"c1","type":"incoming_call","voip_token":"ab"}"#.utf8)
    private let state = Array(#"{"id":"c1","made":1,"v":1}"#.utf8)

    func testTheMACIsHMACSHA256OfTheTaggedFields() throws {
        let signer = RetrySigner()
        let key = String(repeating: "0b", count: 32)
        XCTAssertTrue(signer.adopt(key))
        // The same HMAC computed by another implementation (Python's hmac module), over the
        // tag, the app id and a NUL, the event's length as 8 bytes big-endian, the event, the state.
        let script = """
            import hmac, hashlib, struct, sys
            event, state = sys.argv[1].encode(), sys.argv[2].encode()
            msg = b"pushgw retry v1\\0" + b"acme\\0" + struct.pack(">Q", len(event)) + event + state
            print(hmac.new(bytes.fromhex(sys.argv[3]), msg, hashlib.sha256).hexdigest())
            """
        let (status, out, err) = try runCommand("/usr/bin/python3", ["-c", script, String(decoding: event, as: UTF8.self),
                                                                     String(decoding: state, as: UTF8.self), key])
        XCTAssertEqual(status, 0, err)
        XCTAssertEqual(signer.sign(app: "acme", event: event, state: state), out.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func testOnlyTheSameAppEventAndStateVerify() {
        let signer = RetrySigner()
        let mac = Array(signer.sign(app: "acme", event: event, state: state).utf8)
        XCTAssertEqual(mac.count, 64)
        XCTAssertTrue(signer.verifies(mac, app: "acme", event: event, state: state))
        XCTAssertFalse(signer.verifies(mac, app: "other", event: event, state: state), "another app")
        XCTAssertFalse(signer.verifies(mac, app: "acme", event: event + [0x20], state: state), "another event")
        XCTAssertFalse(signer.verifies(mac, app: "acme", event: event, state: state + [0x20]), "another state")
        XCTAssertFalse(signer.verifies(mac, app: "acm", event: Array("e".utf8) + event, state: state), "the fields cannot shift")
        XCTAssertFalse(signer.verifies(nil, app: "acme", event: event, state: state), "no MAC")
        XCTAssertFalse(signer.verifies(Array(mac.dropLast()), app: "acme", event: event, state: state), "a short MAC")
        let upper = Array(String(decoding: mac, as: UTF8.self).uppercased().utf8)
        if upper != mac {
            XCTAssertFalse(signer.verifies(upper, app: "acme", event: event, state: state), "upper-case digits are not what pushgw writes")
        }
        XCTAssertFalse(RetrySigner().verifies(mac, app: "acme", event: event, state: state), "another process's own key")
    }

    func testAdoptedKeysReplaceTheOwnAndRecentOnesStillVerify() {
        let signer = RetrySigner(), other = RetrySigner()
        let own = Array(signer.sign(app: "acme", event: event, state: state).utf8)
        XCTAssertTrue(signer.adopt(other.keyHex))
        XCTAssertEqual(signer.keyHex, other.keyHex)
        XCTAssertEqual(signer.sign(app: "acme", event: event, state: state), other.sign(app: "acme", event: event, state: state),
                       "two processes with the deployment's key sign alike")
        XCTAssertTrue(signer.verifies(own, app: "acme", event: event, state: state), "signed with the key before: still valid")
        for _ in 0..<RetrySigner.recentKeys { XCTAssertTrue(signer.adopt(RetrySigner().keyHex)) }
        XCTAssertFalse(signer.verifies(own, app: "acme", event: event, state: state), "only the last few keys are kept")
        for bad in ["", "zz", String(repeating: "0", count: 63), String(repeating: "A", count: 64), String(repeating: "0", count: 66)] {
            let before = signer.keyHex
            XCTAssertFalse(signer.adopt(bad), bad)
            XCTAssertEqual(signer.keyHex, before)
        }
    }
}
