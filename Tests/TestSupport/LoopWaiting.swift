import EventLoop

/// Runs `loop` until `condition` holds or `seconds` passed, waking it every 10 ms even when
/// nothing happens; returns whether `condition` held. For tests that wait for what a server on
/// the same loop does, with a bound that fails instead of hanging.
@discardableResult
public func runLoop(_ loop: EventLoop, forAtMost seconds: Double, until condition: () -> Bool) -> Bool {
    let end = Clock.monotonicMs() + Int64(seconds * 1000)
    let tick = LoopTimer(loop: loop) {}
    defer { tick.close() }
    loop.run(until: {
        if condition() || Clock.monotonicMs() > end { return true }
        if !tick.isScheduled { tick.schedule(afterMs: 10) }
        return false
    })
    return condition()
}
