// The Lua scripts of the durable retry schedule (RetrySchedule.swift). Each state change of a
// retry is one script: Redis runs it without interleaving anything else, so a gateway killed
// at any moment sees it either not run or run entirely.
//
// Redis does not roll a script back when a command inside fails, so each script checks what
// it can first and orders its writes so that a failure can only stop it between two retries,
// never inside one (an XADD before the ZREM and HDEL of the same retry). The commands used
// cannot fail on keys of the right type, and every key here is pushgw's own.
//
// Every script touches one app's keys only (one hash slot, so they run on Redis Cluster too);
// the due index, shared by the apps, is kept beside them by separate commands
// (RetrySchedule.swift says how it stays right).
//
// Lifecycle of one retry, all on the app's keys:
//
//     calls entry (pending) ──schedule──▶ retry ZSET + data ──move (due)──▶ new calls entry
//                                               └──────cancel──────▶ removed, outcome `cancelled`

enum RetryLua {
    /// Schedules a retry, releases the call's in-flight claim from its result key (the call
    /// leaves the process; the retry takes the claim again when it comes back; a result there
    /// stays) and acknowledges the calls entry it replaces, if that entry is still pending for
    /// this consumer and the call is not cancelled.
    /// KEYS: calls, retry, data, byCall, cancelled marker of the call, result key of the call.
    /// ARGV: group, consumer, entry id (= the retry id), due ms, call id, raw event, state JSON,
    ///       the state's MAC (`RetrySigner`).
    /// Returns 'scheduled', 'cancelled' (nothing written: the caller finishes the call as
    /// cancelled) or 'not_owned' (nothing written: the entry was taken over or finished by
    /// another consumer, which carries on with it).
    static let schedule = CallStoreLua.resultValues + CallStoreLua.acknowledging + """
        local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[3], ARGV[3], 1)
        if #p == 0 or p[1][2] ~= ARGV[2] then return 'not_owned' end
        if redis.call('EXISTS', KEYS[5]) == 1 then return 'cancelled' end
        local id = ARGV[3]
        redis.call('HSET', KEYS[3], id .. ':state', ARGV[7], id .. ':event', ARGV[6], id .. ':call', ARGV[5], id .. ':mac', ARGV[8])
        redis.call('ZADD', KEYS[2], ARGV[4], id)
        redis.call('HSET', KEYS[4], ARGV[5], id)
        local claim = redis.call('GET', KEYS[6])
        if claim and isClaim(claim) then redis.call('DEL', KEYS[6]) end
        acknowledge(KEYS[1], ARGV[1], {id})
        return 'scheduled'
        """

    /// Moves up to `limit` retries due at `now` back to the calls stream, oldest due first:
    /// per retry XADD calls * event <raw> retry <state> retry_mac <mac> (no `retry_mac` for a
    /// retry scheduled before MACs were kept: the router dead-letters it), then ZREM + HDEL.
    /// KEYS: calls, retry, data, byCall. ARGV: now ms, limit.
    /// Returns {due times of the moved retries, earliest remaining due time or false,
    ///          ids dropped for missing data}.
    static let move = """
        local due = redis.call('ZRANGE', KEYS[2], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, tonumber(ARGV[2]), 'WITHSCORES')
        local moved, dropped = {}, {}
        for i = 1, #due, 2 do
          local id = due[i]
          local v = redis.call('HMGET', KEYS[3], id .. ':state', id .. ':event', id .. ':call', id .. ':mac')
          if v[1] and v[2] then
            local fields = {'event', v[2], 'retry', v[1]}
            if v[4] then fields[5], fields[6] = 'retry_mac', v[4] end
            redis.call('XADD', KEYS[1], '*', unpack(fields))
            moved[#moved + 1] = due[i + 1]
          else
            dropped[#dropped + 1] = id
          end
          redis.call('ZREM', KEYS[2], id)
          redis.call('HDEL', KEYS[3], id .. ':state', id .. ':event', id .. ':call', id .. ':mac')
          if v[3] and redis.call('HGET', KEYS[4], v[3]) == id then redis.call('HDEL', KEYS[4], v[3]) end
        end
        local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
        return {moved, first[2] or false, dropped}
        """

    /// The retry last scheduled for a call, read only. KEYS: retry, data, byCall. ARGV: call id.
    /// Returns {} or {retry id, due ms, state, raw event}.
    static let pending = """
        local id = redis.call('HGET', KEYS[3], ARGV[1])
        if not id then return {} end
        local score = redis.call('ZSCORE', KEYS[1], id)
        if not score then return {} end
        local v = redis.call('HMGET', KEYS[2], id .. ':state', id .. ':event')
        if not v[1] or not v[2] then return {} end
        return {id, score, v[1], v[2]}
        """

    /// A `call_cancelled` event (or a `call_answered`, `call_declined`: any end of the ring) in
    /// one step: sets the call's cancellation marker, removes the
    /// given retries of the call that are still scheduled and records the call's outcome for
    /// each (once per call id: its result key, whose in-flight claim, if any, the outcome
    /// replaces), records the cancel event's own result (once: its own result key; a
    /// `duplicate` result if a cancel of the call was recorded already) and acknowledges the
    /// cancel entry. Result keys follow `CallStoreLua.resultRules`. When the call's result says
    /// it was delivered (the cancel came too late to stop the ring), the cancel's result says
    /// so: `cancelled_after` (that outcome) and `delivered_at` (the entry's time + the call's
    /// `latency_ms`: when APNs accepted the push), right after `outcome`, where
    /// `OutcomeRecord.json()` writes them.
    ///
    /// The due index is left alone: a score that pointed at a removed retry costs the mover one
    /// empty move, which refreshes it.
    /// KEYS: calls, results, the cancel event's result key (`AppKeys.cancelResult`), cancelled marker, retry, data,
    ///       byCall, result key of the call, the current outcomes bucket[, webhooks stream when the
    ///       app sends webhooks].
    /// ARGV: group, cancel entry id ('' = none), cancel result JSON, marker TTL s, result window s
    ///       (the cancel's own result is kept whole for it),
    ///       results maxlen, call id, n, then n × (retry id, the call's result JSON), then the
    ///       marker's value (`1` for a cancel, `answered:DEVICE`, `declined:DEVICE`): the first
    ///       end of the call keeps its value, a later one renews its TTL only; then `webhooks` or
    ///       '', the detail TTL s of the call's result, the bucket's EXPIREAT and the code of
    ///       `cancelled`: a call's outcome recorded here leaves its compact record
    ///       (`CallStoreLua.resultRules`).
    /// Returns {cancel recorded (1; 0: its `duplicate` result written; -1: nothing written, its
    /// entry's own result is there already), acked, removed retry ids, retry ids whose outcome
    /// was recorded, the call's delivered outcome or '', its delivery time or -1}.
    static let cancel = CallStoreLua.recordThenAcknowledge + """
        local removed, recorded = {}, {}
        local n = tonumber(ARGV[8])
        sendsWebhooks(ARGV[10 + 2 * n])
        if not redis.call('SET', KEYS[4], ARGV[9 + 2 * n] or '1', 'EX', ARGV[4], 'NX') then
          redis.call('EXPIRE', KEYS[4], ARGV[4])
        end
        for i = 0, n - 1 do
          local id, json = ARGV[9 + 2 * i], ARGV[10 + 2 * i]
          if redis.call('ZREM', KEYS[5], id) == 1 then
            removed[#removed + 1] = id
            redis.call('HDEL', KEYS[6], id .. ':state', id .. ':event', id .. ':call', id .. ':mac')
            if redis.call('HGET', KEYS[7], ARGV[7]) == id then redis.call('HDEL', KEYS[7], ARGV[7]) end
            if recordOnce(KEYS[8], json, ARGV[11 + 2 * n]) then
              appendResult(KEYS[2], ARGV[6], json)
              recorded[#recorded + 1] = id
              rememberOutcome(ARGV[7], ARGV[13 + 2 * n])
            end
          end
        end
        writeOutcomes(KEYS[9], ARGV[12 + 2 * n])
        local json, after, at = ARGV[3], nil, nil
        local call = redis.call('GET', KEYS[8])
        if call then
          after = string.match(call, '^{"outcome":"(delivered_[a-z]+)"')
          local entryMs = string.match(call, ',"entry":"(%d+)%-')
          local latency = string.match(call, ',"latency_ms":(%d+)')
          -- The end's own outcome (cancelled, answered, declined) stays first.
          local head = string.match(json, '^{"outcome":"[a-z_]+"')
          if after and head and entryMs and latency then
            at = tonumber(entryMs) + tonumber(latency)
            json = head .. ',"cancelled_after":"' .. after .. '","delivered_at":' .. string.format('%d', at)
              .. string.sub(json, #head + 1)
          elseif after and head then
            json = head .. ',"cancelled_after":"' .. after .. '"' .. string.sub(json, #head + 1)
          end
        end
        local cancelRecorded = 0
        local own = recordResultOnce(KEYS[3], json, ARGV[5], KEYS[2], ARGV[6])
        if own == 1 then
          cancelRecorded = 1
          appendResult(KEYS[2], ARGV[6], json)
        elseif own == 0 then
          cancelRecorded = -1
        end
        local acked = 0
        if ARGV[2] ~= '' then acked = acknowledge(KEYS[1], ARGV[1], {ARGV[2]}) end
        return {cancelRecorded, acked, removed, recorded, after or '', at or -1}
        """
}
