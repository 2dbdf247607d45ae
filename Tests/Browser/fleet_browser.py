#!/usr/bin/python3
"""The console's fleet page in a real browser (headless Chromium and Selenium from Debian),
against three live `pushgw run` gateways on one Redis that
Tests/PushgwProcessTests/FleetConsoleBrowserTests.swift started.

    fleet_browser.py SETTINGS.json

SETTINGS names the three consoles' URLs, their gateways' pids, the admin token and the Redis
port. The script makes 30 calls of app acme (the three gateways share them through the
consumer group), then checks: each gateway's overview counts what it routed and the three
counts add up to 30; the fleet page of gateway 1 shows 30 delivered and the three gateways
live; it fits 390 px; once gateway 3 stopped, the fleet page lists two gateways and still
counts 30; the live tail of results lists the calls newest first and shows a new one without a
reload, and the feedback tail the token APNs declared gone; the console's Pause holds the app's
calls in its stream on every live gateway and Resume routes them. Every wait has a deadline. Prints one JSON line of figures; exit 0 when every check
passed, 1 with the failed check.
"""
import hashlib
import json
import os
import signal
import sys
import time
import urllib.request

import redis
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_checks import CheckFailed, check, checks, chromium, wait_for  # noqa: E402

S = json.load(open(sys.argv[1]))
CALLS = 30
driver = chromium(S["profile"])
r = redis.Redis(port=S["redis_port"])


def text(css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def sign_in(console):
    """Signs in at `console` (each gateway keeps its own sessions; the cookie is per host, so
    signing in at one replaces the other's)."""
    driver.get(console + "/console/signin")
    driver.find_element(By.ID, "token").send_keys(S["admin_token"])
    driver.find_element(By.ID, "name").send_keys("fleet-test")
    driver.find_element(By.ID, "signin").click()
    wait_for("the overview of %s" % console, lambda: "/console/overview" in driver.current_url)


def delivered(console, path):
    """acme's delivered_voip of the last 60 minutes on `path` of `console`."""
    driver.get(console + path)
    return int(text("section.app[data-app='acme'] tr[data-outcome='delivered_voip'] td.n60"))


def tile(label):
    for t in driver.find_elements(By.CSS_SELECTOR, "div.tile"):
        if t.find_element(By.CSS_SELECTOR, ".label").text == label:
            return t.find_element(By.CSS_SELECTOR, ".value").text
    raise CheckFailed("no tile %r on %s" % (label, driver.current_url))


def gateways():
    return sorted(e.get_attribute("data-gateway") for e in driver.find_elements(By.CSS_SELECTOR, "#gateways tr.gateway"))


figures = {}
try:
    consoles = S["consoles"]
    for i in range(CALLS):
        event = {"v": 1, "id": "fleet-call-%d" % i, "type": "incoming_call",
                 "voip_token": hashlib.sha256(b"fleet-%d" % i).hexdigest(),
                 "voip": {"caller": "+15550100%03d" % i, "callerName": "Alice", "sessionId": "s-%d" % i}}
        r.xadd("pushgw:{acme}:calls", {"event": json.dumps(event)})
        time.sleep(0.02)  # spread over the gateways' reads
    wait_for("%d results" % CALLS, lambda: r.xlen("pushgw:{acme}:results") >= CALLS)

    own = []
    for console in consoles:
        sign_in(console)
        own.append(wait_for("%s's overview to count its calls" % console,
                            lambda: (lambda n: (n,) if n >= 0 else None)(delivered(console, "/console/overview")), timeout=10)[0])
    figures["routed_by_each"] = own
    check(sum(own) == CALLS, "each gateway's overview counts what it routed, and they add up to %d: %s" % (CALLS, own))

    sign_in(consoles[0])
    wait_for("the fleet page to count every call",
             lambda: delivered(consoles[0], "/console/fleet") == CALLS, timeout=20)
    check(tile("Calls, 60 min") == str(CALLS), "the fleet's 60-minute total is %d" % CALLS)
    check(gateways() == ["fleet-1", "fleet-2", "fleet-3"], "the three gateways are live: %s" % gateways())
    check(tile("Gateways live") == "3", "the tile says 3 gateways")
    versions = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#gateways tr.gateway td.version")]
    check(len(versions) == 3 and all(v and v != "–" for v in versions) and len(set(versions)) == 1,
          "each gateway's card shows its version: %s" % versions)
    roles = [e.find_elements(By.CSS_SELECTOR, "td")[1].text for e in driver.find_elements(By.CSS_SELECTOR, "#gateways tr.gateway")]
    check(all("router" in r for r in roles), "each gateway's roles: %s" % roles)
    p99 = [e.find_elements(By.CSS_SELECTOR, "td")[1].text
           for e in driver.find_elements(By.CSS_SELECTOR, "section.app[data-app='acme'] tr.latency")]
    check(len(p99) == 2 and all(v.endswith("ms") for v in p99), "the fleet's XADD→answer p50 and p99 of acme: %s" % p99)
    check("current" in driver.find_element(By.CSS_SELECTOR, "nav a[href='/console/fleet']").get_attribute("class"),
          "the nav marks Fleet as the page shown")

    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    driver.get(consoles[0] + "/console/fleet")
    wide = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    check(wide[1] == 390 and wide[0] <= 390, "the fleet page fits 390 px: %s" % wide)
    if S.get("screenshots"):
        os.makedirs(S["screenshots"], exist_ok=True)
        driver.save_screenshot(os.path.join(S["screenshots"], "console-fleet-390.png"))
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    os.kill(S["gateway_pids"][2], signal.SIGTERM)
    wait_for("two gateways live after fleet-3 stopped",
             lambda: (driver.get(consoles[0] + "/console/fleet") or True) and gateways() == ["fleet-1", "fleet-2"], timeout=30)
    check(delivered(consoles[0], "/console/fleet") == CALLS, "the stopped gateway's calls still count")

    # MARK: The live tail: results and feedback as they are written, without reloading
    driver.get(consoles[0] + "/console/tail?app=acme&stream=results")
    tail_ids = lambda: [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#tail tr.tail td.c-call")]
    check(len(tail_ids()) == CALLS and tail_ids()[0] == "fleet-call-%d" % (CALLS - 1),
          "the results tail lists the %d calls, newest first: %s" % (CALLS, tail_ids()[:3]))
    driver.execute_script("document.documentElement.setAttribute('data-loaded-once', '1')")
    gone = {"v": 1, "id": "fleet-call-gone", "type": "incoming_call", "voip_token": S["unregistered_token"],
            "alert_token": hashlib.sha256(b"fleet-alert").hexdigest(), "voip": {"caller": "+15550100999", "callerName": "Bob"}}
    r.xadd("pushgw:{acme}:calls", {"event": json.dumps(gone)})
    wait_for("the new call at the top of the tail", lambda: tail_ids()[:1] == ["fleet-call-gone"], timeout=15)
    check(driver.execute_script("return document.documentElement.getAttribute('data-loaded-once')") == "1",
          "the tail refreshed in place (the page was not reloaded)")
    outcome = driver.find_element(By.CSS_SELECTOR, "#tail tr.tail").get_attribute("data-kind")
    check(outcome == "delivered_alert", "its outcome shows: %s" % outcome)
    driver.get(consoles[0] + "/console/tail?app=acme&stream=feedback")
    tokens = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#tail tr.tail td.c-token")]
    check(tokens[:1] == [S["unregistered_token"]], "the feedback tail shows the token APNs declared gone: %s" % tokens[:1])
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {"width": 390, "height": 900, "deviceScaleFactor": 1, "mobile": True})
    driver.get(consoles[0] + "/console/tail?app=acme&stream=results")
    wide = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    check(wide[1] == 390 and wide[0] <= 390, "the tail fits 390 px: %s" % wide)
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    # MARK: Pause and resume from the console: every live gateway holds the app's calls in its
    # stream while paused, and routes them once resumed
    def paused_on(console):
        with urllib.request.urlopen(console + "/metrics", timeout=10) as m:
            return 'pushgw_app_paused{app="acme"} 1' in m.read().decode()

    def app_form(action):
        driver.get(consoles[0] + "/console/overview")
        return driver.find_element(By.CSS_SELECTOR, "section.app[data-app='acme'] form[action='/console/apps/%s']" % action)

    form = app_form("pause")
    form.find_element(By.NAME, "reason").send_keys("fleet test")
    form.find_element(By.CSS_SELECTOR, "button").click()
    wait_for("the pause's answer", lambda: "/console/apps/pause" in driver.current_url and "paused" in text("main").lower())
    driver.get(consoles[0] + "/console/overview")
    check(driver.find_elements(By.CSS_SELECTOR, "section.app[data-app='acme'] .pill.paused"), "the overview shows acme paused")
    check(r.exists("pushgw:{acme}:paused") == 1, "the console's Pause paused acme in Redis")
    wait_for("both live gateways to hold acme paused", lambda: all(paused_on(c) for c in consoles[:2]), timeout=15)
    time.sleep(1.5)  # a read already blocking when the pause was heard may still bring acme's entries (up to blockMs, 1 s)
    results_before = r.xlen("pushgw:{acme}:results")
    for i in range(3):
        event = {"v": 1, "id": "fleet-held-%d" % i, "type": "incoming_call", "voip_token": hashlib.sha256(b"held-%d" % i).hexdigest(),
                 "voip": {"caller": "+15550100%03d" % (900 + i), "callerName": "Carla"}}
        r.xadd("pushgw:{acme}:calls", {"event": json.dumps(event)})
    time.sleep(2)  # two heartbeats: a gateway that ignored the pause would have routed them by now
    new_results = [json.loads(f[b"result"]).get("id") for _, f in r.xrange("pushgw:{acme}:results")][results_before:]
    check(not new_results, "while acme is paused its calls wait in its stream: no result (%s)" % new_results)
    app_form("resume").find_element(By.CSS_SELECTOR, "button").click()
    wait_for("the resume's answer", lambda: "/console/apps/resume" in driver.current_url)
    driver.get(consoles[0] + "/console/overview")
    check(not driver.find_elements(By.CSS_SELECTOR, "section.app[data-app='acme'] .pill.paused")
          and driver.find_elements(By.CSS_SELECTOR, "section.app[data-app='acme'] form[action='/console/apps/pause']"),
          "the overview shows acme running, with its Pause button again")
    wait_for("the held calls routed after the resume", lambda: r.xlen("pushgw:{acme}:results") == results_before + 3, timeout=20)
    audit = [f[b"verb"].decode() for _, f in r.xrange("pushgw:audit") if b"verb" in f]
    check("apps pause" in audit and "apps resume" in audit, "the pause and the resume are audited: %s" % audit)
    print(json.dumps({"checks": len(checks), **figures}))
except CheckFailed as e:
    print("check failed: %s\n(passed before it: %d: %s)" % (e, len(checks), checks[-3:]), file=sys.stderr)
    sys.exit(1)
finally:
    driver.quit()
