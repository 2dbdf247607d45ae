// The Lua scripts of DeadLetterStore. Each operator action on one dead letter is one script,
// so it happens entirely or not at all; every key a script touches is in KEYS and lives in
// one app's hash slot. Arguments are checked in Swift beforehand.

enum DeadLetterLua {
    /// Reads a bounded step of a dead stream (`DeadLetterStore.range`): entries one at a time
    /// (an entry's size is known only once it is read, so no read takes more than one entry
    /// past the budget; measured, a batch of one costs no more per entry than larger ones),
    /// until count entries or the byte budget (names and values read) is reached. An event
    /// longer than the whole-event limit is cut to the kept prefix, and
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
          local items
          if newest then items = redis.call('XREVRANGE', KEYS[1], stop, start, 'COUNT', 1)
          else items = redis.call('XRANGE', KEYS[1], start, stop, 'COUNT', 1) end
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
          if #items == 0 then more = 0; break end
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
    /// dead letter still exists (two operators replaying the same one replay it once), and
    /// only while the calls stream holds fewer than ARGV[7] entries the routers' group has not
    /// read (its length less the group's pending entries; all of it before the group exists):
    /// a replay never queues ahead of live calls beyond that (0: no such bound).
    /// KEYS: calls, dead, ledger[, done, then the app's live outcomes buckets]
    /// ARGV: dead entry id, event, replays (the new count), history JSON, ledger TTL s,
    /// call deadline (unix ms), the unread entries it yields at, the routers' group, the device
    /// of one device's dead letter ('' for a whole event's; else the entry's `replayed_device`),
    /// the event id ('' = none): its compact record (`AppKeys.outcomes`) is forgotten with its result.
    /// Returns the new calls entry id, false when the dead letter is gone, or the count of
    /// unread entries when it yielded (nothing written).
    static let replay = """
        if #redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1]) == 0 then return false end
        local yieldAt = tonumber(ARGV[7])
        if yieldAt > 0 then
          local pending = redis.pcall('XPENDING', KEYS[1], ARGV[8])
          local inFlight = 0
          if type(pending) == 'table' and pending.err == nil then inFlight = pending[1] end
          local unread = redis.call('XLEN', KEYS[1]) - inFlight
          if unread >= yieldAt then return unread end
        end
        local id
        if ARGV[9] ~= '' then
          id = redis.call('XADD', KEYS[1], '*', 'event', ARGV[2], 'replay', ARGV[1], 'replays', ARGV[3],
            'call_deadline', ARGV[6], 'replayed_device', ARGV[9])
        else
          id = redis.call('XADD', KEYS[1], '*', 'event', ARGV[2], 'replay', ARGV[1], 'replays', ARGV[3],
            'call_deadline', ARGV[6])
        end
        redis.call('DEL', KEYS[3])
        redis.call('HSET', KEYS[3], 'replays', ARGV[3], 'history', ARGV[4], 'calls_entry', id, 'dead_entry', ARGV[1],
          'call_deadline', ARGV[6])
        redis.call('EXPIRE', KEYS[3], ARGV[5])
        if KEYS[4] then redis.call('DEL', KEYS[4]) end
        for b = 5, #KEYS do redis.call('HDEL', KEYS[b], ARGV[10]) end
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

    /// The size helpers of the retention scripts. `oldestHolding(key, skip, excess, budget)`
    /// reads the stream from its oldest entry in pages of 100, passes over `skip` entries
    /// (summing their bytes), then counts the entries whose field names and values add up to
    /// the excess left once the passed-over ones are subtracted (a function of that sum), at
    /// most `budget` bytes and 10,000 entries read in all. Returns {entries counted, the last
    /// one's id or false, 1 when it stopped at its budget}. `after(id)` is the smallest id
    /// above `id` (an exclusive XTRIM MINID bound).
    static let sizeHelpers = """
        local function oldestHolding(key, skip, excess, budget)
          local start, read, seen, counted, freed, last, skipped = '-', 0, 0, 0, 0, false, 0
          while true do
            local items = redis.call('XRANGE', key, start, '+', 'COUNT', 100)
            if #items == 0 then return {counted, last, 0} end
            for _, item in ipairs(items) do
              local size = 0
              for i = 1, #item[2] do size = size + #item[2][i] end
              read = read + size
              seen = seen + 1
              if seen <= skip then
                skipped = skipped + size
              else
                if excess(skipped) <= 0 then return {counted, last, 0} end
                counted = counted + 1
                freed = freed + size
                last = item[1]
                if freed >= excess(skipped) then return {counted, last, 0} end
              end
              if read >= budget or seen >= 10000 then return {counted, last, 1} end
            end
            start = '(' .. items[#items][1]
          end
        end
        local function after(id)
          local ms, seq = string.match(id, '^(%d+)-(%d+)$')
          return ms .. '-' .. string.format('%.0f', tonumber(seq) + 1)
        end
        local function used(key)
          return redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0') or 0
        end

        """

    /// Retention: removes entries older than max-age (Redis-server clock), then the oldest
    /// beyond max-entries, exactly; then, while the stream's memory (`MEMORY USAGE … SAMPLES 0`)
    /// is over max-bytes, the oldest entries whose fields add up to the excess, reading at most
    /// 8 MiB of entries per run (a larger excess goes over several runs).
    /// KEYS: dead. ARGV: max entries, max age ms, max bytes.
    /// Returns {removed by age, removed by count, server time ms, removed by size}.
    static let trim = sizeHelpers + """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        local cutoff = now - tonumber(ARGV[2])
        local byAge = 0
        if cutoff > 0 then byAge = redis.call('XTRIM', KEYS[1], 'MINID', cutoff .. '-0') end
        local byCount = redis.call('XTRIM', KEYS[1], 'MAXLEN', ARGV[1])
        local limit, bySize = tonumber(ARGV[3]), 0
        local over = used(KEYS[1]) - limit
        if over > 0 then
          local found = oldestHolding(KEYS[1], 0, function() return over end, 8388608)
          if found[1] > 0 then bySize = redis.call('XTRIM', KEYS[1], 'MINID', after(found[2])) end
        end
        return {byAge, byCount, now, bySize}
        """

    /// What a trim run `horizon` ms from now would remove, without removing anything.
    /// Counting the entries older than the cutoff reads them (streams have no rank), in pages,
    /// at most scan-limit of them; so does counting those the size limit would remove, after
    /// the age and count trims (their field bytes subtracted from the excess: an estimate
    /// within an entry or so, Redis keeping each entry with some overhead).
    /// KEYS: dead. ARGV: max entries, max age ms, horizon ms, scan limit, max bytes.
    /// Returns {length, by age, by count, server time ms, 1 when a count stopped at its limit,
    /// by size}.
    static let pendingTrim = sizeHelpers + """
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
        local bySize = 0
        local over = used(KEYS[1]) - tonumber(ARGV[5])
        if over > 0 and capped == 0 then
          local skip = old + byCount
          if skip < limit then
            local found = oldestHolding(KEYS[1], skip, function(skipped) return over - skipped end, 8388608)
            bySize = found[1]
            if found[3] == 1 then capped = 1 end
          else
            capped = 1
          end
        end
        return {len, old, byCount, now, capped, bySize}
        """
}
