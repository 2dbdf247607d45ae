// The Lua scripts of DeadLetterStore. Each operator action on one dead letter is one script,
// so it happens entirely or not at all; every key a script touches is in KEYS and lives in
// one app's hash slot. Arguments are checked in Swift beforehand.

enum DeadLetterLua {
    /// Reads a bounded step of a dead stream (`DeadLetterStore.range`): entries one small batch
    /// at a time, each batch no larger than the bytes left in the budget could hold at the
    /// whole-event limit, until count entries or the byte budget (names and values read) is
    /// reached. An event longer than the whole-event limit is cut to the kept prefix, and
    /// `event_bytes` (its length) is added after the entry's own fields (the last of a
    /// repeated name counts).
    /// KEYS: dead. ARGV: start, end (XRANGE order), count, byte budget, whole-event limit,
    /// kept-prefix bytes, 1 for newest first.
    /// Returns {1 when more may follow / 0 at the end of the range, entries as XRANGE gives them}.
    static let range = """
        local start, stop = ARGV[1], ARGV[2]
        local left, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
        local whole, prefix = tonumber(ARGV[5]), tonumber(ARGV[6])
        local newest = ARGV[7] == '1'
        local out, read, more = {}, 0, 0
        while left > 0 do
          local n = math.min(left, math.max(1, math.floor((budget - read) / whole)))
          local items
          if newest then items = redis.call('XREVRANGE', KEYS[1], stop, start, 'COUNT', n)
          else items = redis.call('XRANGE', KEYS[1], start, stop, 'COUNT', n) end
          for _, item in ipairs(items) do
            local fields = item[2]
            local cut = nil
            for i = 1, #fields, 2 do
              read = read + #fields[i] + #fields[i + 1]
              if fields[i] == 'event' and #fields[i + 1] > whole then
                cut = #fields[i + 1]
                fields[i + 1] = string.sub(fields[i + 1], 1, prefix)
              end
            end
            if cut then fields[#fields + 1] = 'event_bytes'; fields[#fields + 1] = tostring(cut) end
            out[#out + 1] = item
          end
          left = left - #items
          if #items < n then more = 0; break end
          more = 1
          if read >= budget then break end
          local last = items[#items][1]
          if newest then stop = '(' .. last else start = '(' .. last end
        end
        return {more, out}
        """

    /// Puts a dead letter's event back on the calls stream, marked as a replay and carrying the
    /// original call's deadline, records the accumulated history and that deadline in the
    /// replay ledger, forgets the recorded outcome and deletes the dead letter — only if the
    /// dead letter still exists (two operators replaying the same one replay it once).
    /// KEYS: calls, dead, ledger[, done]
    /// ARGV: dead entry id, event, replays (the new count), history JSON, ledger TTL s,
    /// call deadline (unix ms).
    /// Returns the new calls entry id, or false when the dead letter is gone.
    static let replay = """
        if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
        local id = redis.call('XADD', KEYS[1], '*', 'event', ARGV[2], 'replay', ARGV[1], 'replays', ARGV[3],
          'call_deadline', ARGV[6])
        redis.call('DEL', KEYS[3])
        redis.call('HSET', KEYS[3], 'replays', ARGV[3], 'history', ARGV[4], 'calls_entry', id, 'dead_entry', ARGV[1],
          'call_deadline', ARGV[6])
        redis.call('EXPIRE', KEYS[3], ARGV[5])
        if KEYS[4] then redis.call('DEL', KEYS[4]) end
        redis.call('XDEL', KEYS[2], ARGV[1])
        return id
        """

    /// Deletes dead letters and the replay ledgers whose history they continued.
    /// KEYS: dead, ledgers… ARGV: entry ids… Returns how many entries were deleted.
    static let purge = """
        local n = redis.call('XDEL', KEYS[1], unpack(ARGV))
        for i = 2, #KEYS do redis.call('DEL', KEYS[i]) end
        return n
        """

    /// Retention: removes entries older than max-age (Redis-server clock), then the oldest
    /// beyond max-entries. Exact trims, so what `pendingTrim` predicted is what goes.
    /// KEYS: dead. ARGV: max entries, max age ms.
    /// Returns {removed by age, removed by count, server time ms}.
    static let trim = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local cutoff = now - tonumber(ARGV[2])
        local byAge = 0
        if cutoff > 0 then byAge = redis.call('XTRIM', KEYS[1], 'MINID', cutoff .. '-0') end
        local byCount = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[1])
        return {byAge, byCount, now}
        """

    /// What a trim run `horizon` ms from now would remove, without removing anything.
    /// Counting the entries older than the cutoff reads them (streams have no rank), in pages,
    /// at most scan-limit of them.
    /// KEYS: dead. ARGV: max entries, max age ms, horizon ms, scan limit.
    /// Returns {length, by age, by count, server time ms, 1 when the count stopped at the limit}.
    static let pendingTrim = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local cutoff = now + tonumber(ARGV[3]) - tonumber(ARGV[2])
        local len = redis.call('XLEN', KEYS[1])
        local limit = tonumber(ARGV[4])
        local old, capped = 0, 0
        if cutoff > 0 and len > 0 then
          local start = '-'
          while true do
            local items = redis.call('XRANGE', KEYS[1], start, '(' .. cutoff .. '-0', 'COUNT', 500)
            old = old + #items
            if #items < 500 then break end
            if old >= limit then capped = 1; break end
            start = '(' .. items[#items][1]
          end
        end
        local byCount = math.max(0, len - old - tonumber(ARGV[1]))
        return {len, old, byCount, now, capped}
        """
}
