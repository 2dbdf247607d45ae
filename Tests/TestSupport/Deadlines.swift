import EventLoop
import Foundation
import Glibc
import XCTest

/// Every wait in the tests ends: either what it waits for happens, or the deadline passes and
/// the test fails with a message naming what it was waiting for. A deadline is a safety net
/// against hangs, never an assertion about speed: it is far above what a loaded machine needs.
public enum Deadline {
    /// The default patience of a wait (ms).
    public static let defaultMs: Int64 = 20_000
}

extension EventLoop {
    /// Runs the loop until `condition` holds, checking it after every batch of callbacks and at
    /// least every 10 ms (so a condition no loop event reports, such as a child process or a
    /// clock, is seen too). After `timeoutMs` it fails the test with "gave up waiting for
    /// `what`" and returns false.
    @discardableResult
    public func run(waitingFor what: @autoclosure () -> String, timeoutMs: Int64 = Deadline.defaultMs,
                    file: StaticString = #filePath, line: UInt = #line, until condition: () -> Bool) -> Bool {
        let end = Clock.monotonicMs() + timeoutMs
        var held = false
        let tick = LoopTimer(loop: self) {}
        defer { tick.close() }
        run(until: {
            if condition() { held = true; return true }
            if Clock.monotonicMs() >= end { return true }
            if !tick.isScheduled { tick.schedule(afterMs: 10) }
            return false
        })
        if !held { XCTFail("gave up after \(timeoutMs) ms waiting for \(what())", file: file, line: line) }
        return held
    }

    /// Runs the loop for `ms` milliseconds, whatever happens meanwhile: for checks that
    /// something does *not* happen, or to let a server come back, never to wait for an event.
    public func run(forMs ms: Int64) {
        var done = false
        let timer = LoopTimer(loop: self) { done = true }
        defer { timer.close() }
        timer.schedule(afterMs: ms)
        run(until: { done })
    }
}

/// Blocks the calling thread until `condition` holds, checking it every `pollMs`. After
/// `timeoutMs` it fails the test with "gave up waiting for `what`" (unless `failing` is false,
/// for callers that throw their own error) and returns false. For waits on other processes;
/// a test driving an `EventLoop` uses `EventLoop.run(waitingFor:)`.
@discardableResult
public func waitUntil(_ what: @autoclosure () -> String, timeoutMs: Int64 = Deadline.defaultMs, pollMs: UInt32 = 20,
                      failing: Bool = true, file: StaticString = #filePath, line: UInt = #line,
                      _ condition: () throws -> Bool) rethrows -> Bool {
    let end = Clock.monotonicMs() + timeoutMs
    while true {
        if try condition() { return true }
        if Clock.monotonicMs() >= end { break }
        usleep(pollMs * 1000)
    }
    if failing { XCTFail("gave up after \(timeoutMs) ms waiting for \(what())", file: file, line: line) }
    return false
}
