// RedisClient: a generic Redis client on the process's loop. Connections that keep themselves
// connected over TCP, a unix socket or TLS (`RedisConnection` and its state machine: hiredis
// formats the commands and parses the replies, the bytes travel on EventLoop's `TLSStream`),
// the primary that sentinels name (`RedisSentinels`), Redis Cluster (`RedisCluster` and its
// state machine: slot map, refreshes, redirects, node trust, the server's version), scripts,
// replies, URLs, and the topology a store sends on (`RedisTopology`: one connection or a
// cluster).
// Owns: connections, their handshake and failover, the RESP wire, cluster routing. Must not
// name a key of pushgw or of an app, nor know about calls: what the keys hold, and every
// command on them, is CallStorage's, above this module.
