import EventLoop
import Foundation
import RedisClient

/// The simulator playing the devices' apps for ring receipts (`SimulatorConfig.ringReceipts`):
/// each VoIP push it accepts makes the phone "ring", and its app's backend adds the call's
/// `call_ringing` (`{"v":1,"id":CALL,"type":"call_ringing"}`, the call id read from the VoIP
/// payload's `id`) to the calls stream of the push's bundle id (docs/protocol.md, *Ring
/// receipts*). A call with devices' VoIP payload names no device, so its receipts are the
/// single-device form's: meant for benchmarks of single-device calls.
///
/// One connection of its own; an XADD that fails is counted (`failed`), not retried: a
/// receipt that never came is what the gateway's escalation is for. Loop-owned.
final class SimulatedRingReceipts {
    private let connection: RedisConnection
    private let streams: [String: String]
    /// Receipts written, and those Redis did not take.
    private(set) var written = 0
    private(set) var failed = 0

    init(loop: EventLoop, config: SimulatorConfig.RingReceipts) throws(SimulatorError) {
        let url: RedisURL
        do {
            url = try RedisURL(parsing: config.redisURL)
        } catch {
            throw .ringReceipts("\(config.redisURL): \(error)")
        }
        connection = RedisConnection(loop: loop, config: RedisConnection.Config(url: url, clientName: "pushgw-simulator"))
        streams = config.streams
    }

    func start() { connection.start() }
    func close() { connection.close() }

    /// APNs (the simulator) accepted a push with `topic` and `body`: a VoIP push of a bundle
    /// id it has a stream for rings, and its receipt goes out.
    func accepted(topic: String?, body: [UInt8]) {
        guard let topic, topic.hasSuffix(".voip"), let stream = streams[String(topic.dropLast(5))],
              let payload = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
              let callID = payload["id"] as? String,
              let event = try? JSONSerialization.data(withJSONObject: ["v": 1, "id": callID, "type": "call_ringing"],
                                                      options: [.sortedKeys])
        else { return }
        connection.send(["XADD", stream, "*", "event", String(decoding: event, as: UTF8.self)]) { [weak self] result in
            switch result {
            case .success: self?.written += 1
            case .failure: self?.failed += 1
            }
        }
    }
}
