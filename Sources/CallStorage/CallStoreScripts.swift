// The Lua scripts of CallStore: each state change of a call event is one script, so it
// happens entirely or not at all (Redis runs a script atomically; arguments are checked in
// Swift beforehand so no command inside can fail halfway). Every key a script touches is
// passed in KEYS and, except for the consumer registry, lives in one app's hash slot.

enum CallStoreLua {
    /// What a per-event result key (`AppKeys.result`) holds, shared by every script that reads
    /// or writes one (`ResultEntry.claimedOutcome` reads values the same way in Swift, and
    /// `CallStore.lookup` a claim's holder): nothing; an in-flight claim, `in_flight:` + the consumer routing the call
    /// (`isClaim`); or a result JSON, which starts with `{"outcome":"…",`. An invalid event's
    /// result (`dead_lettered` with reason `invalid_event: …`, `isProvisional`) claims nothing:
    /// a later event with its id takes the key over.
    static let resultValues = """
        local function isClaim(value)
          return string.sub(value, 1, 10) == 'in_flight:'
        end
        local function isProvisional(value)
          return string.sub(value, 1, 27) == '{"outcome":"dead_lettered",'
            and string.find(value, ',"reason":"invalid_event: ', 1, true) ~= nil
        end

        """

    /// The recording rules of the result key, on top of `resultValues`.
    ///
    /// `recordOnce(key, json, ttl)` stores `json` unless a result claims the id already, and
    /// returns true when it stored it; else false and the first outcome, or false alone when
    /// the result there is this record's own calls entry's (`ownResult`: the entry was
    /// delivered again after its result was written, e.g. claimed back while a hung Redis had
    /// the record still to run; nothing is to be written for it). It replaces an in-flight
    /// claim (the call's own, or one a lapsed consumer left) and an invalid event's result.
    /// One `SET … GET` does the common case, a call whose claim the lookup took; an outcome
    /// already there is put back (`KEEPTTL`), which only a duplicate costs.
    /// `duplicateOf(json, first)` is the `duplicate` result of a record whose id was taken:
    /// outcome `duplicate`, `first_outcome`, then the record's own fields.
    /// `appendResult(results, maxlen, json)` appends a result to the results stream and, when the
    /// script called `sendsWebhooks('webhooks')` first (the app has webhooks on), to the app's
    /// webhooks stream, which the caller then passes as the last key (`AppKeys.webhooks`), with
    /// the results entry's id.
    /// `recordResultOnce(key, json, ttl, results, maxlen)` applies `recordOnce` and, when the id
    /// was taken, appends the `duplicate` result to the results stream; it returns 1 when the
    /// caller writes the record (`appendResult` and what goes with it), the first outcome when
    /// only the duplicate was written, 0 when nothing is to be written (`ownResult`).
    /// The compact idempotency record (`AppKeys.outcomes`): `rememberOutcome(id, code)` for each
    /// call whose record is written (its code from `CompactOutcome`; '' = none: a result kept
    /// whole for the window), then once at the end `writeOutcomes(bucket, at)`: one HSET of
    /// them all into the current bucket and its EXPIREAT (unix s, the same for every write of
    /// the bucket). A call's result key then holds its detail for `resultDetailSeconds` only.
    static let resultRules = resultValues + """
        local function ownResult(prev, json)
          local entry = string.match(json, ',"entry":"([^"]*)"')
          return entry ~= nil and string.match(prev, ',"entry":"([^"]*)"') == entry
        end
        local function recordOnce(key, json, ttl)
          local prev = redis.call('SET', key, json, 'GET', 'EX', ttl)
          if not prev or isClaim(prev) or isProvisional(prev) then return true end
          redis.call('SET', key, prev, 'KEEPTTL')
          if ownResult(prev, json) then return false end
          return false, string.match(prev, '^{"outcome":"([%a_]+)"') or 'unknown'
        end
        local function duplicateOf(json, first)
          local head = '{"outcome":"duplicate","first_outcome":"' .. first .. '"'
          local comma = string.find(json, ',', 1, true)
          if string.sub(json, 1, 12) ~= '{"outcome":"' or not comma then return head .. '}' end
          return head .. string.sub(json, comma)
        end
        local webhooks = false
        local function sendsWebhooks(flag)
          if flag == 'webhooks' then webhooks = KEYS[#KEYS] end
        end
        local function appendResult(results, maxlen, json)
          local id = redis.call('XADD', results, 'MAXLEN', '~', maxlen, '*', 'result', json)
          if webhooks then redis.call('XADD', webhooks, '*', 'result', json, 'results_entry', id) end
        end
        -- XADDs one dead letter to `stream` (capped near `maxlen` unless it is ''): every
        -- script's dead letter has these fields, `device` and the part-kept event's `bytes` and
        -- `sha` only when not ''. Returns its entry id.
        local function addDeadLetter(stream, maxlen, event, reason, attempts, first, last, replays, app, device, bytes, sha)
          local fields = {'event', event, 'reason', reason, 'attempts', attempts,
            'first_failure_ms', first, 'last_failure_ms', last, 'replays', replays, 'app', app}
          if device ~= '' then fields[#fields + 1] = 'device'; fields[#fields + 1] = device end
          if bytes ~= '' then
            fields[#fields + 1] = 'event_bytes'; fields[#fields + 1] = bytes
            fields[#fields + 1] = 'event_sha256'; fields[#fields + 1] = sha
          end
          if maxlen ~= '' then return redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', unpack(fields)) end
          return redis.call('XADD', stream, '*', unpack(fields))
        end
        local function recordResultOnce(key, json, ttl, results, maxlen)
          local write, first = recordOnce(key, json, ttl)
          if first then
            appendResult(results, maxlen, duplicateOf(json, first))
            return first
          end
          if write then return 1 end
          return 0
        end
        local outcomes = {}
        local function rememberOutcome(id, code)
          if code ~= '' then
            outcomes[#outcomes + 1] = id
            outcomes[#outcomes + 1] = code
          end
        end
        local function writeOutcomes(bucket, at)
          if #outcomes == 0 then return end
          for i = 1, #outcomes, 4000 do
            redis.call('HSET', bucket, unpack(outcomes, i, math.min(i + 3999, #outcomes)))
          end
          redis.call('EXPIREAT', bucket, at)
        end

        """

    /// `acknowledge(calls, group, ids)`: XACK then XDEL of calls entries, after what they
    /// caused is written in the same script, so an entry leaves the group's pending list and
    /// the stream together, never before its record. Returns how many were pending.
    static let acknowledging = """
        local function acknowledge(calls, group, ids)
          if #ids == 0 then return 0 end
          local acked = redis.call('XACK', calls, group, unpack(ids))
          redis.call('XDEL', calls, unpack(ids))
          return acked
        end

        """

    /// The rule of every script that finishes a calls entry: record its result once per event
    /// id (`resultRules`), then acknowledge the entry (`acknowledging`).
    static let recordThenAcknowledge = resultRules + acknowledging

    /// Records outcomes once per event id and acknowledges their stream entries, for one
    /// or more events of one app (`recordOnce`: the outcome replaces the call's in-flight claim).
    /// KEYS: calls, results, feedback, the current outcomes bucket, then per record its result
    ///       key followed by its invalid-token keys.
    ///       When the app sends webhooks, its webhooks stream last.
    /// ARGV: group, result window s (the TTL of a result kept whole), results maxlen, feedback
    ///       maxlen, invalid-token TTL s, n, the guard's TTL ('' = no tallies: below), `webhooks`
    ///       or '', the dead letters' app and maxlen (below), the detail TTL s, the bucket's
    ///       EXPIREAT, the length of the result keys' prefix, then per record: entry id
    ///       ('' = none), result JSON, keying (`once` or `duplicate`), its outcome code ('' =
    ///       none: its result is kept whole for the window, no compact record; else the
    ///       result's TTL is the detail's and the code goes to the bucket, field = the id
    ///       read from its key), m, then m × (token,
    ///       channel, reason, timestamp, environment). An environment names
    ///       where a token of the other environment was accepted (`environment_mismatch`): the
    ///       feedback entry carries it, and the token is not marked invalid.
    /// ARGV[7] is '' unless the batch carries ring receipts' tallies (`RingTally`, the guard
    /// against iOS's silent VoIP ban, docs/protocol.md); with them, ARGV[7] is the guard's TTL
    /// s, KEYS[5] the app's calls without a receipt (`AppKeys.callsWithoutReceipt`), KEYS[6]
    /// its suspected tokens' set, the per-record keys from KEYS[7], and after each
    /// record's feedback a kind: '' (nothing), 'c' (a call's rings: suspect-after, t, then
    /// t × (token, '1' silent or '0' rang); KEYS t × (silent count, suspicion mark, silent
    /// ring)), 'r' (a receipt's own record; KEYS its silent ring). A call's rings, when it was
    /// written: a ring that rang removes its token's count and mark; a silent one counts one
    /// more (its token kept under its silent-ring key, for a late receipt) unless the app's
    /// calls without any receipt have reached suspect-after (its backend sent none: the
    /// silence says nothing of the token), and at suspect-after marks the token (unix ms, once:
    /// `SET NX`), lists it, and writes one feedback entry, reason `voip_suspected_blocked`. A
    /// call where some device rang, and a receipt's own record, reset the app's count; a call
    /// whose rings were all silent adds one. A receipt takes its silent ring's token.
    /// ARGV[9] is '' unless the batch carries devices' dead letters (`FinishRecord.deadLetters`);
    /// with them, ARGV[9] is the app, ARGV[10] the dead stream's maxlen ('' = none), after each
    /// record's tally (or feedback) comes d, then d × (event, reason, attempts, first failure
    /// ms, last failure ms, replays, device, event bytes, event SHA-256), and a record with
    /// d > 0 has the dead stream as its last key. Each is XADDed to the dead stream when the
    /// record is written (never for a duplicate's answer or an own result already there).
    /// Returns {r₁ … rₙ, acked count}: rᵢ = 1 when the record was written, the outcome
    /// recorded first for its id when only its `duplicate` result was written, 0 when nothing
    /// was written (its entry's own result is there already: `ownResult`); with tallies also
    /// {…, the app's calls without a receipt after the batch (false: no call's tally), the
    /// tokens marked, the tokens a late receipt took}.
    static let finish = recordThenAcknowledge + """
        sendsWebhooks(ARGV[8])
        local out, ids = {}, {}
        local a, k = 14, 5
        local deadApp = ARGV[9] ~= '' and ARGV[9]
        local guard = ARGV[7] ~= '' and ARGV[7]
        local prefixLength = tonumber(ARGV[13])
        local without, marked, late = false, {}, {}
        if guard then k = 7 end
        for r = 1, tonumber(ARGV[6]) do
          local entry, json, code, m = ARGV[a], ARGV[a + 1], ARGV[a + 3], tonumber(ARGV[a + 4])
          local recorded = 1
          if ARGV[a + 2] == 'once' then
            local ttl = ARGV[2]
            if code ~= '' then ttl = ARGV[11] end
            recorded = recordResultOnce(KEYS[k], json, ttl, KEYS[2], ARGV[3])
          else
            local prev = redis.call('GET', KEYS[k])
            if prev and ownResult(prev, json) then recorded = 0 end
          end
          if recorded == 1 then
            if code ~= '' then rememberOutcome(string.sub(KEYS[k], prefixLength + 1), code) end
            appendResult(KEYS[2], ARGV[3], json)
            for i = 0, m - 1 do
              local b = a + 5 + 5 * i
              if ARGV[b + 4] == '' then
                redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
                  'token', ARGV[b], 'channel', ARGV[b + 1], 'reason', ARGV[b + 2], 'timestamp', ARGV[b + 3])
                redis.call('SET', KEYS[k + 1 + i], ARGV[b + 3], 'EX', ARGV[5])
              else
                redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
                  'token', ARGV[b], 'channel', ARGV[b + 1], 'reason', ARGV[b + 2], 'timestamp', ARGV[b + 3],
                  'environment', ARGV[b + 4])
              end
            end
          end
          out[r] = recorded
          if entry ~= '' then ids[#ids + 1] = entry end
          a = a + 5 + 5 * m
          k = k + 1 + m
          if guard then
            local kind = ARGV[a]
            if kind == 'c' then
              local after, t = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
              if recorded == 1 then
                local heard = false
                for j = 0, t - 1 do if ARGV[a + 4 + 2 * j] == '0' then heard = true end end
                if heard then
                  redis.call('DEL', KEYS[5])
                  without = 0
                else
                  without = tonumber(redis.call('GET', KEYS[5]) or '0') + 1
                  redis.call('SET', KEYS[5], without, 'EX', guard)
                end
                for j = 0, t - 1 do
                  local token, silent = ARGV[a + 3 + 2 * j], ARGV[a + 4 + 2 * j]
                  local count, mark, ring = KEYS[k + 3 * j], KEYS[k + 3 * j + 1], KEYS[k + 3 * j + 2]
                  if silent == '0' then
                    redis.call('DEL', count)
                    if redis.call('DEL', mark) == 1 then redis.call('ZREM', KEYS[6], token) end
                  elseif without < after then
                    redis.call('SET', ring, token, 'EX', guard)
                    local n = tonumber(redis.call('GET', count) or '0') + 1
                    if n < after then
                      redis.call('SET', count, n, 'EX', guard)
                    else
                      redis.call('DEL', count)
                      local clock = redis.call('TIME')
                      local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
                      if redis.call('SET', mark, now, 'NX', 'EX', guard) then
                        redis.call('ZADD', KEYS[6], now + 1000 * tonumber(guard), token)
                        redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*',
                          'token', token, 'channel', 'voip', 'reason', 'voip_suspected_blocked', 'timestamp', now)
                        marked[#marked + 1] = token
                      end
                    end
                  end
                end
              end
              a = a + 3 + 2 * t
              k = k + 3 * t
            elseif kind == 'r' then
              if recorded == 1 then
                local token = redis.call('GET', KEYS[k])
                if token then
                  redis.call('DEL', KEYS[k])
                  late[#late + 1] = token
                end
                redis.call('DEL', KEYS[5])
                without = 0
              end
              a = a + 1
              k = k + 1
            else
              a = a + 1
            end
          end
          if deadApp then
            local d = tonumber(ARGV[a])
            if d > 0 then
              if recorded == 1 then
                for j = 0, d - 1 do
                  local b = a + 1 + 9 * j
                  addDeadLetter(KEYS[k], ARGV[10], ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5],
                    deadApp, ARGV[b + 6], ARGV[b + 7], ARGV[b + 8])
                end
              end
              k = k + 1
            end
            a = a + 1 + 9 * d
          end
        end
        writeOutcomes(KEYS[4], ARGV[12])
        out[#out + 1] = acknowledge(KEYS[1], ARGV[1], ids)
        if guard then
          out[#out + 1] = without
          out[#out + 1] = marked
          out[#out + 1] = late
        end
        return out
        """

    /// Clears what the guard against iOS's silent VoIP ban holds of VoIP tokens that rang
    /// (`CallStore.clearVoipSuspicion`; a receipt that came after its call's record).
    /// KEYS: the suspected tokens' set, then per token its silent count and its mark. ARGV: the tokens.
    /// Returns how many marks went.
    static let clearVoipSuspicion = """
        local n = 0
        for i, token in ipairs(ARGV) do
          redis.call('DEL', KEYS[2 * i])
          if redis.call('DEL', KEYS[2 * i + 1]) == 1 then
            redis.call('ZREM', KEYS[1], token)
            n = n + 1
          end
        end
        return n
        """

    /// Writes a dead letter and its result once per event id (`recordOnce`; an invalid event's
    /// `provisional` result is keyed only where the key is free, so it never displaces a claim
    /// or a result), and acknowledges the entry.
    /// KEYS: calls, results, dead[, result key, the current outcomes bucket][, webhooks stream
    ///       when the app sends webhooks]
    /// ARGV: group, entry id ('' = none), result JSON, keying (`once` or `provisional`),
    ///       result window s, results maxlen, dead maxlen ('' = uncapped), event, reason, attempts,
    ///       first_failure_ms, last_failure_ms, replays, app, event_bytes and event_sha256 (''
    ///       when the event is whole), `webhooks` or '', the outcome code ('' = none: the result
    ///       is kept whole for the window; else for the detail TTL, with its compact record,
    ///       `rememberOutcome`), the detail TTL s, the bucket's EXPIREAT, the event id.
    /// Returns {1, or the outcome recorded first (then only a `duplicate` result was written),
    ///          or 0 (nothing written: its entry's own result is there already), acked,
    ///          dead entry id or false}.
    static let deadLetter = recordThenAcknowledge + """
        sendsWebhooks(ARGV[17])
        local recorded = 1
        local resultKey = KEYS[4]
        if webhooks and #KEYS == 4 then resultKey = nil end
        if resultKey then
          if ARGV[4] == 'provisional' then
            local prev = redis.call('SET', resultKey, ARGV[3], 'NX', 'GET', 'EX', ARGV[5])
            if prev and ownResult(prev, ARGV[3]) then recorded = 0 end
          else
            local ttl = ARGV[5]
            if ARGV[18] ~= '' then ttl = ARGV[19] end
            recorded = recordResultOnce(resultKey, ARGV[3], ttl, KEYS[2], ARGV[6])
            if recorded == 1 then
              rememberOutcome(ARGV[21], ARGV[18])
              writeOutcomes(KEYS[5], ARGV[20])
            end
          end
        end
        local deadID = false
        if recorded == 1 then
          deadID = addDeadLetter(KEYS[3], ARGV[7], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12], ARGV[13], ARGV[14], '',
            ARGV[15], ARGV[16])
          appendResult(KEYS[2], ARGV[6], ARGV[3])
        end
        local acked = 0
        if ARGV[2] ~= '' then acked = acknowledge(KEYS[1], ARGV[1], {ARGV[2]}) end
        return {recorded, acked, deadID}
        """

    /// `claimCounted(calls, group, consumer, minIdle, ids, counts, thisRun)`: XCLAIMs `ids` (with
    /// their delivery counts from XPENDING) for `consumer` and returns {claimed entries, their
    /// delivery counts after the claim}. An entry the consumer itself was given within the last
    /// `thisRun` ms (idle < thisRun: a delivery to this process, which is alive) keeps its count
    /// (`RETRYCOUNT`): claiming back one's own entry after a failed step is not a delivery, so
    /// Redis trouble never makes an entry poison. Every other claim counts one delivery: the
    /// previous owner died (or was a previous run of this consumer's name). `own[i]` says
    /// whether ids[i] is the consumer's own entry and `idle[i]` its idle time.
    static let claimCounted = """
        local function claimCounted(calls, group, consumer, minIdle, ids, counts, own, idle, thisRun)
          local counted, kept, after = {}, {}, {}
          for i, id in ipairs(ids) do
            if own[i] and thisRun and idle[i] < thisRun then
              local c = counts[i]
              kept[c] = kept[c] or {}
              table.insert(kept[c], id)
              after[i] = c
            else
              counted[#counted + 1] = id
              after[i] = counts[i] + 1
            end
          end
          local claimed = {}
          if #counted > 0 then
            for _, e in ipairs(redis.call('XCLAIM', calls, group, consumer, minIdle, unpack(counted))) do
              claimed[#claimed + 1] = e
            end
          end
          for c, same in pairs(kept) do
            local args = {calls, group, consumer, minIdle}
            for _, id in ipairs(same) do args[#args + 1] = id end
            args[#args + 1] = 'RETRYCOUNT'
            args[#args + 1] = c
            for _, e in ipairs(redis.call('XCLAIM', unpack(args))) do claimed[#claimed + 1] = e end
          end
          return claimed, after
        end

        """

    /// Takes over pending entries idle ≥ min-idle whose owner is not live, scanning at most
    /// max-pages pages of XPENDING; and, when own-idle is given, the consumer's own entries
    /// idle ≥ own-idle (ones it left pending after an error). KEYS: calls.
    /// ARGV: group, consumer, min-idle ms, count, max-pages, own-idle ms ('' = none), this-run ms
    ///       ('' = none: every claim counts; see `claimCounted`), n-live, live names…
    /// Returns {claimed entries, requested ids, their delivery counts after the claim}.
    static let claim = claimCounted + """
        local live = {}
        local nLive = tonumber(ARGV[8])
        for i = 1, nLive do live[ARGV[8 + i]] = true end
        local ownIdle = tonumber(ARGV[6])
        local want = tonumber(ARGV[4])
        local pageSize = math.max(want, 100)
        local ids, counts, own, idle = {}, {}, {}, {}
        local start = '-'
        for page = 1, tonumber(ARGV[5]) do
          local items = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[3], start, '+', pageSize)
          for _, p in ipairs(items) do
            if #ids < want and (not live[p[2]] or (ownIdle and p[2] == ARGV[2] and p[3] >= ownIdle)) then
              ids[#ids + 1] = p[1]
              counts[#counts + 1] = p[4]
              own[#own + 1] = p[2] == ARGV[2]
              idle[#idle + 1] = p[3]
            end
          end
          if #ids >= want or #items < pageSize then break end
          start = '(' .. items[#items][1]
        end
        if #ids == 0 then return {{}, {}, {}} end
        local claimed, after = claimCounted(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ids, counts, own, idle, tonumber(ARGV[7]))
        return {claimed, ids, after}
        """

    /// Heartbeat: the consumer is live until Redis-server time + ttl, held by this instance.
    /// Also forgets consumers whose lease lapsed more than forget-ms ago, which keeps the
    /// registry bounded, and proposes the retry signing key (kept if one is there).
    /// KEYS: consumers, instances, retry signing key. ARGV: name, ttl ms, forget ms, instance
    /// id, proposed signing key ('' = none).
    /// Returns {server time ms, the other instance that held the name's live lease, or false,
    /// the signing key}: a second process beating under the same name (each sees the other's id).
    static let heartbeat = """
        if ARGV[5] ~= '' then redis.call('SET', KEYS[3], ARGV[5], 'NX') end
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local other = false
        local holder = redis.call('HGET', KEYS[2], ARGV[1])
        if holder and holder ~= ARGV[4] then
          local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
          if lease and tonumber(lease) > now then other = holder end
        end
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
        local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[3]))
        if #old > 0 then
          redis.call('ZREM', KEYS[1], unpack(old))
          redis.call('HDEL', KEYS[2], unpack(old))
        end
        return {now, other, redis.call('GET', KEYS[3])}
        """

    /// Registers a consumer at start: takes the name's lease for this instance unless another
    /// instance holds a live one (then writes nothing), and proposes the retry signing key.
    /// KEYS: consumers, instances, retry signing key. ARGV: name, ttl ms, instance id, proposed key ('' = none).
    /// Returns {1, live consumers, the signing key} or {0, holding instance or false, its lease
    /// until ms}.
    static let register = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local lease = redis.call('ZSCORE', KEYS[1], ARGV[1])
        local holder = redis.call('HGET', KEYS[2], ARGV[1])
        if lease and tonumber(lease) > now and holder ~= ARGV[3] then
          return {0, holder, lease}
        end
        redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
        redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
        if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'NX') end
        return {1, redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf'), redis.call('GET', KEYS[3])}
        """

    /// Retires a consumer (clean shutdown) if this instance holds its lease: the lease is
    /// made to lapse now (Redis-server time), not removed, so the other gateways' next claim
    /// round sees a lapsed consumer and takes its pending entries over at once (a drain cut
    /// off by its timeout leaves some), then forgets it; a consumer no longer in the registry
    /// would wait for their full sweep, and one lapsed long ago would be forgotten by the
    /// next heartbeat first. KEYS: consumers, instances. ARGV: name, instance id.
    static let retire = """
        local holder = redis.call('HGET', KEYS[2], ARGV[1])
        if holder and holder ~= ARGV[2] then return 0 end
        redis.call('HDEL', KEYS[2], ARGV[1])
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        return redis.call('ZADD', KEYS[1], 'XX', 'CH', now, ARGV[1])
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

    /// Claims back the consumer's own pending entries except those it names as still being
    /// routed, in several apps at once: entries whose delivery it never saw (a reply lost with
    /// a dropped connection) or left pending after a failed step, which keep their delivery
    /// count, and a previous run's under the same name, which count one more (`claimCounted`).
    /// Read-only where nothing is found; like the backlog script it spans several slots, so it
    /// needs a single Redis.
    /// KEYS: calls streams. ARGV: group, consumer, count, this-run ms, then per stream: n, n
    /// excluded ids.
    /// Returns per stream what `claim` returns.
    static let claimOwn = claimCounted + """
        local want = tonumber(ARGV[3])
        local thisRun = tonumber(ARGV[4])
        local out = {}
        local a = 5
        for k = 1, #KEYS do
          local n = tonumber(ARGV[a])
          local skip = {}
          for i = a + 1, a + n do skip[ARGV[i]] = true end
          a = a + n + 1
          local items = redis.call('XPENDING', KEYS[k], ARGV[1], '-', '+', want + n, ARGV[2])
          local ids, counts, own, idle = {}, {}, {}, {}
          for _, p in ipairs(items) do
            if not skip[p[1]] and #ids < want then
              ids[#ids + 1] = p[1]
              counts[#counts + 1] = p[4]
              own[#own + 1] = true
              idle[#idle + 1] = p[3]
            end
          end
          if #ids == 0 then
            out[k] = {{}, {}, {}}
          else
            local claimed, after = claimCounted(KEYS[k], ARGV[1], ARGV[2], 0, ids, counts, own, idle, thisRun)
            out[k] = {claimed, ids, after}
          end
        end
        return out
        """

    /// The in-flight claims of a lookup's `incoming_call`s, in one step on the app's keys
    /// (`CallStore.lookup` sends it right after the `MGET` of the lookup's other keys, in the
    /// same round trip). Per call's result key: its compact record's code from the first live
    /// outcomes bucket that has one (an app with the compact record); with a code the call is
    /// done and nothing is claimed, the key read as it is (a result while the detail lasts).
    /// Else the claim, `in_flight:` + the consumer, PX the claim TTL, taken unless the key holds
    /// a result or a claim already (one `SET … NX GET` either way); an invalid event's result is
    /// taken over (it claims nothing).
    /// Returns per key 1 when this step took the claim; else what the key held: a result, or the
    /// claim of the consumer routing the call (this one, for a copy of a call it routes, or
    /// another one, whose lease the caller checks in the registry, in another slot, and takes a
    /// lapsed one's claim over with `takeOverClaims`; never with a code); false when it held
    /// neither. Then, only when there are buckets, the code (false: none).
    /// KEYS: the result keys, then the live outcomes buckets.
    /// ARGV: consumer, claim TTL ms, the number of buckets, the length of the result keys' prefix.
    static let claimCalls = resultValues + """
        local nb, prefixLength = tonumber(ARGV[3]), tonumber(ARGV[4])
        local nc = #KEYS - nb
        local mine = 'in_flight:' .. ARGV[1]
        local codes = {}
        -- The ids only when there are buckets to ask (an app with the compact record).
        if nb > 0 then
          local ids = {}
          for k = 1, nc do ids[k] = string.sub(KEYS[k], prefixLength + 1) end
          for b = nc + 1, #KEYS do
            local found = redis.call('HMGET', KEYS[b], unpack(ids))
            for k = 1, nc do
              if not codes[k] and found[k] then codes[k] = found[k] end
            end
          end
        end
        local out = {}
        for k = 1, nc do
          local code = codes[k] or false
          local held = false
          if code then
            local value = redis.call('GET', KEYS[k])
            if value and not isClaim(value) then held = value end
          else
            held = redis.call('SET', KEYS[k], mine, 'NX', 'GET', 'PX', ARGV[2])
            if not held then
              held = 1
            elseif isProvisional(held) then
              redis.call('SET', KEYS[k], mine, 'PX', ARGV[2])
              held = 1
            end
          end
          out[#out + 1] = held
          if nb > 0 then out[#out + 1] = code end
        end
        return out
        """

    /// Takes over the in-flight claims of consumers whose lease lapsed: each result key still
    /// holding the named consumer's claim gets this consumer's, PX the claim TTL (named as its
    /// own holder, a consumer renews its claims: `CallStore.renewClaims`).
    /// KEYS: result keys. ARGV: consumer, claim TTL ms, then per key the lapsed holder.
    /// Returns per key 1 (taken over) or 0 (the claim changed meanwhile: a result, or another claim).
    static let takeOverClaims = """
        local taken = {}
        for k = 1, #KEYS do
          if redis.call('GET', KEYS[k]) == 'in_flight:' .. ARGV[2 + k] then
            redis.call('SET', KEYS[k], 'in_flight:' .. ARGV[1], 'PX', ARGV[2])
            taken[k] = 1
          else
            taken[k] = 0
          end
        end
        return taken
        """

    /// The consumers whose lease has not lapsed (Redis-server clock). KEYS: consumers.
    static let liveConsumers = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
        """
}
