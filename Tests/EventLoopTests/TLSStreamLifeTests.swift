import XCTest
@testable import EventLoop

/// `TLSStream.Life` played as transcripts of events and the actions they must produce: no
/// sockets, no loop.
final class TLSStreamLifeTests: XCTestCase {
    typealias Life = TLSStream.Life

    func testATLSClientResolvesConnectsShakesHandsAndThenReadsAndWrites() {
        var life = Life(.resolving)
        XCTAssertEqual(life.onReadable(), .none, "no socket yet")
        XCTAssertEqual(life.onFlush(), .none, "output waits for the connection")
        XCTAssertEqual(life.onResolved(failure: nil, inEvent: true), .openSocket)
        XCTAssertEqual(life.onConnectStarted(), .none)
        XCTAssertEqual(life.onWritable(), .checkConnect, "EV_WRITE while connecting reports the connect")
        XCTAssertEqual(life.onSocketConnected(isTLS: true), .startHandshake)
        XCTAssertEqual(life.onReadable(), .handshakeStep)
        XCTAssertEqual(life.onWritable(), .handshakeStep)
        XCTAssertFalse(life.isOpen)
        XCTAssertEqual(life.onHandshakeDone(), .reportConnected)
        XCTAssertTrue(life.isOpen)
        XCTAssertEqual(life.onReadable(), .read)
        XCTAssertEqual(life.onWritable(), .resumeWriting)
        XCTAssertEqual(life.onFlush(), .writeOutput)
    }

    func testAPlainStreamIsOpenOnceTheSocketConnects() {
        var life = Life(.connecting)  // a unix socket: no lookup
        XCTAssertEqual(life.onConnectStarted(), .none)
        XCTAssertEqual(life.onSocketConnected(isTLS: false), .reportConnected)
        XCTAssertTrue(life.isOpen)
    }

    func testAFailureInACallbackIsReportedAtOnceAndOnlyOnce() {
        var life = Life(.open)
        XCTAssertEqual(life.onFailure("connection reset by peer", inEvent: true),
                       .closeAndReport("connection reset by peer", wasOpen: true))
        XCTAssertTrue(life.isClosed)
        XCTAssertEqual(life.onFailure("again", inEvent: true), .none, "the delegate hears of the close once")
        XCTAssertEqual(life.onClose(), .none, "closing after the close does nothing")
        XCTAssertEqual(life.onReadable(), .none)
        XCTAssertEqual(life.onFlush(), .none)
    }

    func testAnOrderlyCloseByThePeerIsReportedWithoutAReason() {
        var life = Life(.open)
        XCTAssertEqual(life.onFailure(nil, inEvent: true), .closeAndReport(nil, wasOpen: true))
    }

    func testAFailureInsideConnectIsReportedFromTheFlushEventNotFromInsideTheCall() {
        var life = Life(.resolving)
        // A literal address answers inside `connect`, and its connect fails at once.
        XCTAssertEqual(life.onResolved(failure: nil, inEvent: false), .openSocket)
        XCTAssertEqual(life.onFailure("connection refused", inEvent: false), .scheduleFailureReport)
        XCTAssertFalse(life.isClosed, "not closed until reported: the owner may still close it")
        XCTAssertEqual(life.onFlush(), .closeAndReport("connection refused", wasOpen: false))
        XCTAssertTrue(life.isClosed)
        XCTAssertEqual(life.onFlush(), .none)
    }

    func testAFailedLookupInsideConnectWaitsForTheFlushEventToo() {
        var life = Life(.resolving)
        XCTAssertEqual(life.onResolved(failure: "DNS: nodename nor servname provided", inEvent: false), .scheduleFailureReport)
        XCTAssertEqual(life.onFlush(), .closeAndReport("DNS: nodename nor servname provided", wasOpen: false))
    }

    func testAFailureWithoutAReasonFoundOutsideACallbackSaysTheConnectionClosed() {
        var life = Life(.connecting)
        XCTAssertEqual(life.onFailure(nil, inEvent: false), .scheduleFailureReport)
        XCTAssertEqual(life.onFlush(), .closeAndReport("connection closed", wasOpen: false))
    }

    func testAnOwnersCloseIsNotReportedAndALookupAnsweringAfterItConnectsNothing() {
        var life = Life(.resolving)
        XCTAssertEqual(life.onClose(), .release(wasOpen: false))
        XCTAssertEqual(life.onResolved(failure: nil, inEvent: true), .none)
        XCTAssertEqual(life.onResolved(failure: "DNS: cancelled", inEvent: true), .none, "nor is a cancelled lookup reported")
    }

    func testAnOwnersCloseWhileOpenWritesWhatIsLeftAndWhileAFailureWaitsDropsTheReport() {
        var open = Life(.open)
        XCTAssertEqual(open.onClose(), .release(wasOpen: true), "an open stream's close writes what the kernel takes first")
        var failing = Life(.connecting)
        XCTAssertEqual(failing.onFailure("connection refused", inEvent: false), .scheduleFailureReport)
        XCTAssertEqual(failing.onClose(), .release(wasOpen: false))
        XCTAssertEqual(failing.onFlush(), .none, "closed by its owner: the waiting failure is not reported")
    }

    func testAServerStreamStartsInTheHandshake() {
        var life = Life(.handshaking)  // `accept`
        XCTAssertEqual(life.onReadable(), .handshakeStep)
        XCTAssertEqual(life.onFailure("TLS handshake: wrong version number", inEvent: true),
                       .closeAndReport("TLS handshake: wrong version number", wasOpen: false))
    }
}
