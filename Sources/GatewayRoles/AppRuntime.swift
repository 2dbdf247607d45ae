import APNs
import GatewayConfiguration
import CallStorage
import Routing

/// What the router needs to know about one configured app at run time: its Redis keys, its
/// routing policy, and which credential's pools carry its pushes. Built once from the config;
/// a class, so the many live calls of an app share it instead of each copying its keys and policy.
package final class AppRuntime: Sendable {
    package let id: String
    package let keys: AppKeys
    package let policy: AppRoutingPolicy
    /// `policy`, in the one box every call of the app shares (`CallStateMachine.init(event:sharing:…)`).
    package let sharedPolicy: SharedRoutingPolicy
    /// Name of the credential in `GatewayConfig.credentials`.
    package let credential: String
    /// The app's share in the APNs clients' queues (`ApnsClient.send`): its place in the
    /// config's apps, so apps sharing a credential take turns there.
    package let share: Int
    /// The app's in-flight cap and event rate (`limits`, config/README.md).
    package let limits: AppLimits
    /// The app's retention windows (`apps.APP.retention`).
    package let retention: RetentionWindows

    /// `reachesBothEnvironments`: the app's credential can push to both APNs environments
    /// (`Credential.reachesBothEnvironments`).
    package init(id: String, config: AppConfig, prefix: String, reachesBothEnvironments: Bool = true, share: Int = 0) {
        self.id = id
        self.share = share
        limits = config.limits
        retention = config.retention
        keys = AppKeys(prefix: prefix, app: id, sendsWebhooks: config.webhooks != nil)
        credential = config.credential
        policy = AppRoutingPolicy(appID: id, bundleID: config.bundleId, environment: config.environment,
                                  reachesBothEnvironments: reachesBothEnvironments, ringTimeoutMs: Int64(config.ringTimeoutSeconds) * 1000,
                                  voipRetry: config.retry.voip, alertRetry: config.retry.alert,
                                  alertTTLMs: Int64(config.retry.alertTTLSeconds) * 1000,
                                  fallbackAlert: config.fallbackAlert, missedCallAlert: config.missedCallAlert,
                                  ringReceiptTimeoutMs: config.ringReceiptTimeoutMs.map(Int64.init),
                                  voipSuspectedAfterSilentRings: config.voipSuspectedAfterSilentRings,
                                  fcmCredential: config.fcmCredential)
        sharedPolicy = SharedRoutingPolicy(policy)
    }

    /// Every app of `config`, in a stable order (by id).
    package static func all(_ config: GatewayConfig) -> [AppRuntime] {
        // Each credential is loaded once, however many apps share it.
        var reach: [String: Bool] = [:]
        return config.apps.keys.sorted().enumerated().map { share, id in
            let app = config.apps[id]!
            if reach[app.credential] == nil { reach[app.credential] = config.credentials[app.credential]?.reachesBothEnvironments ?? false }
            return AppRuntime(id: id, config: app, prefix: config.redis.prefix, reachesBothEnvironments: reach[app.credential]!,
                              share: share)
        }
    }
}
