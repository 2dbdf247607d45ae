import EventLoop
import RedisClient

extension ConfigParser {
    /// `redis`: `url` (required), `prefix`, `tls`, and `sentinel` or `cluster` (config/README.md).
    func parseRedis(_ root: [String: Any]) -> RedisConfig {
        let path = JSONPath.root.appending("redis")
        guard let section = reader.section(root, "redis", in: .root) else { return RedisConfig(url: "") }
        reader.unknownKeys(section, at: path, known: ["url", "prefix", "tls", "sentinel", "cluster"])
        var config = RedisConfig(url: "")
        var url: RedisURL?
        if let (text, at) = reader.string(section, "url", in: path, required: true, example: "redis://127.0.0.1:6379/0") {
            // Checked by the parser the service uses; the URL is never echoed (it may carry a
            // password) and neither is the parser's message, which may quote it.
            url = try? RedisURL(parsing: text)
            if url != nil {
                config.url = text
            } else {
                reader.error(at, "is not a Redis URL (value not shown: it may hold a password)",
                             fix: "write redis://[USER:PASSWORD@]HOST:PORT/DB, rediss://… for TLS, or unix:///path/to/redis.sock")
            }
        }
        if let (prefix, at) = reader.string(section, "prefix", in: path, required: false, example: "pushgw") {
            if GatewayConfig.isName(prefix) {
                config.prefix = prefix
            } else {
                reader.error(at, "\(reader.quoted(prefix)) cannot start Redis keys: it must be \(GatewayConfig.nameRule)",
                             fix: "use a plain word such as \"pushgw\"")
            }
        }
        config.sentinel = parseSentinel(section, in: path, url: url)
        (config.clusterSeeds, config.clusterAllowedHosts) = parseCluster(section, in: path, url: url,
                                                                          withSentinel: section["sentinel"] != nil)
        config.tls = parseRedisTLS(section, in: path, used: url?.usesTLS == true || config.sentinel?.tls == true)
        return config
    }

    /// `redis.tls`: `ca_file`, `cert_file` + `key_file`, `server_name`, all optional. The
    /// files are checked as OpenSSL will use them: the CA bundle must load, and the
    /// certificate and key must load and match.
    private func parseRedisTLS(_ redis: [String: Any], in parent: JSONPath, used: Bool) -> RedisTLSOptions {
        let path = parent.appending("tls")
        guard let section = reader.section(redis, "tls", in: parent), !section.isEmpty else { return RedisTLSOptions() }
        reader.unknownKeys(section, at: path, known: ["ca_file", "cert_file", "key_file", "server_name"])
        if !used {
            reader.warning(path, "is not used: redis.url is not rediss:// and no sentinel is reached over TLS",
                           fix: "write rediss://HOST:PORT/DB in redis.url to use TLS, or remove redis.tls")
        }
        let caFile = reader.filePath(section, "ca_file", in: path, role: .caBundle, required: false,
                                     example: "/etc/ssl/certs/redis-ca.pem")
        if let caFile, !reader.hasProblem(at: path.appending("ca_file")) {
            do {
                _ = try TLSContext.client(caFile: caFile, alpn: nil)
            } catch {
                reader.error(path.appending("ca_file"), "\(caFile) is not a usable CA bundle: \(error)",
                             fix: "point it at the PEM certificate(s) of the CA that signed the Redis server's certificate")
            }
        }
        let hasCert = section["cert_file"] != nil, hasKey = section["key_file"] != nil
        var certFile: String?, keyFile: String?
        if hasCert || hasKey {
            certFile = reader.filePath(section, "cert_file", in: path, role: .certificate, required: true,
                                       example: "secrets/redis-client.pem")
            keyFile = reader.filePath(section, "key_file", in: path, role: .certificateKey, required: true,
                                      example: "secrets/redis-client.key")
        }
        if let certFile, let keyFile, !reader.hasProblem(at: path.appending("cert_file")),
           !reader.hasProblem(at: path.appending("key_file")) {
            do {
                _ = try TLSContext.client(caFile: caFile, certificate: .pem(certFile: certFile, keyFile: keyFile), alpn: nil)
            } catch {
                reader.error(path.appending("key_file"), "\(keyFile) cannot be used with \(certFile): \(error)",
                             fix: "give the private key of the certificate in cert_file (openssl x509 -noout -pubkey -in CERT and openssl pkey -pubout -in KEY must print the same key)")
            }
        }
        var serverName: String?
        if let (name, at) = reader.string(section, "server_name", in: path, required: false, example: "redis.internal") {
            if name.isEmpty || name.contains(where: { $0 == " " || $0 == "/" || $0 == ":" }) {
                reader.error(at, "\"\(name)\" is not a host name",
                             fix: "write the name the Redis server's certificate carries, such as \"redis.internal\"")
            } else {
                serverName = name
            }
        }
        guard (certFile == nil) == (keyFile == nil) else { return RedisTLSOptions(caFile: caFile, serverName: serverName) }
        return RedisTLSOptions(caFile: caFile, certFile: certFile, keyFile: keyFile, serverName: serverName)
    }

    /// `redis.sentinel`: `master` and `addresses` (required), `username`, `password`, `tls`,
    /// `allowed_hosts`.
    private func parseSentinel(_ redis: [String: Any], in parent: JSONPath, url: RedisURL?) -> RedisSentinelOptions? {
        let path = parent.appending("sentinel")
        guard redis["sentinel"] != nil, let section = reader.section(redis, "sentinel", in: parent) else { return nil }
        reader.unknownKeys(section, at: path, known: ["master", "addresses", "username", "password", "tls", "allowed_hosts"])
        if let url, case .unix = url.endpoint {
            reader.error(parent.appending("url"), "a unix socket cannot be combined with redis.sentinel",
                         fix: "write redis://[USER:PASSWORD@]ANY/DB (or rediss://) in redis.url: the sentinels give host and port")
        }
        var master: String?
        if let (name, at) = reader.string(section, "master", in: path, required: true, example: "mymaster") {
            if name.isEmpty || name.contains(where: \.isWhitespace) {
                reader.error(at, "\"\(name)\" is not a master name", fix: "write the name of `sentinel monitor NAME …`, such as \"mymaster\"")
            } else {
                master = name
            }
        }
        let addresses = parseSentinelAddresses(section, in: path)
        let username = reader.string(section, "username", in: path, required: false, example: "sentinel-user")?.0
        let password = reader.string(section, "password", in: path, required: false, example: "…")?.0
        let tls = reader.boolean(section, "tls", in: path, fallback: false)
        let allowed = parseAllowedHosts(section, in: path, beside: "the sentinels' hosts")
        guard let master, let addresses, let tls else { return nil }
        return RedisSentinelOptions(master: master, addresses: addresses, username: username, password: password, tls: tls,
                                    allowedHosts: allowed)
    }

    /// `redis.cluster`: `seeds` (required), the nodes asked for the slot map, and
    /// `allowed_hosts`.
    private func parseCluster(_ redis: [String: Any], in parent: JSONPath, url: RedisURL?,
                              withSentinel: Bool) -> (seeds: [Endpoint]?, allowedHosts: [HostPattern]?) {
        let path = parent.appending("cluster")
        guard redis["cluster"] != nil, let section = reader.section(redis, "cluster", in: parent) else { return (nil, nil) }
        reader.unknownKeys(section, at: path, known: ["seeds", "allowed_hosts"])
        if withSentinel {
            reader.error(path, "cannot be combined with redis.sentinel",
                         fix: "keep redis.cluster for Redis Cluster (its primaries fail over by themselves), or redis.sentinel for one primary under Sentinel")
        }
        if let url, case .unix = url.endpoint {
            reader.error(parent.appending("url"), "a unix socket cannot be combined with redis.cluster",
                         fix: "write redis://[USER:PASSWORD@]ANY/0 (or rediss://) in redis.url: the cluster gives hosts and ports")
        } else if let url, url.db != 0 {
            reader.error(parent.appending("url"), "names database \(url.db), but Redis Cluster has only database 0",
                         fix: "end redis.url with /0")
        }
        let seeds = parseAddresses(section, "seeds", in: path, of: "a cluster node",
                                   example: "[\"10.0.0.1:7000\", \"10.0.0.2:7000\", \"10.0.0.3:7000\"]")
        return (seeds, parseAllowedHosts(section, in: path, beside: "the seeds' hosts"))
    }

    /// `allowed_hosts` of `redis.cluster` or `redis.sentinel`: an array of host names, IP
    /// addresses and CIDR networks (`HostPattern`); nil when absent (and when it has a
    /// problem, which is reported: the config is then refused).
    private func parseAllowedHosts(_ section: [String: Any], in parent: JSONPath, beside configured: String) -> [HostPattern]? {
        guard let found = reader.lookup(section, "allowed_hosts", in: parent) else { return nil }
        let example = "[\"10.0.0.0/24\", \"redis-1.internal\"]"
        guard let list = found.value as? [Any] else {
            reader.error(found.path, "expected an array of host names, IP addresses or networks, found \(JSONKind(found.value).name)",
                         fix: "list where the nodes may be besides \(configured), such as \(example), or remove it")
            return nil
        }
        var patterns: [HostPattern] = []
        for (i, item) in list.enumerated() {
            guard let text = item as? String, let pattern = HostPattern(parsing: text) else {
                reader.error(found.path.appending(String(i)), "\(item) is not a host name, an IP address or a network",
                             fix: "write a name such as \"redis-1.internal\", an address such as \"10.0.0.5\", or a network such as \"10.0.0.0/24\"")
                continue
            }
            patterns.append(pattern)
        }
        return patterns.count == list.count ? patterns : nil
    }

    private func parseSentinelAddresses(_ sentinel: [String: Any], in parent: JSONPath) -> [RedisSentinelOptions.Address]? {
        parseAddresses(sentinel, "addresses", in: parent, of: "a sentinel",
                       example: "[\"10.0.0.1:26379\", \"10.0.0.2:26379\", \"10.0.0.3:26379\"]")
    }

    /// A non-empty array of `host:port` under `key`.
    private func parseAddresses(_ section: [String: Any], _ key: String, in parent: JSONPath, of what: String,
                                example: String) -> [Endpoint]? {
        let path = parent.appending(key)
        guard let found = reader.lookup(section, key, in: parent) else {
            reader.missing(path, example: example)
            return nil
        }
        guard let list = found.value as? [Any], !list.isEmpty else {
            reader.error(found.path, "expected a non-empty array of host:port, found \(JSONKind(found.value).name)",
                         fix: "list \(what == "a sentinel" ? "the sentinels" : "some nodes of the cluster"), such as \(example)")
            return nil
        }
        var addresses: [RedisSentinelOptions.Address] = []
        for (i, item) in list.enumerated() {
            guard let text = item as? String, let endpoint = Endpoint(parsing: text) else {
                reader.error(found.path.appending(String(i)), "\(item) is not host:port with a port in 1-65535",
                             fix: "write \(what)'s address, such as \(example.dropFirst().prefix { $0 != "," })")
                continue
            }
            addresses.append(endpoint)
        }
        return addresses.count == list.count ? addresses : nil
    }
}
