import APNs
import DeadLetters
import Foundation
import JSONOutput

/// Prints APNs' answer to a hand-made push on stdout and returns `pushgw push`'s exit status:
/// 0 accepted, 1 rejected or no answer (transport trouble). With `json`, one line
/// `{"status":200,"apns_id":"…","reason":null,"timestamp":null}`, where `timestamp` is the
/// 410 invalidation time in unix milliseconds; a transport error gives `"status":null` and an
/// `"error"` key.
package func printPushAnswer(_ result: Result<PushNotificationResponse, ApnsClientError>, json: Bool) -> Int32 {
    printPushAnswer(result, json: json, output: .standard)
}

func printPushAnswer(_ result: Result<PushNotificationResponse, ApnsClientError>, json: Bool,
                     output: CommandOutput) -> Int32 {
    switch result {
    case let .success(response):
        if json {
            output.out(OrderedJSON.object([("status", .int(response.status)), ("apns_id", .string(response.apnsID)),
                                            ("reason", .string(response.reason?.text)),
                                            ("timestamp", .int(response.invalidationTimestampMs))]).text)
        } else if response.isAccepted {
            output.out("accepted: 200, apns-id \(response.apnsID ?? "(none)")")
        } else {
            var line = "rejected: \(response.status) \(response.reason?.text ?? "(no reason)")"
            if let kind = response.rejectionKind { line += " (\(kind.rawValue))" }
            if let ms = response.invalidationTimestampMs {
                line += ", token invalid since \(DeadFormat.time(ms))"
            }
            line += ", apns-id \(response.apnsID ?? "(none)")"
            output.out(line)
        }
        return response.isAccepted ? 0 : 1
    case let .failure(error):
        if json {
            output.out(OrderedJSON.object([("status", .null), ("apns_id", .null), ("reason", .null), ("timestamp", .null),
                                            ("error", .string(error.description))]).text)
        } else {
            output.err("pushgw push: no answer from APNs: \(error.description)")
        }
        return 1
    }
}
