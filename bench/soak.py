"""The producer and the observer of `make soak` (bench/soak.sh starts the servers and pushgw).

Writes --rate call events a second for --seconds to pushgw:{acme}:calls, with mixed outcomes
(VoIP delivered, VoIP token gone then alert, APNs 503 then alert after retries, deadline passed
then alert, invalid events dead-lettered, cancels), reads the results stream as a producer
would, and prints one line a minute: pushgw's RSS and open file descriptors, Redis' memory per
event written so far (used_memory above its start, over the events written), and the p50/p99
of latency_ms (XADD -> the APNs answer that finished the call) of the calls finished that minute.
At the end it waits for the last results and checks one result per event.
"""
import argparse, collections, json, os, threading, time
import redis

p = argparse.ArgumentParser()
p.add_argument("--redis-port", type=int, required=True)
p.add_argument("--gateway-pid", type=int, required=True)
p.add_argument("--rate", type=int, default=1000)
p.add_argument("--seconds", type=int, default=600)
a = p.parse_args()

CALLS, RESULTS = "pushgw:{acme}:calls", "pushgw:{acme}:results"
OK, GONE, FAILING, ALERT = "0a" * 16, "0b" * 16, "0c" * 16, "0d" * 16


def event(i, now_ms):
    """The i-th event: its kind follows i modulo 100."""
    k = i % 100
    e = {"v": 1, "id": f"s-{i}", "type": "incoming_call", "voip_token": OK, "alert_token": ALERT,
         "deadline": now_ms + 30_000, "voip": {"caller": "+15551234567", "callerName": "Alice"}}
    if k < 5:
        e["voip_token"] = GONE           # 410: feedback, then the alert (later: known invalid)
    elif k < 10:
        e["voip_token"] = FAILING        # 503 on every VoIP attempt: retried, then the alert
    elif k < 13:
        e["deadline"] = now_ms - 1_000   # the call stopped ringing: the missed-call alert only
    elif k < 15:
        e["voip_token"] = "xyz"          # invalid: dead-lettered with its reason
    elif k == 15:
        e = {"v": 1, "id": f"s-{i - 1}", "type": "call_cancelled"}  # cancels the call before it
    return json.dumps(e, separators=(",", ":"))


r = redis.Redis(port=a.redis_port)
base_memory = int(r.info("memory")["used_memory"])
written = 0
done = threading.Event()


def produce():
    global written
    start = time.time()
    total = a.rate * a.seconds
    batch = max(1, a.rate // 100)
    while written < total:
        due = min(total, int((time.time() - start) * a.rate) + batch)
        if due <= written:
            time.sleep(0.002)
            continue
        now_ms = int(time.time() * 1000)
        pipe = r.pipeline(transaction=False)
        for i in range(written, due):
            pipe.xadd(CALLS, {"event": event(i, now_ms)})
        pipe.execute()
        written = due
    done.set()


def rss_mb(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]


threading.Thread(target=produce, daemon=True).start()
reader = redis.Redis(port=a.redis_port, decode_responses=True)
last_id, minute, began = "0", 1, time.time()
latencies, outcomes, results, by_event = [], collections.Counter(), 0, collections.Counter()
print(f"{'min':>3} {'written':>8} {'results':>8} {'rss MB':>7} {'fds':>4} {'redis B/event':>13} {'p50 ms':>7} {'p99 ms':>7}  outcomes this minute")


def report():
    used = int(r.info("memory")["used_memory"])
    per_event = (used - base_memory) / max(1, written)
    fds = len(os.listdir(f"/proc/{a.gateway_pid}/fd"))
    mix = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    print(f"{minute:>3} {written:>8} {results:>8} {rss_mb(a.gateway_pid):>7.1f} {fds:>4} {per_event:>13.0f} "
          f"{pct(latencies, 0.5):>7.1f} {pct(latencies, 0.99):>7.1f}  {mix}", flush=True)


deadline_after_done = None
while True:
    for _, entries in reader.xread({RESULTS: last_id}, count=5000, block=200) or []:
        for entry_id, fields in entries:
            last_id = entry_id
            d = json.loads(fields["result"])
            results += 1
            by_event[d.get("id", "") + "/" + d.get("type", "")] += 1
            outcomes[d["outcome"]] += 1
            if "latency_ms" in d and d["outcome"] in ("delivered_voip", "delivered_alert"):
                latencies.append(d["latency_ms"])
    if time.time() - began >= 60 * minute:
        report()
        minute += 1
        latencies, outcomes = [], collections.Counter()
    if done.is_set():
        deadline_after_done = deadline_after_done or time.time() + 60
        if results >= written or time.time() > deadline_after_done:
            break
report()
twice = [k for k, n in by_event.items() if n > 1]
print(f"soak: {written} events written, {results} results, {len(twice)} events with more than one result, "
      f"{r.xlen(CALLS)} entries left in the calls stream")
