// APNs: HTTP/2-over-TLS connections to APNs (nghttp2 + OpenSSL), pools per credential and
// environment, token (ES256 JWT) and certificate auth, the typed request and response, and
// Apple's reason table.
// Owns: everything Apple documents about the provider API. Must not know about Redis, call
// events or apps.

/// A value of the `apns-push-type` header, with the rules Apple attaches to it
/// (Apple's request docs, "Push types and topic suffixes").
public enum PushType: String, CaseIterable, Sendable {
    case alert, background, voip, pushtotalk, complication, fileprovider
    case liveactivity, location, widgets, controls, mdm

    /// The suffix appended to the bundle id to form `apns-topic`. `mdm` has none: its topic
    /// is the UID from the MDM certificate, which callers pass as the bundle id.
    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: return ""
        case .voip: return ".voip"
        case .pushtotalk: return ".voip-ptt"
        case .complication: return ".complication"
        case .fileprovider: return ".pushkit.fileprovider"
        case .liveactivity: return ".push-type.liveactivity"
        case .location: return ".location-query"
        case .widgets: return ".push-type.widgets"
        case .controls: return ".push-type.controls"
        }
    }

    /// `apns-topic` for an app's bundle id.
    public func topic(bundleID: String) -> String { bundleID + topicSuffix }

    /// The largest payload APNs accepts for this type, in bytes: 5120 for VoIP, 4096 otherwise.
    public var maxPayloadBytes: Int { self == .voip ? 5120 : 4096 }

    /// The priority sent when the caller does not choose one. Background pushes must use 5
    /// (10 is an error); VoIP and push-to-talk wake the device now.
    public var defaultPriority: Priority {
        self == .background ? .conserve : .immediate
    }

    /// Priorities APNs accepts for this type. Background pushes refuse 10.
    public func allows(_ priority: Priority) -> Bool {
        switch self {
        case .background: return priority != .immediate
        default: return true
        }
    }

    /// Certificate auth supports only a subset of push types; these need token auth.
    public var requiresTokenAuth: Bool { self == .liveactivity || self == .location }

}

/// `apns-priority`: 10 sends now, 5 schedules for power, 1 never wakes the device.
public enum Priority: Int, Sendable, CaseIterable {
    case immediate = 10
    case conserve = 5
    case low = 1
}

/// Which APNs service: production or the sandbox (development) one.
public enum ApnsEnvironment: String, Sendable, CaseIterable {
    case production, sandbox

    /// The other environment.
    public var other: ApnsEnvironment { self == .production ? .sandbox : .production }

    /// Apple's host for this environment.
    public var defaultHost: String {
        self == .production ? "api.push.apple.com" : "api.sandbox.push.apple.com"
    }
    /// Port 443 (Apple documents 2197 as the alternative for firewalls that block other
    /// HTTPS; set it with the endpoint's port).
    public static let defaultPort = 443
}
