#!/usr/bin/env python3
"""Console previews over a large dead stream against a live `pushgw run` (PreviewLoadProcessTests).

  preview_load.py fill REDIS_PORT            writes 10,000 dead letters of app acme, 300 of them
                                             with a 1 MB event (as a gateway before the kept
                                             prefix wrote them), straight into pushgw:{acme}:dead
  preview_load.py run REDIS_PORT ADMIN_PORT TOKEN PID CALLS RATE
                                             measures app beta's calls (XADD -> its result on the
                                             results stream, seen by this client) three times:
                                             alone, while 4 clients load the console's previews
                                             of acme's dead letters back to back, and alone
                                             again; samples the gateway's VmRSS meanwhile

`run` prints {"before": {p50_ms, p99_ms, n}, "load": {...}, "after": {...}, "previews": N,
"preview_statuses": {STATUS: N}, "preview_rows_max": N, "previews_with_next": N (stopped at a
limit and linked to the next ones), "preview_seconds_max": S,
"rss_idle_mb": MB, "rss_max_mb": MB}.
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse

import redis

DEAD, CALLS, RESULTS = "pushgw:{acme}:dead", "pushgw:{beta}:calls", "pushgw:{beta}:results"
TOKEN = "ab" * 32
# What the 4 clients preview: the 300 large ones (every preview reads the whole stream), and
# every entry (the first 1,000).
QUERIES = ["/console/dead/preview?action=replay-all&app=acme&reason=invalid_event",
           "/console/dead/preview?action=replay-all&app=acme",
           "/console/dead/preview?action=purge-all&app=acme&reason=invalid_event",
           "/console/dead/preview?action=purge-all&app=acme"]


def fill(port):
    r = redis.Redis(port=port)
    attempts = json.dumps({"outcome": "dead_lettered", "app": "acme", "attempts": [
        {"t": 1764412340012, "channel": "voip", "status": 403, "reason": "InvalidProviderToken", "apns_id": "x" * 36}]})
    big = 0
    pipe = r.pipeline(transaction=False)
    for i in range(10_000):
        now = int(time.time() * 1000)
        if i % 33 == 16 and big < 300:
            big += 1
            head = '{"v":1,"id":"big-%d","type":"incoming_call","voip_token":"%s","pad":"' % (i, TOKEN)
            pipe.eval("return redis.call('XADD', KEYS[1], '*', 'event', ARGV[1] .. string.rep('x', 1048576) .. '\"}',"
                      " 'reason', ARGV[2], 'attempts', ARGV[3], 'first_failure_ms', ARGV[4], 'last_failure_ms', ARGV[4],"
                      " 'replays', '0', 'app', 'acme')", 1, DEAD, head,
                      "invalid_event: event: %d bytes, over the 65536-byte limit" % (len(head) + 1048578), attempts, now)
        else:
            event = json.dumps({"v": 1, "id": "small-%d" % i, "type": "incoming_call", "voip_token": TOKEN,
                                "voip": {"caller": "+15551234567", "callerName": "Alice"}})
            pipe.xadd(DEAD, {"event": event, "reason": "apns_credentials: InvalidProviderToken", "attempts": attempts,
                             "first_failure_ms": now, "last_failure_ms": now, "replays": "0", "app": "acme"})
        if i % 200 == 199:
            pipe.execute()
    pipe.execute()
    print(json.dumps({"dead": r.xlen(DEAD), "big": big, "used_memory_mb": r.info("memory")["used_memory"] // 2**20}))


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def calls(r, phase, count, rate):
    """Sends `count` calls at `rate` a second; returns their latencies (ms), XADD to result."""
    last = r.xrevrange(RESULTS, "+", "-", count=1)
    cursor = last[0][0] if last else b"0-0"
    sent, seen = {}, {}
    done = threading.Event()

    def read():
        nonlocal cursor
        reader = redis.Redis(port=r.connection_pool.connection_kwargs["port"])
        deadline = time.monotonic() + 60
        while len(seen) < count and time.monotonic() < deadline:
            for _, entries in reader.xread({RESULTS: cursor}, block=500) or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    result = json.loads(fields[b"result"])
                    if result.get("id") in sent and result["id"] not in seen:
                        seen[result["id"]] = (time.monotonic() - sent[result["id"]]) * 1000, result.get("outcome")
        done.set()

    reader = threading.Thread(target=read)
    reader.start()
    start = time.monotonic()
    for i in range(count):
        due = start + i / rate
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        call_id = "%s-%d" % (phase, i)
        event = json.dumps({"v": 1, "id": call_id, "type": "incoming_call", "voip_token": TOKEN,
                            "deadline": int(time.time() * 1000) + 30_000})
        sent[call_id] = time.monotonic()
        r.xadd(CALLS, {"event": event})
    done.wait(70)
    reader.join()
    latencies = sorted(ms for ms, _ in seen.values())
    delivered = sum(1 for _, outcome in seen.values() if outcome == "delivered_voip")

    def quantile(q):
        return round(latencies[max(0, int(len(latencies) * q + 0.999999) - 1)], 2) if latencies else None

    return {"n": len(latencies), "delivered": delivered, "p50_ms": quantile(0.5), "p99_ms": quantile(0.99),
            "max_ms": round(latencies[-1], 2) if latencies else None}


def sign_in(admin_port, token):
    conn = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=10)
    body = urllib.parse.urlencode({"token": token, "name": "preview-load"})
    conn.request("POST", "/console/signin", body, {"Content-Type": "application/x-www-form-urlencoded",
                                                   "Origin": "http://127.0.0.1:%d" % admin_port})
    response = conn.getresponse()
    response.read()
    cookie = response.getheader("Set-Cookie", "").split(";")[0]
    conn.close()
    if response.status != 303 or not cookie:
        sys.exit("sign-in failed: %d" % response.status)
    return cookie


def run(redis_port, admin_port, token, pid, count, rate):
    r = redis.Redis(port=redis_port)
    cookie = sign_in(admin_port, token)
    report = {"rss_idle_mb": round(rss_mb(pid), 1)}
    report["alone_s"] = {}
    for q in QUERIES[:2]:  # the purge previews read the same
        began = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=30)
        conn.request("GET", q, headers={"Cookie": cookie})
        conn.getresponse().read()
        conn.close()
        report["alone_s"][q.split("?")[1]] = round(time.monotonic() - began, 3)
    report["before"] = calls(r, "before", count, rate)

    stop = threading.Event()
    previews, statuses, rows_max, seconds_max, rss_max, went_on = [0], {}, [0], [0.0], [0.0], [0]
    lock = threading.Lock()

    def preview(path):
        while not stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=30)
            began = time.monotonic()
            try:
                conn.request("GET", path, headers={"Cookie": cookie})
                response = conn.getresponse()
                page = response.read().decode()
                status = str(response.status)
            except Exception as e:  # counted, and the test fails on any status but 200
                page, status = "", type(e).__name__
            finally:
                conn.close()
            with lock:
                previews[0] += 1
                statuses[status] = statuses.get(status, 0) + 1
                rows_max[0] = max(rows_max[0], page.count("<tr data-forecast="))
                went_on[0] += 'id="next-preview"' in page
                seconds_max[0] = max(seconds_max[0], time.monotonic() - began)

    def sample():
        while not stop.is_set():
            rss_max[0] = max(rss_max[0], rss_mb(pid))
            time.sleep(0.02)

    threads = [threading.Thread(target=preview, args=(q,)) for q in QUERIES] + [threading.Thread(target=sample)]
    for t in threads:
        t.start()
    report["load"] = calls(r, "load", count, rate)
    stop.set()
    for t in threads:
        t.join()
    report["after"] = calls(r, "after", count, rate)
    report.update({"previews": previews[0], "preview_statuses": statuses, "preview_rows_max": rows_max[0],
                   "previews_with_next": went_on[0],
                   "preview_seconds_max": round(seconds_max[0], 2), "rss_max_mb": round(rss_max[0], 1)})
    print(json.dumps(report))


if __name__ == "__main__":
    if sys.argv[1] == "fill":
        fill(int(sys.argv[2]))
    else:
        run(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]))
