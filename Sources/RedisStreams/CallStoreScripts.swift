// The Lua scripts of CallStore: each state change of a call event is one script, so it
// happens entirely or not at all (Redis runs a script atomically; arguments are checked in
// Swift beforehand so no command inside can fail halfway). Every key a script touches is
// passed in KEYS and, except for the consumer registry, lives in one app's hash slot.

enum CallStoreLua {
    /// The rules of the per-event result key (`AppKeys.result`), shared by the scripts that
    /// record results (`ResultEntry.Keying`; `ResultEntry.claimedOutcome` reads keys the same
    /// way in Swift). A result JSON starts with `{"outcome":"…",`.
    ///
    /// `recordOnce(key, json, ttl)` stores `json` unless a result claims the id already, and
    /// returns false when it stored it, else the first outcome. An invalid event's result
    /// (`dead_lettered` with reason `invalid_event: …`) claims nothing: it is replaced. One
    /// `SET … NX GET` (Redis 7.0) does the common case, a new id.
    /// `duplicateOf(json, first)` is the `duplicate` result of a record whose id was taken:
    /// outcome `duplicate`, `first_outcome`, then the record's own fields.
    static let resultRules = """
        local function recordOnce(key, json, ttl)
          local prev = redis.call('SET', key, json, 'NX', 'GET', 'EX', ttl)
          if not prev then return false end
          if string.sub(prev, 1, 27) == '{"outcome":"dead_lettered",'
              and string.find(prev, ',"reason":"invalid_event: ', 1, true) then
            redis.call('SET', key, json, 'EX', ttl)
            return false
          end
          return string.match(prev, '^{"outcome":"([%a_]+)"') or 'unknown'
        end
        local function duplicateOf(json, first)
          local head = '{"outcome":"duplicate","first_outcome":"' .. first .. '"'
          local comma = string.find(json, ',', 1, true)
          if string.sub(json, 1, 12) ~= '{"outcome":"' or not comma then return head .. '}' end
          return head .. string.sub(json, comma)
        end

        """

    /// Records outcomes once per event id and acknowledges their stream entries, for one
    /// or more events of one app.
    /// KEYS: calls, results, feedback, then per record its result key followed by its
    ///       invalid-token keys.
    /// ARGV: group, result TTL s, results maxlen, feedback maxlen, invalid-token TTL s, n, then
    ///       per record: entry id ('' = none), result JSON, keying (`once` or `duplicate`), m,
    ///       then m × (token, channel, reason, timestamp).
    /// Returns {r₁ … rₙ, acked count}: rᵢ = 1 when the record was written, else the outcome
    /// recorded first for its id (only its `duplicate` result was written).
    static let finish = resultRules + """
        local out, ids = {}, {}
        local a, k = 7, 4
        for r = 1, tonumber(ARGV[6]) do
          local entry, m = ARGV[a], tonumber(ARGV[a + 3])
          local first = false
          if ARGV[a + 2] == 'once' then first = recordOnce(KEYS[k], ARGV[a + 1], ARGV[2]) end
          local recorded = 1
          if first then
            recorded = first
            redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'result', duplicateOf(ARGV[a + 1], first))
          else
            redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'result', ARGV[a + 1])
            for i = 0, m - 1 do
              local b = a + 4 + 4 * i
              redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
                'token', ARGV[b], 'channel', ARGV[b + 1], 'reason', ARGV[b + 2], 'timestamp', ARGV[b + 3])
              redis.call('SET', KEYS[k + 1 + i], ARGV[b + 3], 'EX', ARGV[5])
            end
          end
          out[r] = recorded
          if entry ~= '' then ids[#ids + 1] = entry end
          a = a + 4 + 4 * m
          k = k + 1 + m
        end
        local acked = 0
        if #ids > 0 then
          acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
          redis.call('XDEL', KEYS[1], unpack(ids))
        end
        out[#out + 1] = acked
        return out
        """

    /// Writes a dead letter and its result once per event id, and acknowledges the entry.
    /// KEYS: calls, results, dead[, result key]
    /// ARGV: group, entry id ('' = none), result JSON, keying (`once` or `provisional`),
    ///       result TTL s, results maxlen, dead maxlen ('' = uncapped), event, reason, attempts,
    ///       first_failure_ms, last_failure_ms, replays, app.
    /// Returns {1 or the outcome recorded first (then only a `duplicate` result was written),
    ///          acked, dead entry id or false}.
    static let deadLetter = resultRules + """
        local recorded = 1
        if KEYS[4] then
          if ARGV[4] == 'provisional' then
            redis.call('SET', KEYS[4], ARGV[3], 'NX', 'EX', ARGV[5])
          else
            local first = recordOnce(KEYS[4], ARGV[3], ARGV[5])
            if first then
              recorded = first
              redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'result', duplicateOf(ARGV[3], first))
            end
          end
        end
        local deadID = false
        if recorded == 1 then
          local fields = {'event', ARGV[8], 'reason', ARGV[9], 'attempts', ARGV[10],
            'first_failure_ms', ARGV[11], 'last_failure_ms', ARGV[12], 'replays', ARGV[13], 'app', ARGV[14]}
          if ARGV[7] ~= '' then
            deadID = redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', unpack(fields))
          else
            deadID = redis.call('XADD', KEYS[3], '*', unpack(fields))
          end
          redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'result', ARGV[3])
        end
        local acked = 0
        if ARGV[2] ~= '' then
          acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
          redis.call('XDEL', KEYS[1], ARGV[2])
        end
        return {recorded, acked, deadID}
        """

    /// Puts an event back on the calls stream, forgets its recorded outcome and removes
    /// its dead letter. KEYS: calls, dead[, done]. ARGV: event, dead entry id ('' = none).
    /// Returns the new calls entry id.
    static let replay = """
        local id = redis.call('XADD', KEYS[1], '*', 'event', ARGV[1])
        if KEYS[3] then redis.call('DEL', KEYS[3]) end
        if ARGV[2] ~= '' then redis.call('XDEL', KEYS[2], ARGV[2]) end
        return id
        """

    /// Acknowledges and deletes entries. KEYS: calls. ARGV: group, ids… Returns acked count.
    static let acknowledge = """
        local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
        redis.call('XDEL', KEYS[1], unpack(ARGV, 2))
        return acked
        """

    /// Takes over pending entries idle ≥ min-idle whose owner is not live, scanning at most
    /// max-pages pages of XPENDING; and, when own-idle is given, the consumer's own entries
    /// idle ≥ own-idle (ones it left pending after an error). KEYS: calls.
    /// ARGV: group, consumer, min-idle ms, count, max-pages, own-idle ms ('' = none), n-live,
    ///       live names…
    /// Returns {claimed entries, requested ids, their delivery counts before the claim}.
    static let claim = """
        local live = {}
        local nLive = tonumber(ARGV[7])
        for i = 1, nLive do live[ARGV[7 + i]] = true end
        local ownIdle = tonumber(ARGV[6])
        local want = tonumber(ARGV[4])
        local pageSize = math.max(want, 100)
        local ids, counts = {}, {}
        local start = '-'
        for page = 1, tonumber(ARGV[5]) do
          local items = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[3], start, '+', pageSize)
          for _, p in ipairs(items) do
            if #ids < want and (not live[p[2]] or (ownIdle and p[2] == ARGV[2] and p[3] >= ownIdle)) then
              ids[#ids + 1] = p[1]
              counts[#counts + 1] = p[4]
            end
          end
          if #ids >= want or #items < pageSize then break end
          start = '(' .. items[#items][1]
        end
        if #ids == 0 then return {{}, {}, {}} end
        local claimed = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], unpack(ids))
        return {claimed, ids, counts}
        """

    /// Heartbeat: the consumer is live until Redis-server time + ttl. Also forgets consumers
    /// whose lease lapsed more than forget-ms ago, which keeps the set bounded.
    /// KEYS: consumers. ARGV: name, ttl ms, forget ms. Returns the server time in ms.
    static let heartbeat = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
        return now
        """

    /// The registry in one read: {live consumers, consumers whose lease lapsed but are still
    /// registered} (Redis-server clock). KEYS: consumers.
    static let registry = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        return {redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf'), redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)}
        """

    /// Removes the named consumers from the registry if their lease is still lapsed (one that
    /// heart-beat again meanwhile stays). KEYS: consumers. ARGV: names… Returns how many went.
    static let forgetLapsed = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local n = 0
        for _, name in ipairs(ARGV) do
          local score = redis.call('ZSCORE', KEYS[1], name)
          if score and tonumber(score) <= now then n = n + redis.call('ZREM', KEYS[1], name) end
        end
        return n
        """

    /// The consumers whose lease has not lapsed (Redis-server clock). KEYS: consumers.
    /// The backlog of several apps in one command: for each calls stream, XLEN and the
    /// pending count (0 when its group does not exist yet). Read-only; the keys are in
    /// several slots, so like the consumer registry it needs a single Redis.
    /// KEYS: calls streams. ARGV: group. Returns {len1, pending1, len2, pending2, …}.
    static let backlogs = """
        local out = {}
        for i, key in ipairs(KEYS) do
          out[#out + 1] = redis.call('XLEN', key)
          local ok, summary = pcall(redis.call, 'XPENDING', key, ARGV[1])
          if ok and type(summary) == 'table' then out[#out + 1] = summary[1] else out[#out + 1] = 0 end
        end
        return out
        """

    static let liveConsumers = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
        """
}
