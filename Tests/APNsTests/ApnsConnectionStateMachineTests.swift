import XCTest
@testable import APNs

/// `ApnsConnection.StateMachine` played as transcripts of events and the actions they must
/// produce: no sockets, no nghttp2, no loop.
final class ApnsConnectionStateMachineTests: XCTestCase {
    typealias Machine = ApnsConnection.StateMachine

    /// Plays the connect up to `active` and checks every action on the way.
    private func makeActive(file: StaticString = #filePath, line: UInt = #line) -> Machine {
        var m = Machine()
        XCTAssertEqual(m.state, .connecting, file: file, line: line)
        XCTAssertEqual(m.onTransportConnected(), .openSession, file: file, line: line)
        XCTAssertEqual(m.state, .awaitingSettings, file: file, line: line)
        XCTAssertFalse(m.state.acceptsStreams, "no stream before the server's first SETTINGS", file: file, line: line)
        XCTAssertEqual(m.onSettingsReceived(), .reportCapacity, file: file, line: line)
        XCTAssertEqual(m.state, .active, file: file, line: line)
        return m
    }

    func testAConnectionOpensItsSessionAndAcceptsStreamsAfterTheFirstSettings() {
        var m = Machine()
        XCTAssertTrue(m.state.isConnecting)
        XCTAssertTrue(m.state.isLive, "a connect under way counts as live: the pool opens no other for it")
        XCTAssertEqual(m.onTransportConnected(), .openSession)
        XCTAssertTrue(m.state.isConnecting, "still connecting until SETTINGS")
        XCTAssertEqual(m.onEventsDelivered(inFlight: 0), .none)
        XCTAssertEqual(m.onSettingsReceived(), .reportCapacity, "the first SETTINGS opens the connection")
        XCTAssertTrue(m.state.acceptsStreams)
        XCTAssertFalse(m.state.isConnecting)
        XCTAssertEqual(m.onSettingsReceived(), .reportCapacity, "a later SETTINGS may raise the stream limit")
        XCTAssertEqual(m.onEventsDelivered(inFlight: 0), .none, "an idle active connection stays open")
    }

    func testAFailedConnectIsReportedAsNotReadyAndALostConnectionAsReady() {
        var connecting = Machine()
        XCTAssertEqual(connecting.onFailure(reason: "connection refused"),
                       .close(.init(reason: "connection refused", lastProcessedStreamID: nil,
                                    report: .init(reason: "connection refused", wasReady: false))),
                       "a connect that fails backs the pool off")
        XCTAssertEqual(connecting.state, .closed)

        var awaiting = Machine()
        XCTAssertEqual(awaiting.onTransportConnected(), .openSession)
        XCTAssertEqual(awaiting.onFailure(reason: "nghttp2_session_client_new failed"),
                       .close(.init(reason: "nghttp2_session_client_new failed", lastProcessedStreamID: nil,
                                    report: .init(reason: "nghttp2_session_client_new failed", wasReady: false))),
                       "no SETTINGS yet: still a failed connect")

        var active = makeActive()
        XCTAssertEqual(active.onFailure(reason: "closed by APNs"),
                       .close(.init(reason: "closed by APNs", lastProcessedStreamID: nil,
                                    report: .init(reason: "closed by APNs", wasReady: true))),
                       "a ready connection that dies is replaced at once")
        XCTAssertFalse(active.state.isLive)
    }

    func testGoAwayStopsNewStreamsReturnsStreamsAboveItsLastAndClosesOnceDrained() {
        var m = makeActive()
        XCTAssertEqual(m.onGoAwayReceived(lastStreamID: 5, reason: "Shutdown"), .reportGoingAway(reason: "Shutdown"))
        XCTAssertEqual(m.state, .goingAway(lastStreamID: 5))
        XCTAssertFalse(m.state.acceptsStreams)
        XCTAssertFalse(m.state.isLive, "the pool opens a replacement")
        XCTAssertEqual(m.onSettingsReceived(), .none, "no capacity on a connection going away")

        XCTAssertEqual(m.onStreamClosed(3, hasStatus: true, refused: false, headersSent: true), .answered)
        XCTAssertEqual(m.onStreamClosed(5, hasStatus: false, refused: false, headersSent: true), .lost,
                       "at or below the last stream the server may have processed it")
        XCTAssertEqual(m.onStreamClosed(7, hasStatus: false, refused: false, headersSent: true), .returned,
                       "above the last stream no server processed it")
        XCTAssertEqual(m.onEventsDelivered(inFlight: 1), .none, "streams still open: keep waiting for their answers")
        XCTAssertEqual(m.onGoAwayReceived(lastStreamID: 3, reason: nil), .reportGoingAway(reason: nil),
                       "a second GOAWAY is reported and lowers the last stream")
        XCTAssertEqual(m.onStreamClosed(5, hasStatus: false, refused: false, headersSent: true), .returned)
        XCTAssertEqual(m.onEventsDelivered(inFlight: 0),
                       .close(.init(reason: "drained after GOAWAY", lastProcessedStreamID: 3,
                                    report: .init(reason: "GOAWAY", wasReady: true))))
        XCTAssertEqual(m.state, .closed)
        XCTAssertEqual(m.onEventsDelivered(inFlight: 0), .none, "closed once")
        XCTAssertEqual(m.onCloseRequested(reason: "client closed"), .none, "closing twice does nothing")
    }

    func testAStreamIsReturnedWhenNoServerProcessedItAndLostWhenItWasWritten() {
        let m = makeActive()
        XCTAssertEqual(m.onStreamClosed(1, hasStatus: true, refused: false, headersSent: true), .answered)
        XCTAssertEqual(m.onStreamClosed(3, hasStatus: true, refused: true, headersSent: true), .answered,
                       "a status is an answer, whatever closed the stream")
        XCTAssertEqual(m.onStreamClosed(5, hasStatus: false, refused: true, headersSent: true), .returned,
                       "REFUSED_STREAM: sent again elsewhere")
        XCTAssertEqual(m.onStreamClosed(7, hasStatus: false, refused: false, headersSent: false), .returned,
                       "HEADERS never left: sent again elsewhere")
        XCTAssertEqual(m.onStreamClosed(9, hasStatus: false, refused: false, headersSent: true), .lost,
                       "written, reset without an answer: APNs may have delivered it")
    }

    func testClosingWhileGoingAwayReturnsWhatTheServerNeverProcessed() {
        var m = makeActive()
        XCTAssertEqual(m.onGoAwayReceived(lastStreamID: 9, reason: nil), .reportGoingAway(reason: nil))
        let action = m.onCloseRequested(reason: "pool closed")
        XCTAssertEqual(action, .close(.init(reason: "pool closed", lastProcessedStreamID: 9, report: nil)),
                       "the pool asked: it hears no connectionClosed")
        guard case let .close(closing) = action else { return }
        XCTAssertEqual(Machine.outcome(ofStream: 11, hasStatus: false, refused: false, headersSent: true,
                                       lastProcessedStreamID: closing.lastProcessedStreamID), .returned)
        XCTAssertEqual(Machine.outcome(ofStream: 9, hasStatus: false, refused: false, headersSent: true,
                                       lastProcessedStreamID: closing.lastProcessedStreamID), .lost)
        XCTAssertEqual(Machine.outcome(ofStream: 9, hasStatus: true, refused: false, headersSent: true,
                                       lastProcessedStreamID: closing.lastProcessedStreamID), .answered,
                       "headers came but not the body: the status alone tells the outcome")
    }

    func testAConnectTimeoutClosesOnlyAConnectStillUnderWay() {
        var m = Machine()
        XCTAssertEqual(m.onTransportConnected(), .openSession)
        XCTAssertEqual(m.onConnectTimedOut(reason: "no SETTINGS within 5000 ms"),
                       .close(.init(reason: "no SETTINGS within 5000 ms", lastProcessedStreamID: nil,
                                    report: .init(reason: "no SETTINGS within 5000 ms", wasReady: false))))
        var active = makeActive()
        XCTAssertEqual(active.onConnectTimedOut(reason: "late"), .none, "tolerated: it connected meanwhile")
        XCTAssertEqual(active.state, .active)
    }

    func testAPoolCloseOfAReadyConnectionReportsNothingBack() {
        var m = makeActive()
        XCTAssertEqual(m.onCloseRequested(reason: "no PING answer within 3000 ms"),
                       .close(.init(reason: "no PING answer within 3000 ms", lastProcessedStreamID: nil, report: nil)))
        XCTAssertEqual(m.state, .closed)
    }
}
