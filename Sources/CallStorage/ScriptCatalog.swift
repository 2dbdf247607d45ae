/// Every Lua script the gateway runs on Redis, by name: for measuring what each costs Redis
/// (`make bench`'s Redis CPU per script, `bench/redis-scripts.sh`, matches a script's SHA-1 in
/// Redis' slow log to its name here). The scripts themselves stay with the stores that run them.
package enum ScriptCatalog {
    package static let all: [(name: String, source: String)] = [
        ("claim-calls", CallStoreLua.claimCalls),
        ("finish", CallStoreLua.finish),
        ("dead-letter", CallStoreLua.deadLetter),
        ("claim", CallStoreLua.claim),
        ("claim-own", CallStoreLua.claimOwn),
        ("take-over-claims", CallStoreLua.takeOverClaims),
        ("heartbeat", CallStoreLua.heartbeat),
        ("register", CallStoreLua.register),
        ("retire", CallStoreLua.retire),
        ("registry", CallStoreLua.registry),
        ("live-consumers", CallStoreLua.liveConsumers),
        ("forget-lapsed", CallStoreLua.forgetLapsed),
        ("backlogs", CallStoreLua.backlogs),
        ("clear-voip-suspicion", CallStoreLua.clearVoipSuspicion),
        ("retry-schedule", RetryLua.schedule),
        ("retry-move", RetryLua.move),
        ("retry-pending", RetryLua.pending),
        ("retry-cancel", RetryLua.cancel),
        ("intake-submit", CallIntakeLua.submit),
        ("dead-range", DeadLetterLua.range),
        ("dead-replay", DeadLetterLua.replay),
        ("dead-purge", DeadLetterLua.purge),
        ("dead-trim", DeadLetterLua.trim),
        ("dead-pending-trim", DeadLetterLua.pendingTrim),
        ("app-pause", AppPauseLua.pause),
    ]
}
