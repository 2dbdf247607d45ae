import Routing
import XCTest

/// `LiveCallStateMachine` as transcripts: each test plays the events of one entry's stay in the
/// router's process and checks the action returned for each, and the state it ends in. No
/// sockets: the runner's side is the transcript.
final class LiveCallStateMachineTests: XCTestCase {
    /// One step of a transcript: an event played on the machine and the action it must return.
    private struct Step {
        let event: String
        let play: (inout LiveCallStateMachine) -> LiveCallStateMachine.Action
        let expected: LiveCallStateMachine.Action
    }

    /// What the lookup found about the call's copies, as `CallCopies` takes it.
    private enum Copies: String {
        /// No other copy routes: the entry is routed.
        case none
        /// Another entry of the call routes in this process.
        case routingHere
        /// Another live consumer holds the call's in-flight claim.
        case routingElsewhere
    }

    private static func answer(_ machine: inout LiveCallStateMachine, cancelled: Bool = false, alreadyDone: Bool = false,
                               copies: Copies = .none) -> LiveCallStateMachine.Action {
        machine.onLookupAnswered(.incomingCall, alreadyDone: alreadyDone, cancelled: cancelled,
                                 claimHolder: copies == .routingElsewhere ? "other" : "me", consumer: "me",
                                 copyRoutingHere: copies == .routingHere)
    }

    private static func lookup(cancelled: Bool = false, alreadyDone: Bool = false, copies: Copies = .none,
                               _ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "lookup answered (cancelled: \(cancelled), done: \(alreadyDone), copies: \(copies))",
             play: { answer(&$0, cancelled: cancelled, alreadyDone: alreadyDone, copies: copies) }, expected: expected)
    }

    private static func cancelHeard(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "cancel heard", play: { $0.onCancelHeard() }, expected: expected)
    }

    /// The record every transcript's call ends with.
    private static let record = LiveCallStateMachine.Record.outcome(OutcomeRecord(outcome: .deliveredVoip, id: "c1", type: .incomingCall, app: "a"))
    private static let written = LiveCallStateMachine.Action.writeRecord(record)

    private static func recordRequested(_ expected: LiveCallStateMachine.Action,
                                        _ record: LiveCallStateMachine.Record = record) -> Step {
        Step(event: "record requested", play: { $0.onRecordRequested(record) }, expected: expected)
    }

    private static func recordFailed(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "record failed", play: { $0.onRecordFailed() }, expected: expected)
    }

    private static func recordAgainDue(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "record again due", play: { $0.onRecordAgainDue() }, expected: expected)
    }

    private static func recorded(_ outcome: CallOutcome?, _ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "recorded \(outcome.map(\.rawValue) ?? "nothing")", play: { $0.onRecorded(outcome: outcome) }, expected: expected)
    }

    private static func scheduleRequested(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "schedule requested", play: { $0.onScheduleRequested() }, expected: expected)
    }

    private static func scheduleFailed(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "schedule failed", play: { $0.onScheduleFailed() }, expected: expected)
    }

    private static func scheduleAgainDue(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "schedule again due", play: { $0.onScheduleAgainDue() }, expected: expected)
    }

    private static func scheduleFoundCancelled(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "schedule found the call cancelled", play: { $0.onScheduleFoundCancelled() }, expected: expected)
    }

    private static func scheduled(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "scheduled", play: { $0.onScheduled() }, expected: expected)
    }

    private static func stepFailed(_ expected: LiveCallStateMachine.Action) -> Step {
        Step(event: "step failed", play: { $0.onStepFailed() }, expected: expected)
    }

    /// Plays `steps` from `machine` and checks every action, then the final state.
    private func play(_ steps: [Step], from machine: LiveCallStateMachine = LiveCallStateMachine(),
                      endsIn state: LiveCallStateMachine.State, file: StaticString = #filePath, line: UInt = #line) {
        var machine = machine
        for (i, step) in steps.enumerated() {
            let before = machine.state
            let action = step.play(&machine)
            XCTAssertEqual(action, step.expected, "step \(i + 1), \(step.event) in state \(before)", file: file, line: line)
        }
        XCTAssertEqual(machine.state, state, "the state after the transcript", file: file, line: line)
    }

    func testACallRoutedToItsOutcomeLeavesWithItForItsCopies() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.recordRequested(Self.written),
            Self.recorded(.deliveredVoip, .leave(duplicatesOf: .deliveredVoip)),
        ], endsIn: .gone)
    }

    func testASecondEndWhileTheFirstIsBeingWrittenIsDroppedSoARecordIsWrittenOnce() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.recordRequested(Self.written),
            Self.recordRequested(.none, .duplicate(OutcomeRecord(outcome: .duplicate, id: "c1", type: .incomingCall, app: "a"))),
            Self.recorded(.expired, .leave(duplicatesOf: .expired)),
        ], endsIn: .gone)
    }

    func testACancelHeardDuringTheLookupStartsTheRouterCancelled() {
        play([
            Self.cancelHeard(.none),
            Self.lookup(cancelled: false, .startRouter(cancelled: true)),
        ], endsIn: .routing)
    }

    func testACancelHeardWhileRoutingIsToldToTheRouter() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.cancelHeard(.tellRouterCancelled),
        ], endsIn: .routing)
    }

    func testACancelHeardWhileSchedulingOrRecordingChangesNothing() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.scheduleRequested(.write),
            Self.cancelHeard(.none),
        ], endsIn: .scheduling)
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.recordRequested(Self.written),
            Self.cancelHeard(.none),
        ], endsIn: .recording(routed: true, record: Self.record))
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.recordRequested(Self.written),
            Self.recordFailed(.recordAgainLater),
            Self.cancelHeard(.none),
        ], endsIn: .holdingOutcome(routed: true, record: Self.record))
    }

    func testAScheduledCallLeavesAndItsCopiesLookTheCallUpAgain() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.scheduleRequested(.write),
            Self.scheduled(.leave(duplicatesOf: nil)),
        ], endsIn: .gone)
    }

    func testAFailedScheduleStepIsTriedAgainUntilItSucceeds() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.scheduleRequested(.write),
            Self.scheduleFailed(.scheduleAgainLater),
            Self.scheduleAgainDue(.write),
            Self.scheduleFailed(.scheduleAgainLater),
            Self.scheduleAgainDue(.write),
            Self.scheduled(.leave(duplicatesOf: nil)),
        ], endsIn: .gone)
    }

    func testAScheduleStepThatMeetsTheCancellationRoutesAgainToRecordTheCancel() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.scheduleRequested(.write),
            Self.scheduleFoundCancelled(.tellRouterCancelled),
            Self.recordRequested(Self.written),
            Self.recorded(.cancelled, .leave(duplicatesOf: .cancelled)),
        ], endsIn: .gone)
    }

    func testACopyWaitsWhileAnotherRoutesThenRoutesToBeAnsweredAsADuplicate() {
        play([
            Self.lookup(copies: .routingHere, .waitForCopyHere),
            Self.lookup(copies: .routingElsewhere, .waitForCopyElsewhere),
            Self.lookup(alreadyDone: true, copies: .routingElsewhere, .startRouter(cancelled: false)),
        ], endsIn: .routing)
    }

    func testACopyThatHeardACancelWhileWaitingRoutesCancelledAtItsNextLookup() {
        play([
            Self.lookup(copies: .routingHere, .waitForCopyHere),
            Self.cancelHeard(.none),
            Self.lookup(copies: .routingHere, .startRouter(cancelled: true)),
        ], endsIn: .routing)
    }

    func testAFailedLookupLeavesWithNothingForTheCopies() {
        play([Self.stepFailed(.leave(duplicatesOf: nil))], endsIn: .gone)
        play([
            Self.lookup(copies: .routingHere, .waitForCopyHere),
            Self.stepFailed(.leave(duplicatesOf: nil)),
        ], endsIn: .gone)
    }

    /// A call whose APNs answer is known never leaves without its record: a failed record
    /// step holds the outcome and writes the same record again, as often as it takes, and
    /// only the record that lands lets the call (and its copies' wait) go.
    func testAFailedRecordHoldsTheOutcomeAndWritesItAgainUntilItLands() {
        play([
            Self.lookup(.startRouter(cancelled: false)),
            Self.recordRequested(Self.written),
            Self.recordFailed(.recordAgainLater),
            Self.recordRequested(.none, .deadLetter(DeadLetter.redeliveryLimit(9, callID: "c1", type: .incomingCall,
                                                                            app: "a", entry: "1-0"))),
            Self.recordAgainDue(Self.written),
            Self.recordFailed(.recordAgainLater),
            Self.recordAgainDue(Self.written),
            Self.recorded(.deliveredVoip, .leave(duplicatesOf: .deliveredVoip)),
        ], endsIn: .gone)
    }

    func testAnEntryRefusedAtAdmissionHoldsItsDeadLetterWhenItsWriteFails() {
        let deadLetter = DeadLetter.redeliveryLimit(5, callID: "c1", type: .incomingCall, app: "a", entry: "1-0")
        var machine = LiveCallStateMachine.refusedAtAdmission(deadLetter)
        XCTAssertEqual(machine.onRecordFailed(), .recordAgainLater)
        XCTAssertFalse(machine.hasStarted, "copies never wait for a dead-lettered entry, held or not")
        XCTAssertEqual(machine.onRecordAgainDue(), .writeRecord(.deadLetter(deadLetter)))
        XCTAssertEqual(machine.state, .recording(routed: false, record: .deadLetter(deadLetter)))
    }

    func testAnEntryThatLeftIgnoresLateLookupsCancelsAndFailures() {
        play([
            Self.stepFailed(.leave(duplicatesOf: nil)),
            Self.lookup(.none),
            Self.cancelHeard(.none),
            Self.stepFailed(.none),
            Self.scheduleAgainDue(.none),
        ], endsIn: .gone)
    }

    func testAnEntryRefusedAtAdmissionIsRecordedWithoutRoutingSoNoCopyWaitsForIt() {
        var machine = LiveCallStateMachine.refusedAtAdmission(
            DeadLetter.redeliveryLimit(5, callID: "c1", type: .incomingCall, app: "a", entry: "1-0"))
        XCTAssertFalse(machine.hasStarted, "copies never wait for a dead-lettered entry")
        XCTAssertEqual(machine.onCancelHeard(), .none, "a cancel changes nothing of a dead letter being written")
        play([Self.recorded(.deadLettered, .leave(duplicatesOf: .deadLettered))], from: machine, endsIn: .gone)
    }

    func testOnlyAnEntryWhoseRouterRanIsTheCopyOthersWaitFor() {
        var machine = LiveCallStateMachine()
        XCTAssertFalse(machine.hasStarted, "looking up")
        _ = Self.answer(&machine, copies: .routingHere)
        XCTAssertFalse(machine.hasStarted, "waiting for a copy")
        _ = Self.answer(&machine)
        XCTAssertTrue(machine.hasStarted, "routing")
        _ = machine.onScheduleRequested()
        XCTAssertTrue(machine.hasStarted, "scheduling")
        _ = machine.onScheduleFoundCancelled()
        _ = machine.onRecordRequested(Self.record)
        XCTAssertTrue(machine.hasStarted, "recording")
        _ = machine.onRecordFailed()
        XCTAssertTrue(machine.hasStarted, "holding its outcome: its copies keep waiting")
        _ = machine.onRecordAgainDue()
        _ = machine.onRecorded(outcome: .cancelled)
        XCTAssertFalse(machine.hasStarted, "gone")
    }

    func testACancelEntryRoutesAtOnceEvenWhileACopyOfItsCallRoutesHere() {
        var machine = LiveCallStateMachine()
        XCTAssertEqual(machine.onLookupAnswered(.callCancelled, alreadyDone: false, cancelled: false, claimHolder: nil,
                                                consumer: "me", copyRoutingHere: true),
                       .startRouter(cancelled: false), "a call_cancelled entry never pushes: it records the cancellation now")
    }
}
