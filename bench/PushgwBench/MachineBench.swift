import APNs
import EventLoop
import Foundation
import Retry
import Routing

/// `pushgw-bench machine`: what one single-device call costs in the call's machine, outside
/// the network, in a loop with no I/O: for `--calls` iterations a `CallStateMachine` is made,
/// its lookup answered (nothing known), its VoIP push accepted and its record written; and, as
/// the floor in the same run, the same steps on a bare `CallRouter` and `LiveCallStateMachine`
/// (what the router ran before calls had devices). Prints nanoseconds per call of each and
/// their ratio; `--sizes 1` first prints the inline size in bytes of each value a step
/// returns or copies (a large one is copied with memcpy at every step); `--only machine` or
/// `--only router` runs one half (for `valgrind --tool=callgrind`, with a binary stripped of
/// its DWARF 5 debug info, which valgrind 3.19 cannot read).
enum MachineBench {
    static func run(_ o: Options) {
        let calls = o.int("calls", 200_000)
        if o.int("sizes", 0) == 1 {
            print("Action", MemoryLayout<CallStateMachine.Action>.size, "Machine", MemoryLayout<CallStateMachine>.size,
                  "Router", MemoryLayout<CallRouter>.size, "CallAction", MemoryLayout<CallAction>.size,
                  "LiveAction", MemoryLayout<LiveCallStateMachine.Action>.size, "Live", MemoryLayout<LiveCallStateMachine>.size,
                  "Outcome", MemoryLayout<OutcomeRecord>.size, "DeadLetter", MemoryLayout<DeadLetter>.size,
                  "Event", MemoryLayout<CallEvent>.size, "Policy", MemoryLayout<AppRoutingPolicy>.size,
                  "DevicePush", MemoryLayout<CallStateMachine.DevicePush>.size, "PushPlan", MemoryLayout<PushPlan>.size,
                  "PushNotification", MemoryLayout<PushNotification>.size, "Attempt", MemoryLayout<AttemptRecord>.size,
                  "RetryPlan", MemoryLayout<RetryPlan>.size, "TokenFeedback", MemoryLayout<TokenFeedback>.size)
        }
        let policy = AppRoutingPolicy(appID: "bench0", bundleID: "com.example.app")
        let shared = SharedRoutingPolicy(policy)  // as AppRuntime shares it among its calls
        let entry: Int64 = 1_764_412_300_000
        let event: CallEvent
        do {
            event = try CallEvent.decode(Array(DecodeBench.e2eEvent.utf8), entryTimeMs: entry, policy: policy)
        } catch {
            FileHandle.standardError.write(Data("pushgw-bench: the bench event is invalid: \(error)\n".utf8))
            exit(1)
        }
        let accepted = PushNotificationResponse(status: 200, reason: nil, apnsID: "8A6B4C2D-1E0F-4A3B-9C8D-7E6F5A4B3C2D")
        var checksum = 0
        func machineRound(_ i: Int) {
            var machine = CallStateMachine(event: event, sharing: shared, jitter: Jitter(seed: UInt64(i)))
            let sent = machine.onLookupAnswered(alreadyDone: nil, cancelled: false, claimHolder: "c", consumer: "c",
                                                copyRoutingHere: false, now: entry + 1)
            sent.forEachPush { checksum &+= $0.plan.attempt }
            let answered = machine.onApnsAnswered(device: 0, accepted, now: entry + 3)
            if case let .writeRecord(record) = answered.life { checksum &+= record.hashValueForBench }
            checksum &+= machine.onRecorded(outcome: .deliveredVoip) == .none ? 0 : 1
        }
        func routerRound(_ i: Int) {
            var router = CallRouter(sharing: shared, jitter: Jitter(seed: UInt64(i)))
            var life = LiveCallStateMachine()
            _ = life.onLookupAnswered(event.kind, alreadyDone: false, cancelled: false, claimHolder: "c", consumer: "c",
                                      copyRoutingHere: false)
            if case let .sendVoip(plan) = router.start(event, now: entry + 1).step { checksum &+= plan.attempt }
            if case let .finish(record) = router.apnsAnswered(accepted, now: entry + 3).step {
                if case let .writeRecord(r) = life.onRecordRequested(.outcome(record)) { checksum &+= r.hashValueForBench }
            }
            checksum &+= life.onRecorded(outcome: .deliveredVoip) == .none ? 0 : 1
        }
        // `--only machine` or `--only router`: one half, for an instruction count of it alone.
        let only = o.string("only", "")
        for i in 0..<1_000 { machineRound(i); routerRound(i) }
        let machineStart = Clock.monotonicUs()
        if only != "router" { for i in 0..<calls { machineRound(i) } }
        let machineUs = Clock.monotonicUs() - machineStart
        let routerStart = Clock.monotonicUs()
        if only != "machine" { for i in 0..<calls { routerRound(i) } }
        let routerUs = Clock.monotonicUs() - routerStart
        func ns(_ us: Int64) -> String { String(format: "%.0f", Double(us) * 1000 / Double(max(calls, 1))) }
        print(#"{"calls":\#(calls),"machine_ns":\#(ns(machineUs)),"router_ns":\#(ns(routerUs)),"machine_over_router":\#(String(format: "%.2f", Double(machineUs) / Double(max(routerUs, 1)))),"checksum":\#(checksum)}"#)
    }
}

private extension LiveCallStateMachine.Record {
    /// Something of the record the optimizer cannot drop.
    var hashValueForBench: Int {
        switch self {
        case let .outcome(r), let .duplicate(r), let .cancellation(r), let .outcomeWithDeadLetters(r, _): return r.attempts.count
        case let .deadLetter(d): return d.record.attempts.count
        }
    }
}
