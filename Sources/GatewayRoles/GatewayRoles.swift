// GatewayRoles: the process roles that `pushgw run --role` runs on the loop, performing the
// pure machines' actions: the router (RouterRole, running Routing's CallRouter against
// CallStorage and the APNs pools), the retry mover (RetryRole, Retry's timing against the
// durable schedule), dead-letter retention (DeadLettersRole); and what they share: the APNs
// pools per credential (ApnsPools), the apps at run time (AppRuntime), the log (Log), the
// observer the router reports to (RouterObservations) and the descriptor limit.
// Owns: doing what the pure modules decide, on the process's one loop.
// Must not: decide routing or retries (Routing, Retry), parse config (GatewayConfiguration),
// serve HTTP or render metrics (AdminEndpoint), or parse a command line (PushgwCommands).

/// A module `pushgw run --role` can run (docs/architecture.md).
package enum ServiceRole: String, CaseIterable, Sendable {
    /// Reads the apps' calls streams and routes each event (`RouterRole`).
    case router
    /// Moves due retries from the durable schedule back to the calls streams (`RetryRole`).
    case retry
    /// Dead-letter maintenance: retention by count and age (`DeadLettersRole`).
    case deadletters
    /// POSTs the results of apps with `webhooks` to their receivers (`WebhooksRole`).
    case webhooks
}
