#!/usr/bin/env python3
"""The hostile-event corpus for a live `pushgw run` (HostileCorpusTests).

  hostile_events.py write PORT MANIFEST [SEED]   XADDs the corpus to pushgw:{acme}:calls
  hostile_events.py check PORT MANIFEST          prints a JSON report of what went wrong

`write` XADDs every hand-made case of the hostile-input study, each followed by a valid call,
then at least 2,000 events mutated from valid ones (seeded: the seed is printed, and SEED
replays a run), every fifth followed by a valid call. The manifest keeps what was written.

`check` accounts for every calls entry by the stream id its XADD returned, which every result
carries as `entry` (docs/protocol.md, How an event ends): the results stream must hold exactly
one result per entry and none for another; a `duplicate` result must name a first outcome
(ids are unique by construction, so none is expected, but one is an answer, not a lost event);
every dead letter must name its entry and hold the exact bytes of that entry's event (of one
over 65,536 bytes: its first 4,096, its length and its SHA-256), and
every `dead_lettered` result must have its dead letter; each hand-made case must end as
expected (dead-lettered with a reason naming its field, or delivered with its id), and every
valid call must be delivered by VoIP. It prints
{"entries": N, "results": N, "dead": N, "problems": [...]}.
"""
import hashlib
import json
import random
import sys
import time

import redis

CALLS, RESULTS, DEAD = "pushgw:{acme}:calls", "pushgw:{acme}:results", "pushgw:{acme}:dead"
MUTATIONS = 2000
TOKEN = "ab" * 32
INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


def tag(*parts):
    """A short hex tag: ids carry one, so that a mutated id cannot equal another entry's."""
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:8]


def event(**fields):
    """An event as JSON bytes, non-ASCII characters written raw (UTF-8), fields in order."""
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()


def call(id, **extra):
    return event(v=1, id=id, type="incoming_call", voip_token=TOKEN,
                 voip={"caller": "+15551234567", "callerName": "Alice"}, **extra)


def retry_state(call_id, now, **changes):
    """The internal `retry` field as pushgw writes it, with `changes` (raw JSON texts)."""
    state = {"alert_usable": "false", "attempts": '[{"channel":"voip","status":503,"t":%d}]' % (now - 900),
             "channel": '"voip"', "deadline": str(now + 30000), "due": str(now), "entry_time": str(now - 1000),
             "first_failure": str(now - 800), "id": json.dumps(call_id), "last_answer": str(now - 800), "made": "1", "v": "1"}
    state.update(changes)
    return ("{" + ",".join('"%s":%s' % (k, v) for k, v in sorted(state.items())) + "}").encode()


def hand_cases(now):
    """(name, fields, expectation): expectation ("dead", reason prefix) or ("delivered", id)."""
    cases = []

    def dead(name, fields, reason):
        cases.append((name, fields, ("dead", reason)))

    def delivered(name, fields, id):
        cases.append((name, fields, ("delivered", id)))

    # Long tokens: 16,040 hex digits truncated the request headers, 16,048 overflowed them.
    for digits in (16040, 16048, 60000):
        for key in ("voip_token", "alert_token"):
            id = "long-%s-%d-%s" % (key, digits, tag(key, digits))
            dead("%s of %d hex digits" % (key, digits),
                 {b"event": event(v=1, id=id, type="incoming_call", **{key: "ab" * (digits // 2)})},
                 "invalid_event: %s: %d hex digits, over the 400-digit limit" % (key, digits))
    # Forged internal retry fields.
    forged = [
        ("deadline Int64.max, entry_time -1000", {"deadline": str(INT64_MAX), "entry_time": "-1000"},
         "invalid_event: retry: deadline: 9223372036854775807 is not a unix time"),
        ("entry_time Int64.min", {"entry_time": str(INT64_MIN)}, "invalid_event: retry: entry_time: "),
        ("made Int64.max", {"made": str(INT64_MAX)}, "invalid_event: retry: made: 9223372036854775807 attempts"),
        ("made 0", {"made": "0"}, "invalid_event: retry: made: 0 attempts"),
        ("made of 60,000 digits", {"made": "9" * 60000}, "invalid_event: retry: made: unreadable: not JSON: number 9999"),
        ("due Int64.min", {"due": str(INT64_MIN)}, "invalid_event: retry: due: "),
        ("an attempt at Int64.max", {"attempts": '[{"channel":"voip","status":503,"t":%d}]' % INT64_MAX},
         "invalid_event: retry: attempts.t: 9223372036854775807 is not a unix time"),
        ("alert wait ending at Int64.max", {"channel": '"alert"', "cause": '"deadline"', "window_end": str(INT64_MAX)},
         "invalid_event: retry: window_end: 9223372036854775807 is not a unix time"),
        ("made as a string", {"made": '"1"'}, "invalid_event: retry: made: expected an integer, got string"),
        ("version 7", {"v": "7"}, "invalid_event: retry: version 7"),
        ("another call's state", {"id": '"somebody-else"'}, "invalid_event: retry: the saved state of call somebody-else"),
    ]
    for i, (name, changes, reason) in enumerate(forged):
        id = "forged-%d-%s" % (i, tag("forged", i))
        dead("retry: " + name, {b"event": call(id), b"retry": retry_state(id, now, **changes)}, reason)
    for name, retry, reason in [("not JSON", b"{made:", "invalid_event: retry: unreadable: not JSON"),
                                ("100 KB of text", b"x" * 100000, "invalid_event: retry: unreadable: not JSON")]:
        id = "forged-%s" % tag(name)
        dead("retry: " + name, {b"event": call(id), b"retry": retry}, reason)
    # Control, escape and bidi characters in ids and text: valid events, delivered.
    for i, text in enumerate(["\x1b[31mred\x1b[0m", "bell\x07", "\x1b]52;c;ZXZpbA==\x07", "c1\u009b31m",
                              "rtl\u202egpj.exe", "iso\u2066x\u2069", "lrm\u200e\u200f\u061c", "del\x7f", "nl\nx\r\t"]):
        id = "ctl-%d-%s-%s" % (i, text, tag("ctl", i))
        delivered("id with %r" % text, {b"event": event(v=1, id=id, type="incoming_call", voip_token=TOKEN,
                                                        alert_token=TOKEN, voip={"callerName": text},
                                                        alert={"title": text, "body": text})}, id)
    dead("type with an escape", {b"event": event(v=1, id="ctl-type-" + tag("t"), type="incoming_call\x1b[2J",
                                                 voip_token=TOKEN)},
         "invalid_event: type: unknown event type")
    # Huge numbers.
    dead("deadline of 60,000 digits", {b"event": call("num-1-" + tag(1))[:-1] + b',"deadline":' + b"9" * 60000 + b"}"},
         "invalid_event: deadline: not JSON: number 9999")
    dead("a 60,000-digit number in voip", {b"event": b'{"v":1,"id":"num-2-%s","type":"incoming_call","voip_token":"%s","voip":{"n":%s}}'
                                            % (tag(2).encode(), TOKEN.encode(), b"9" * 60000)},
         "invalid_event: voip.n: not JSON: number 9999")
    dead("v of 1e400", {b"event": b'{"v":1e400,"id":"num-3-%s","type":"incoming_call","voip_token":"ab"}' % tag(3).encode()},
         "invalid_event: v: not JSON: number 1e400 is out of range")
    dead("deadline Int64.max + 1", {b"event": call("num-4-" + tag(4), deadline=2**63)},
         "invalid_event: deadline: 9223372036854775808 is out of range")
    # Deep nesting.
    deep = b'{"a":' * 65 + b"1" + b"}" * 65
    dead("voip nested 65 levels", {b"event": call("deep-1-" + tag("d1"))[:-1] + b',"x":' + deep + b"}"},
         "invalid_event: x.a.a.a")
    dead("10,000 brackets", {b"event": b"[" * 10000}, "invalid_event: not JSON: nested deeper than 64 levels")
    # Wrong types.
    for name, fields, reason in [
        ("id a number", dict(v=1, id=42, type="incoming_call", voip_token=TOKEN), "invalid_event: id: expected a string"),
        ("type an array", dict(v=1, id="wt-1-" + tag(1), type=["incoming_call"], voip_token=TOKEN),
         "invalid_event: type: expected a string, got array"),
        ("voip_token an object", dict(v=1, id="wt-2-" + tag(2), type="incoming_call", voip_token={"t": TOKEN}),
         "invalid_event: voip_token: expected a string, got object"),
        ("sandbox a string", dict(v=1, id="wt-3-" + tag(3), type="incoming_call", voip_token=TOKEN, sandbox="yes"),
         "invalid_event: sandbox: expected a boolean"),
        ("deadline a string", dict(v=1, id="wt-4-" + tag(4), type="incoming_call", voip_token=TOKEN, deadline="soon"),
         "invalid_event: deadline: expected an integer"),
        ("voip an array", dict(v=1, id="wt-5-" + tag(5), type="incoming_call", voip_token=TOKEN, voip=[1]),
         "invalid_event: voip: expected an object, got array"),
        ("alert a string", dict(v=1, id="wt-6-" + tag(6), type="incoming_call", alert_token=TOKEN, alert="hi"),
         "invalid_event: alert: expected an object, got string"),
        ("v a string", dict(v="1", id="wt-7-" + tag(7), type="incoming_call", voip_token=TOKEN),
         "invalid_event: v: expected an integer, got string"),
        ("id of 129 characters", dict(v=1, id="i" * 129, type="incoming_call", voip_token=TOKEN),
         "invalid_event: id: 129 characters, over 128"),
        ("odd-length token", dict(v=1, id="wt-8-" + tag(8), type="incoming_call", voip_token="abc"),
         "invalid_event: voip_token: odd length (3 hex digits)"),
    ]:
        dead(name, {b"event": event(**fields)}, reason)
    # Duplicate keys: the last value wins, as JSONSerialization read them.
    dup = "dup-2-" + tag("dup")
    delivered("duplicate id", {b"event": b'{"v":1,"id":"dup-1","id":"%s","type":"incoming_call","voip_token":"%s"}'
                                % (dup.encode(), TOKEN.encode())}, dup)
    dup3 = "dup-3-" + tag("dup3")
    delivered("duplicate voip_token, the bad one first",
              {b"event": b'{"v":1,"id":"%s","type":"incoming_call","voip_token":"zz","voip_token":"%s"}'
               % (dup3.encode(), TOKEN.encode())}, dup3)
    # Not an event at all.
    dead("empty", {b"event": b""}, "invalid_event: not JSON: empty")
    dead("no event field", {b"evnt": call("nofield-" + tag("nf"))}, "invalid_event: event: the stream entry has no field")
    dead("null", {b"event": b"null"}, "invalid_event: event: expected a JSON object, got null")
    dead("a raw NUL in the id", {b"event": b'{"v":1,"id":"nul\x00-%s","type":"incoming_call","voip_token":"ab"}' % tag("nul").encode()},
         "invalid_event: id: not JSON: unescaped control character")
    rng = random.Random(7)
    dead("1 MB of random bytes", {b"event": bytes(rng.randrange(256) for _ in range(1 << 20))},
         "invalid_event: event: 1048576 bytes, over the 65536-byte limit")
    dead("1 KB of random bytes", {b"event": b"{" + bytes(rng.randrange(256) for _ in range(1000)) + b"\xff"},
         "invalid_event: event: not valid UTF-8 at byte")
    # Invalid UTF-8: refused, not read as U+FFFD.
    utf = b'{"v":1,"id":"utf-1-%s","type":"incoming_call","voip_\xfftoken":"%s","alert_token":"%s"}' % (
        tag("u1").encode(), TOKEN.encode(), TOKEN.encode())
    dead("a bad byte inside the key voip_token", {b"event": utf}, "invalid_event: event: not valid UTF-8 at byte %d" % utf.index(b"\xff"))
    for bad in (b"\xff", b"\xfe", b"\xc0\xaf", b"\xed\xa0\x80"):
        ev = b'{"v":1,"id":"utf-2-%s-%s","type":"incoming_call","voip_token":"%s"}' % (tag("u2").encode(), bad, TOKEN.encode())
        dead("an id holding %r" % bad, {b"event": ev}, "invalid_event: event: not valid UTF-8 at byte %d" % ev.index(bad))
    # A caller name the alert cannot hold (180 family emoji, 25 bytes each): the alert is
    # shortened, the VoIP push goes.
    for i, alert in enumerate((None, {"title": "t", "body": "\U0001F468\u200D\U0001F469\u200D\U0001F467" * 400})):
        id = "emoji-%d-%s" % (i, tag("emoji", i))
        fields = dict(v=1, id=id, type="incoming_call", voip_token=TOKEN, alert_token=TOKEN,
                      voip={"caller": "+15551234567", "callerName": "\U0001F468\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466" * 180})
        if alert:
            fields["alert"] = alert
        delivered("180 family emoji in callerName" + (", and an alert body of 7 KB" if alert else ""), {b"event": event(**fields)}, id)
    # Emoji: a valid caller name of 128 characters in a 128-character id.
    emoji = "\U0001F600" * 128
    delivered("an id of 128 emoji", {b"event": event(v=1, id=emoji, type="incoming_call", voip_token=TOKEN)}, emoji)
    return cases


HOSTILE = [b"\x1b[2J", b"\x1b]52;c;ZXZpbA==\x07", "\u202e".encode(), "\u009b".encode(), b"\xff", b"\xc3", b"\xed\xa0\x80",
           b"\x00", b"9" * 60000, b"1e400", b'"', b"\\", b"{", b"[", b"}", b"]", b",", b":", "\U0001F600".encode() * 50,
           b"\\u0000", b"\\ud800", b"null", b"true", b"-0", b"ab" * 8024, b"-9223372036854775809", b"\x7f"]


def templates(n):
    """Valid events to mutate; ids carry a tag so that one changed byte makes a new id."""
    id = "m%dx%s" % (n, tag("m", n))
    return [
        event(v=1, id=id, type="incoming_call", voip_token=TOKEN, alert_token=TOKEN, sandbox=False,
              voip={"caller": "+15551234567", "callerName": "Alice Johnson", "hasVideo": False},
              alert={"title": "Missed call", "body": "Alice Johnson tried to call you"}),
        event(v=1, id=id, type="incoming_call", voip_token=TOKEN, voip={"caller": "+15551234567"}),
        event(v=1, id=id, type="incoming_call", alert_token=TOKEN, voip={"callerName": "Bob"}),
        event(v=1, id=id, type="call_cancelled"),
    ]


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(6)
        i = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[i % len(data)] = rng.randrange(256)
        elif op == 1:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 2:
            del data[i:i + rng.randint(1, 16)]
        elif op == 3:
            data[i:i] = rng.choice(HOSTILE)
        elif op == 4:
            j = rng.randrange(len(data) + 1)
            data[i:i] = data[min(i, j):max(i, j)][:64]
        else:
            del data[i:]
    return bytes(data)


MAX_EVENT_BYTES, KEPT_PREFIX_BYTES = 65536, 4096


def kept(fields, raw):
    """Whether a dead letter's fields keep an event's bytes as the gateway must: all of them,
    exactly, or for an event over 65,536 bytes (refused for its size) its first 4,096 bytes,
    its length (`event_bytes`) and its SHA-256 (`event_sha256`), docs/protocol.md."""
    if len(raw) <= MAX_EVENT_BYTES:
        return fields.get(b"event", b"") == raw and b"event_bytes" not in fields
    return (fields.get(b"event") == raw[:KEPT_PREFIX_BYTES] and fields.get(b"event_bytes") == str(len(raw)).encode()
            and fields.get(b"event_sha256") == hashlib.sha256(raw).hexdigest().encode())


def write(port, manifest, seed):
    r = redis.Redis(port=port)
    now = int(time.time() * 1000)
    rng = random.Random(seed)
    entries = []  # (kind, name, fields, expectation)
    valid = 0

    def valid_call():
        nonlocal valid
        valid += 1
        id = "ok-%d-%s" % (valid, tag("ok", valid))
        entries.append(("valid", id, {b"event": call(id)}, ("delivered", id)))

    for name, fields, expectation in hand_cases(now):
        entries.append(("case", name, fields, expectation))
        valid_call()
    seen = set()
    n = 0
    while n < MUTATIONS:
        base = rng.choice(templates(n))
        mutated = mutate(rng, base)
        if mutated == base or mutated in seen:
            continue
        seen.add(mutated)
        entries.append(("mutation", "mutation %d" % n, {b"event": mutated}, None))
        n += 1
        if n % 5 == 0:
            valid_call()
    pipe = r.pipeline(transaction=False)
    for _, _, fields, _ in entries:
        pipe.xadd(CALLS, fields)
    ids = pipe.execute()
    with open(manifest, "w") as f:
        for (kind, name, fields, expectation), entry in zip(entries, ids):
            f.write(json.dumps({"kind": kind, "name": name, "expect": expectation, "entry": entry.decode(),
                                "fields": {k.decode(): v.hex() for k, v in fields.items()}}) + "\n")
    print(json.dumps({"seed": seed, "entries": len(entries), "cases": sum(e[0] == "case" for e in entries),
                      "mutations": MUTATIONS, "valid": valid}))


OUTCOMES = {"delivered_voip", "delivered_alert", "undeliverable", "expired", "cancelled", "dead_lettered"}


def check(port, manifest):
    r = redis.Redis(port=port)
    entries = [json.loads(line) for line in open(manifest)]
    index = {e["entry"]: i for i, e in enumerate(entries)}
    problems = []
    results = [json.loads(f[b"result"]) for _, f in r.xrange(RESULTS)]
    # Every result names its calls entry: one result per entry, none for an entry not written.
    result_of = {}
    for res in results:
        entry = res.get("entry")
        if entry not in index:
            problems.append("a result names no calls entry of the corpus: %s" % json.dumps(res)[:200])
        elif entry in result_of:
            problems.append("two results for entry %s (%s): %s, %s" % (entry, entries[index[entry]]["name"][:60],
                                                                      result_of[entry].get("outcome"), res.get("outcome")))
        else:
            result_of[entry] = res
        if res.get("outcome") == "duplicate" and res.get("first_outcome") not in OUTCOMES:
            problems.append("a duplicate result names no first outcome: %s" % json.dumps(res)[:200])
    for e in entries:
        if e["entry"] not in result_of:
            problems.append("%s: no result for entry %s" % (e["name"][:60], e["entry"]))
    # Every dead letter names its entry (in its record) and keeps that entry's event byte for byte.
    dead_of = {}
    for dead_id, f in r.xrange(DEAD):
        reason = f.get(b"reason", b"").decode("utf-8", "replace")
        try:
            entry = json.loads(f.get(b"attempts", b"{}")).get("entry")
        except ValueError:
            entry = None
        if entry not in index:
            problems.append("dead letter %s names no calls entry of the corpus (%s)" % (dead_id.decode(), reason[:120]))
            continue
        e = entries[index[entry]]
        if not kept(f, bytes.fromhex(e["fields"].get("event", ""))):
            problems.append("dead letter %s does not hold the bytes of entry %s (%s)" % (dead_id.decode(), entry, e["name"][:60]))
        if entry in dead_of:
            problems.append("two dead letters for entry %s" % entry)
        dead_of[entry] = reason
        if "redelivery_limit" in reason:
            problems.append("an entry was redelivered until poison (a crash or a stall): %s" % reason[:120])
        if len(reason) > 400:
            problems.append("a reason of %d characters: %s…" % (len(reason), reason[:120]))
    for entry, res in result_of.items():
        if res.get("outcome") == "dead_lettered" and entry not in dead_of:
            problems.append("%s: a dead_lettered result without its dead letter" % entries[index[entry]]["name"][:60])
    for e in entries:
        res = result_of.get(e["entry"])
        if not e["expect"] or res is None:
            continue
        kind, value = e["expect"]
        if kind == "dead":
            reason = dead_of.get(e["entry"])
            if reason is None:
                problems.append("%s: expected a dead letter (%s), found none" % (e["name"], value))
            elif not reason.startswith(value):
                problems.append("%s: reason %r does not start with %r" % (e["name"], reason[:200], value))
            if res.get("outcome") != "dead_lettered" or res.get("reason") != reason:
                problems.append("%s: result %s is not the dead letter's" % (e["name"], json.dumps(res)[:200]))
        elif res.get("outcome") != "delivered_voip" or res.get("id") != value or res.get("type") != "incoming_call":
            problems.append("%s: expected delivered_voip of %r, got %s" % (e["name"], value, json.dumps(res)[:200]))
    print(json.dumps({"entries": len(entries), "results": len(results), "dead": len(dead_of),
                      "duplicates": sum(res.get("outcome") == "duplicate" for res in results),
                      "calls_left": r.xlen(CALLS), "problems": problems[:50], "problem_count": len(problems)}))


if __name__ == "__main__":
    verb, port, manifest = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if verb == "write":
        write(port, manifest, int(sys.argv[4]) if len(sys.argv) > 4 else random.randrange(1 << 32))
    else:
        check(port, manifest)
