"""Redis memory per call, by what the call leaves in Redis (bench/redis-sizing.sh starts the
servers and pushgw; docs/operations.md, "Redis sizing", quotes what this prints).

Runs one kind of call at a time through the live gateway, --calls of each, and measures after
each kind has finished: Redis' used_memory growth per call, and MEMORY USAGE of the keys the
kind wrote (per key for the per-call keys, per entry for the streams). The kinds:

  delivered   a VoIP push APNs accepts: result key (the defaults: the whole result for the
              24 h window) + results stream entry
  gone        a VoIP token APNs calls Unregistered, then the alert: + feedback entry
              + known-invalid token key (24 h)
  cancelled   a call_cancelled for a call not seen yet: cancellation marker (24 h)
              + the cancel's result key + results entry
  dead        an invalid event: dead-letter entry (retention) + provisional result key
              + results entry
  waiting     a call waiting for a VoIP retry (APNs 503, retry due in 5-10 min): the retry
              schedule's ZSET member and data hash fields, until it is due
  backlog     an entry no gateway has read yet (an app without a gateway): the calls stream
Then what a call holds for the idempotency window with the compact record (app size-window,
retention.result_detail_s 900): --calls delivered calls with 36-character ids (UUIDs, as
producers send them), and the drop of used_memory when their result keys (the detail, kept
result_detail_s) and then their outcomes buckets (the compact record, kept the window) are
deleted, per call; the target for the latter is <= 120 B.
"""
import argparse, json, sys, time, uuid
import redis

p = argparse.ArgumentParser()
p.add_argument("--redis-port", type=int, required=True)
p.add_argument("--calls", type=int, default=5000)
a = p.parse_args()
N = a.calls
r = redis.Redis(port=a.redis_port)
OK, FAILING, ALERT = "0a" * 16, "0c" * 16, "0d" * 16


def key(app, name):
    return "pushgw:{%s}:%s" % (app, name)


def used():
    return int(r.info("memory")["used_memory"])


def usage(k):
    return int(r.memory_usage(k, samples=0) or 0)


def call(i, app, **fields):
    e = {"v": 1, "id": "%s-%d" % (app, i), "type": "incoming_call", "voip_token": OK,
         "deadline": int(time.time() * 1000) + 1_200_000, "voip": {"caller": "+15551234567", "callerName": "Alice"}}
    e.update(fields)
    return json.dumps(e, separators=(",", ":"))


def add(app, events):
    pipe = r.pipeline(transaction=False)
    for ev in events:
        pipe.xadd(key(app, "calls"), {"event": ev})
    pipe.execute()


def wait(what, done, limit_s=300):
    end = time.time() + limit_s
    while time.time() < end:
        if done():
            return
        time.sleep(0.2)
    sys.exit("redis-sizing: gave up waiting for %s" % what)


def results(app):
    return r.xlen(key(app, "results"))


rows = []


def row(kind, before, per_key):
    rows.append((kind, (used() - before) / N, per_key))


# delivered
before = used()
add("size-ok", [call(i, "size-ok") for i in range(N)])
wait("delivered results", lambda: results("size-ok") >= N)
time.sleep(0.5)
def buckets(app):
    return list(r.scan_iter(match=key(app, "outcomes:*"), count=1000))
row("delivered", before, [("result key", usage(key("size-ok", "result:size-ok-7"))),
                          ("compact record", sum(usage(k) for k in buckets("size-ok")) / N),
                          ("results entry", usage(key("size-ok", "results")) / N),
                          ("calls stream left (entries deleted)", usage(key("size-ok", "calls")) / N)])

# gone: a distinct dead token per call (the simulator's default scenario is unregistered)
before = used()
add("size-gone", [call(i, "size-gone", voip_token="0e%030x" % i, alert_token=ALERT) for i in range(N)])
wait("gone results", lambda: results("size-gone") >= N)
time.sleep(0.5)
invalid = [k for k in r.scan_iter(match=key("size-gone", "*"), count=1000) if b":invalid" in k or b":known" in k]
row("gone", before, [("result key", usage(key("size-gone", "result:size-gone-7"))),
                     ("results entry", usage(key("size-gone", "results")) / N),
                     ("feedback entry", usage(key("size-gone", "feedback")) / N),
                     ("known-invalid token key", usage(invalid[0]) if invalid else 0)])

# cancelled
before = used()
add("size-cancel", [json.dumps({"v": 1, "id": "size-cancel-%d" % i, "type": "call_cancelled"}) for i in range(N)])
wait("cancel results", lambda: results("size-cancel") >= N)
time.sleep(0.5)
row("cancelled", before, [("cancel's result key", usage(key("size-cancel", "cancel-result:size-cancel-7"))),
                          ("cancellation marker", usage(key("size-cancel", "cancelled:size-cancel-7"))),
                          ("results entry", usage(key("size-cancel", "results")) / N)])

# dead
before = used()
add("size-dead", [call(i, "size-dead", voip_token="not-hex") for i in range(N)])
wait("dead-letter results", lambda: results("size-dead") >= N)
time.sleep(0.5)
row("dead", before, [("dead-letter entry", usage(key("size-dead", "dead")) / N),
                     ("result key (provisional)", usage(key("size-dead", "result:size-dead-7"))),
                     ("results entry", usage(key("size-dead", "results")) / N)])

# waiting for a retry
before = used()
add("size-wait", [call(i, "size-wait", voip_token=FAILING) for i in range(N)])
wait("retries scheduled", lambda: r.zcard(key("size-wait", "retry")) >= N)
time.sleep(0.5)
row("waiting", before, [("retry schedule member", usage(key("size-wait", "retry")) / N),
                        ("retry data (state, event, call id, MAC)", usage(key("size-wait", "retry:data")) / N),
                        ("retry by call", usage(key("size-wait", "retry:byCall")) / N)])

# backlog: no gateway reads this app
before = used()
add("size-backlog", [call(i, "size-backlog") for i in range(N)])
row("backlog", before, [("calls stream entry", usage(key("size-backlog", "calls")) / N)])

# held for the window: 36-character ids
ids = [str(uuid.uuid4()) for _ in range(N)]
add("size-window", [call(0, "size-window", id=i) for i in ids])
wait("window results", lambda: results("size-window") >= N)
time.sleep(0.5)
before = used()
for i in range(0, N, 500):
    r.delete(*[key("size-window", "result:" + x) for x in ids[i:i + 500]])
detail = (before - used()) / N
before = used()
held = buckets("size-window")
if held:
    r.delete(*held)
compact = (before - used()) / N

info = r.info("memory")
print("redis-sizing: %d calls of each kind, Redis %s, maxmemory-policy %s" % (N, r.info("server")["redis_version"],
                                                                            info["maxmemory_policy"]))
print("%-10s %12s   %s" % ("kind", "bytes/call", "by key (MEMORY USAGE, bytes per key or per entry)"))
for kind, per_call, keys in rows:
    print("%-10s %12.0f   %s" % (kind, per_call, ", ".join("%s %.0f" % (name, size) for name, size in keys)))
print("held for the idempotency window, per call (%d calls with 36-character ids, %d bucket(s)): compact record %.1f B "
      "(target <= 120 B); the detail (result key, kept result_detail_s) %.0f B" % (N, len(held), compact, detail))
