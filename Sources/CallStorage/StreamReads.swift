import EventLoop
import RedisClient

/// How a `CallStore` reads new entries of its apps' calls streams (`CallStore.readNew`). A
/// blocked `XREADGROUP` holds up its connection, so reads never share the connection of the
/// store's other commands:
/// - on one Redis (`SingleStreamReads`): one connection of their own, a sibling of the
///   topology's, and one `XREADGROUP` over every app;
/// - on a cluster (`ClusterStreamReads`): one blocking read per app, on a lane of its own of
///   the cluster client, answered as one read over every app.
///
/// The store makes the one its `RedisTopology` calls for and talks to it only through this
/// protocol. Loop-owned; completions run on the loop, once each.
protocol StreamReads: AnyObject {
    /// The apps whose consumer groups the reads ensure: at `start()` on a cluster, on every
    /// connect of the reads' own connection on one Redis.
    var apps: [AppKeys] { get set }
    /// Runs when a read may have been served by Redis with its reply lost (its entries are then
    /// pending for the consumer): `CallStore.onReadReplyMayBeLost` says when.
    var onReadLost: (() -> Void)? { get set }
    /// The connections the reads hold of their own, by name (on a cluster none: the lanes are
    /// the cluster client's).
    var ownLinks: [(name: String, connection: RedisConnection)] { get }

    /// `CallStore.readNew`.
    func read(apps: [AppKeys], consumer: String, count: Int, blockMs: Int64?,
              completion: @escaping (Result<[AppKeys: [StreamEntry]], RedisError>) -> Void)
    /// Connects (one Redis) or creates every app's group (cluster); the topology starts apart.
    func start()
    /// Stops reading; a read waiting completes `.closed` or `.disconnected`.
    func close()
}

/// `XGROUP CREATE calls group <start> MKSTREAM`; an existing group (`BUSYGROUP`) is success.
/// The one place a consumer group is created, by the store and by its reads.
func createConsumerGroup(_ app: AppKeys, group: String, startID: String, on channel: some RedisCommandChannel,
                         completion: @escaping (Result<Void, RedisError>) -> Void) {
    channel.send(command: RedisCommand(["XGROUP", "CREATE", app.calls, group, startID, "MKSTREAM"]), blockMs: 0) { result in
        switch result {
        case .success: completion(.success(()))
        case .failure(let error) where error.serverCode == "BUSYGROUP": completion(.success(()))
        case .failure(let error): completion(.failure(error))
        }
    }
}

/// The reads of one Redis: one `XREADGROUP GROUP g consumer COUNT count [BLOCK blockMs]
/// STREAMS calls… > …` over the apps asked for, on a connection of their own that carries
/// nothing else.
///
/// - The connection re-creates the group of every app in `apps` on each (re)connect before any
///   read, so `NOGROUP` does not stick after a Redis restart without persistence; after a
///   `NOGROUP` answer the groups of the apps read are re-created before the next read.
/// - Every reconnect after the first reports `onReadLost`, once the groups are re-created: a
///   hung Redis reads its input when it resumes, so a read in flight on the dropped connection
///   may still be served.
final class SingleStreamReads: StreamReads {
    let connection: RedisConnection
    private let group: String
    private let groupStartID: String
    var apps: [AppKeys] {
        didSet { appsByCallsKey = Dictionary(apps.map { ($0.calls, $0) }, uniquingKeysWith: { $1 }) }
    }
    private var appsByCallsKey: [String: AppKeys]
    var onReadLost: (() -> Void)?

    init(connection: RedisConnection, apps: [AppKeys], group: String, groupStartID: String) {
        self.connection = connection
        self.apps = apps
        self.group = group
        self.groupStartID = groupStartID
        appsByCallsKey = Dictionary(apps.map { ($0.calls, $0) }, uniquingKeysWith: { $1 })
        connection.onReady = { [unowned self] connection in
            for app in self.apps {
                createConsumerGroup(app, group: group, startID: groupStartID, on: connection) { _ in }
            }
            if connection.stats.ready > 1 { self.onReadLost?() }
        }
    }

    var ownLinks: [(name: String, connection: RedisConnection)] { [("read", connection)] }

    func start() { connection.start() }

    func close() { connection.close() }

    func read(apps: [AppKeys], consumer: String, count: Int, blockMs: Int64?,
              completion: @escaping (Result<[AppKeys: [StreamEntry]], RedisError>) -> Void) {
        var args = ["XREADGROUP", "GROUP", group, consumer, "COUNT", String(count)]
        if let blockMs { args += ["BLOCK", String(max(1, blockMs))] }
        args.append("STREAMS")
        args += apps.map(\.calls)
        args += Array(repeating: ">", count: apps.count)
        var lookup = appsByCallsKey
        for app in apps { lookup[app.calls] = app }
        let group = group, start = groupStartID, connection = connection
        connection.send(command: RedisCommand(args), blockMs: blockMs ?? 0, decodingInPlace: { reply in
            var out: [AppKeys: [StreamEntry]] = [:]
            for (key, entries) in try StreamReplies.read(reply) {
                guard let app = lookup[key] else { throw RedisError.unexpectedReply("XREADGROUP returned unknown stream \(key)") }
                out[app] = entries
            }
            return out
        }, completion: { (result: Result<[AppKeys: [StreamEntry]], RedisError>) in
            if case let .failure(error) = result, error.serverCode == "NOGROUP" {
                for app in apps { createConsumerGroup(app, group: group, startID: start, on: connection) { _ in } }
            }
            completion(result)
        })
    }
}
