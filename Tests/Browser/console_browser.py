#!/usr/bin/python3
"""The operators' console in a real browser: headless Chromium driven by Selenium (Debian's
chromium, chromium-driver and python3-selenium), against a live `pushgw run`, its Redis and
the APNs simulator that Tests/PushgwProcessTests/ConsoleBrowserTests.swift started.

    console_browser.py SETTINGS.json

SETTINGS names the console's URL, both tokens, the Redis port, the gateway's pid, config file,
fixed config and log. The script makes the calls, then checks sign-in, the overview, the list
and its filters, a dead letter's attempts, the search box (a call id, a token, an unknown id),
every page at 390 px wide (no horizontal overflow) and at 1400, a replay after the fix, a
purge, the audit trail, CSRF and cross-origin refusals, the read-only token, and hostile
content. Every wait has a
deadline and says what it waited for. Screenshots go to SETTINGS["screenshots"] when set.
Prints one JSON line of figures; exit 0 when every check passed, 1 with the failed check.
"""
import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser_checks import CheckFailed, check, checks, chromium, wait_for  # noqa: E402

S = json.load(open(sys.argv[1]))
BASE = S["console"]
def redis(*args):
    out = subprocess.run(["redis-cli", "-p", str(S["redis_port"]), "--no-raw"] + [str(a) for a in args],
                         capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise CheckFailed("redis-cli %s: %s" % (" ".join(map(str, args)), out.stderr))
    return out.stdout


def redis_raw(*args):
    out = subprocess.run(["redis-cli", "-p", str(S["redis_port"])] + [str(a) for a in args],
                         capture_output=True, text=True, timeout=20)
    return out.stdout.strip()


def xlen(stream):
    return int(redis_raw("XLEN", stream) or 0)


IDS = "local ids = {} for i, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do ids[i] = e[1] end return ids"


def dead_ids(app):
    """The ids of app's dead stream, oldest first."""
    return [line for line in redis_raw("EVAL", IDS, 1, "pushgw:{%s}:dead" % app).splitlines() if line]


def xadd(app, event):
    redis_raw("XADD", "pushgw:{%s}:calls" % app, "*", "event", json.dumps(event))


# MARK: The browser

driver = chromium(S["profile"])
# Every page starts with alert/confirm/prompt recorded instead of shown: a script injected by
# hostile content that ran would leave a trace here (and in the alert check below).
driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
    window.__fired = [];
    for (const name of ["alert", "confirm", "prompt"]) {
      const original = window[name];
      window[name] = function (m) { window.__fired.push(name + ":" + String(m)); };
    }"""})


def page(path):
    driver.get(BASE + path)
    nothing_fired()


def nothing_fired():
    try:
        driver.switch_to.alert
        raise CheckFailed("an alert is open on " + driver.current_url)
    except NoAlertPresentException:
        pass
    fired = driver.execute_script("return window.__fired || []")
    if fired:
        raise CheckFailed("script from content ran on %s: %s" % (driver.current_url, fired))


def text(css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def rows(css):
    return driver.find_elements(By.CSS_SELECTOR, css)


def shot(name):
    if S.get("screenshots"):
        os.makedirs(S["screenshots"], exist_ok=True)
        driver.execute_script("window.scrollTo(0, 0)")
        height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 1400)")
        driver.set_window_size(1280, max(700, height))
        driver.save_screenshot(os.path.join(S["screenshots"], name))
        driver.set_window_size(1280, 1000)


def at_width(width, height=900):
    """The viewport `width` px wide (a phone's at 390, with its viewport meta honoured), or the
    desktop window again with width None."""
    if width is None:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        return
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 800})


def shot_at(name, width):
    """A screenshot of the page `width` px wide, as tall as the page (at most 2,000 px)."""
    if S.get("screenshots"):
        os.makedirs(S["screenshots"], exist_ok=True)
        at_width(width)
        driver.execute_script("window.scrollTo(0, 0)")
        height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 2000)")
        at_width(width, max(700, height))
        driver.save_screenshot(os.path.join(S["screenshots"], name))
        at_width(width)


def fits(where, width):
    """At `width`: nothing is wider than the viewport, the header included. A phone's browser
    widens its viewport to fit a page that overflows (innerWidth grows), so innerWidth must
    still be `width`."""
    wide = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    check(wide[1] == width, "%s: the viewport stays %d px wide, not widened to fit the page (innerWidth %d)" % (where, width, wide[1]))
    check(wide[0] <= wide[1], "%s: no horizontal overflow at %d px (scrollWidth %d)" % (where, wide[1], wide[0]))
    header = driver.execute_script("var h = document.querySelector('header.top'); return h ? [h.scrollWidth, h.clientWidth] : [0, 0]")
    check(header[0] <= header[1], "%s: the header does not overflow at %d px (%d > %d)" % (where, wide[1], header[0], header[1]))


def search(query):
    """Types `query` into the header's search box and waits for its answer."""
    page("/console/overview")
    box = driver.find_element(By.ID, "search")
    box.send_keys(query)
    driver.find_element(By.ID, "search-go").click()
    wait_for("the search's answer", lambda: "/console/search" in driver.current_url and (rows("section.card") or rows("#not-found")))
    nothing_fired()


def cookie_header():
    return "; ".join("%s=%s" % (c["name"], c["value"]) for c in driver.get_cookies())


def csrf_of_page():
    return driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value")


def post(path, fields, cookie, origin=None):
    """A POST outside the browser (a script holding the cookie): the status."""
    data = urllib.parse.urlencode(fields, doseq=True).encode()
    request = urllib.request.Request(BASE + path, data=data, method="POST")
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    request.add_header("Cookie", cookie)
    if origin:
        request.add_header("Origin", origin)

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None
    try:
        return urllib.request.build_opener(NoRedirect).open(request, timeout=10).status
    except urllib.error.HTTPError as e:
        return e.code


def headers_of(path, cookie):
    request = urllib.request.Request(BASE + path, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=10) as r:
        return dict((k.lower(), v) for k, v in r.getheaders())


def sign_in(token, name=None):
    page("/console/signin")
    driver.find_element(By.ID, "token").send_keys(token)
    if name:
        driver.find_element(By.ID, "name").send_keys(name)
    driver.find_element(By.ID, "signin").click()


def sign_out():
    driver.find_element(By.CSS_SELECTOR, "form[action='/console/signout'] button").click()
    wait_for("the sign-in page after signing out", lambda: "/console/signin" in driver.current_url)


def token(seed):
    """A 64-digit hex token, as iOS gives (the simulator answers `ok` to any it does not list)."""
    return hashlib.sha256(seed.encode()).hexdigest()


NAMES = ["Alice Johnson", "Bob Stone", "Carla Diaz", "Dan Wu", "Eve Moreau", "Femi Ade", "Gus Lind", "Hana Sato"]


def call(i, app, voip, **extra):
    event = {"v": 1, "id": "call-%s-%d" % (app, i), "type": "incoming_call", "voip_token": voip,
             "alert_token": token("alert-%s-%d" % (app, i)),
             "voip": {"caller": "+1555010%04d" % i, "callerName": NAMES[i % len(NAMES)], "sessionId": "sess-%s-%d" % (app, i)}}
    event.update(extra)
    return event


figures = {}
other_origin = None
try:
    # MARK: Calls: delivered, fallbacks, an invalid event, a refused credential
    for i in range(6):
        xadd("acme", call(i, "acme", voip=token("voip-acme-%d" % i)))
    for i in range(6, 8):
        xadd("acme", call(i, "acme", voip=S["unregistered_token"]))
    xadd("acme", {"v": 1, "id": "call-acme-invalid", "type": "incoming_call", "voip_token": "not hex"})
    for i in range(2):
        xadd("beta", call(i, "beta", voip=token("voip-beta-%d" % i)))
    wait_for("9 results of acme and 2 of beta",
             lambda: xlen("pushgw:{acme}:results") >= 9 and xlen("pushgw:{beta}:results") >= 2)
    check(xlen("pushgw:{acme}:dead") == 1 and xlen("pushgw:{beta}:dead") == 2, "the calls made 3 dead letters")

    # MARK: Sign-in
    page("/console/overview")
    check("/console/signin" in driver.current_url, "a page without a session goes to the sign-in form")
    started = time.monotonic()
    sign_in("not-the-token")
    wait_for("the wrong token's refusal", lambda: "That token is not valid" in driver.page_source)
    figures["wrong_token_answer_s"] = round(time.monotonic() - started, 2)
    check("/console/signin" in driver.current_url and not driver.get_cookies(), "a wrong token is refused, no cookie set")
    sign_in(S["admin_token"], "ci-operator")
    wait_for("the overview after signing in", lambda: "/console/overview" in driver.current_url and rows("section.app"))
    cookie = driver.get_cookie("pushgw_console")
    check(cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", "the session cookie is HttpOnly and SameSite=Strict")
    h = headers_of("/console/overview", cookie_header())
    csp = h.get("content-security-policy", "")
    check("script-src 'self'" in csp and "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp,
          "the Content-Security-Policy allows only the console's own script and no framing")
    check(h.get("x-content-type-options") == "nosniff" and h.get("referrer-policy") == "same-origin",
          "nosniff and Referrer-Policy: same-origin are set")

    # MARK: Overview
    def outcome(app, name):
        return int(text("section.app[data-app='%s'] tr[data-outcome='%s'] td.n60" % (app, name)))
    apps = [e.get_attribute("data-app") for e in rows("section.app")]
    check(apps == ["acme", "beta"], "the overview shows the config's apps: %s" % apps)
    wait_for("the overview's counts", lambda: (page("/console/overview") or True) and outcome("acme", "delivered_voip") == 6, timeout=15)
    check(outcome("acme", "delivered_alert") == 2 and outcome("acme", "dead_lettered") == 1,
          "acme: 6 delivered_voip, 2 delivered_alert, 1 dead_lettered in the last 60 minutes")
    check(outcome("beta", "dead_lettered") == 2, "beta: 2 dead_lettered")
    check("refused by APNs" in text("section.app[data-app='beta'] header"), "beta shows its credential refused by APNs")
    check(len(rows("section.app[data-app='acme'] svg.chart rect")) >= 3, "the chart draws the outcomes")
    shot("console-overview.png")

    # MARK: Dead letters: the list and its filters
    page("/console/dead")
    listed = rows("tr.dead")
    check(len(listed) == 3, "the list shows the 3 dead letters")
    reasons = sorted(text_.text for text_ in rows("tr.dead td.reason"))
    check(any(r.startswith("invalid_event") for r in reasons) and reasons.count("apns_credentials: InvalidProviderToken") == 2,
          "the list shows the invalid event and the refused credential: %s" % reasons)
    shot("console-dead-letters.png")
    driver.find_element(By.ID, "f-reason").send_keys("apns_credentials")
    driver.find_element(By.ID, "apply").click()
    wait_for("the filtered list", lambda: "reason=apns_credentials" in driver.current_url)
    check(len(rows("tr.dead")) == 2, "the reason filter narrows the list to 2")
    page("/console/dead?app=acme")
    check(len(rows("tr.dead")) == 1, "the app filter narrows the list to 1")

    # MARK: A dead letter's page
    beta_ids = dead_ids("beta")
    target = beta_ids[0]
    page("/console/dead/beta/" + target)
    attempts = rows("#attempts li.attempt")
    check(len(attempts) >= 1 and "403" in attempts[0].text and "InvalidProviderToken" in attempts[0].text,
          "the dead letter's page shows its attempts (403 InvalidProviderToken)")
    check("beta" in text("#facts") and text("#replays") == "0", "the page shows the app and no replays so far")
    shot("console-dead-letter.png")

    # MARK: Search: a call id, a dead-lettered one, a token, an unknown id
    search("call-acme-6")
    check(text("#call-state") == "finished" and "delivered_alert (cause voip_token_invalid)" in text("#call-result"),
          "a call id shows its result: %r" % text("#call-result"))
    tried = [r.text for r in rows("#call-attempts tbody tr")]
    check(len(tried) == 2 and "410" in tried[0] and "Unregistered" in tried[0] and "200" in tried[1],
          "the call's page lists every attempt with its status and reason: %s" % tried)
    check(rows("#call-no-dead-letter"), "a delivered call has no dead letter")
    shot_at("console-call-1400.png", 1400)
    shot_at("console-call-390.png", 390)
    at_width(None)
    search("beta/call-beta-0")
    check("dead lettered" in text("#call-state") and "apns_credentials: InvalidProviderToken" in text("#call-result"),
          "a dead-lettered call says why: %r" % text("#call-result"))
    linked = rows("#call-dead-letters a")
    check(len(linked) == 1 and linked[0].get_attribute("href").endswith("/console/dead/beta/" + beta_ids[0]),
          "the call's page links its dead letter")
    states = [r.text for r in rows("#call-tokens tbody tr")]
    check(len(states) == 2 and all("not known to be invalid" in s_ for s_ in states), "its tokens' state: %s" % states)
    search(S["unregistered_token"].upper())
    marks = text("section.card.token[data-app='acme'] td.mark[data-channel='voip']")
    check("known invalid since" in marks and "(Unregistered)" in marks, "a token shows since when and why calls skip it: %r" % marks)
    check("Unregistered" in text("section.card.token[data-app='acme'] table.feedback"), "and APNs' answers about it")
    shot_at("console-token-390.png", 390)
    at_width(None)
    search("call-that-never-was")
    check(driver.title.startswith("Nothing found") and "call-that-never-was" in text("#not-found"),
          "an unknown id is a clear not-found page: %r" % text("#not-found"))

    # MARK: Phone width: every page fits 390 px, lists are readable
    at_width(390)
    for path in ["/console/overview", "/console/dead", "/console/dead/beta/" + target, "/console/search?q=call-acme-6",
                 "/console/search?q=" + S["unregistered_token"], "/console/search?q=nope", "/console/audit", "/console/webhooks",
                 "/console/dead/preview?action=replay-all"]:
        page(path)
        fits(path, 390)
    page("/console/dead")
    labels = driver.execute_script("return Array.from(document.querySelectorAll('tr.dead td[data-label]')).map(td => td.dataset.label)")
    check("Reason" in labels and driver.execute_script("return getComputedStyle(document.querySelector('#dead-table thead')).display") == "none",
          "at 390 px each dead letter is a card of labelled values: %s" % sorted(set(labels)))
    shot_at("console-dead-letters-390.png", 390)
    page("/console/overview")
    shot_at("console-overview-390.png", 390)
    at_width(1400)
    for path in ["/console/overview", "/console/dead", "/console/search?q=call-acme-6"]:
        page(path)
        fits(path + " at 1400 px", 1400)
    at_width(None)

    # MARK: Fix the cause, replay one
    page("/console/dead/beta/" + target)
    shutil.copyfile(S["fixed_config"], S["config"])
    before = open(S["gateway_log"]).read().count('"config reloaded"')
    os.kill(S["gateway_pid"], signal.SIGHUP)
    wait_for("the gateway to reload its fixed config", lambda: open(S["gateway_log"]).read().count('"config reloaded"') > before)
    driver.find_element(By.ID, "replay-one").click()
    wait_for("the replay's dry run", lambda: rows("#dry-run"))
    check("would be replayed" in text("#dry-run") and len(rows("#preview tbody tr")) == 1, "the replay shows a dry run first")
    check(xlen("pushgw:{beta}:dead") == 2, "the dry run changed nothing")
    # Its newest dead letters say APNs refused beta's credential, and nothing was delivered
    # since: the dry run warns, and its confirm needs the explicit "replay anyway".
    warnings = [w.text for w in rows('[data-warning="credential-refused"]')]
    check(len(warnings) == 1 and "APNs refused beta's credential" in warnings[0] and "will likely die again" in warnings[0],
          "the dry run warns that APNs refused beta's credential: %s" % warnings)
    preview_url = driver.current_url
    driver.find_element(By.ID, "confirm").click()
    check(driver.current_url == preview_url and xlen("pushgw:{beta}:dead") == 2,
          "the confirm without the box ticked stays on the dry run, nothing replayed")
    driver.find_element(By.ID, "despite-refusal").click()
    driver.find_element(By.ID, "confirm").click()
    wait_for("the replay to finish", lambda: driver.find_element(By.ID, "job-state").get_attribute("data-state") == "done")

    def beta_delivered():
        out = redis_raw("XRANGE", "pushgw:{beta}:results", "-", "+")
        return '"outcome":"delivered_voip"' in out and '"id":"call-beta-' in out
    wait_for("delivered_voip on beta's results stream", beta_delivered)
    check(xlen("pushgw:{beta}:dead") == 1, "the replayed dead letter left the dead stream")

    # MARK: Purge one, after its confirmation
    page("/console/dead?reason=invalid_event")
    boxes = rows("#dead-table input[name=ids]")
    check(len(boxes) == 1, "the invalid event is listed alone")
    boxes[0].click()
    driver.find_element(By.ID, "purge-selected").click()
    wait_for("the purge's dry run", lambda: rows("#dry-run"))
    check(xlen("pushgw:{acme}:dead") == 1, "nothing is purged before the confirmation")
    driver.find_element(By.ID, "confirm").click()
    wait_for("the purge to finish", lambda: driver.find_element(By.ID, "job-state").get_attribute("data-state") == "done")
    check(xlen("pushgw:{acme}:dead") == 0, "the purge removed the dead letter")

    # MARK: Audit
    page("/console/audit")
    verbs = [r.get_attribute("data-verb") for r in rows("tr.audit")]
    users = [e.text for e in rows("tr.audit td.user")]
    check(verbs[:2] == ["purge", "replay"] and users[:2] == ["ci-operator", "ci-operator"],
          "the audit page lists the purge and the replay, newest first, with who did them: %s %s" % (verbs, users))

    # MARK: CSRF and other origins
    remaining = dead_ids("beta")
    check(len(remaining) == 1, "one beta dead letter is left")
    victim = "beta/" + remaining[0]
    page("/console/dead")
    token = csrf_of_page()
    jar = cookie_header()
    check(post("/console/dead/purge", {"ids": victim}, jar) == 403, "a purge without the CSRF token is refused")
    check(post("/console/dead/replay", {"ids": victim, "csrf": "0" * 64}, jar) == 403, "a replay with a wrong CSRF token is refused")
    check(post("/console/dead/purge", {"ids": victim, "csrf": token}, jar, origin="http://127.0.0.1:1") == 403,
          "a purge from another origin is refused, even with the token")
    check(post("/console/dead/replay", {"ids": victim, "csrf": token}, "") == 403, "a replay without a session is refused")
    page("/console/dead/purge?ids=" + urllib.parse.quote(victim))
    check(xlen("pushgw:{beta}:dead") == 1, "a GET changes nothing")

    # A page of another origin posts a purge form to the console in the same browser.
    form = ('<!doctype html><title>elsewhere</title><form id="f" method="post" action="%s/console/dead/purge">'
            '<input name="ids" value="%s"><input name="csrf" value="%s"><button id="go">go</button></form>'
            % (BASE, victim, token))

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = form.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    other_origin = http.server.HTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=other_origin.serve_forever, daemon=True).start()
    driver.get("http://127.0.0.1:%d/" % other_origin.server_address[1])
    driver.find_element(By.ID, "go").click()
    wait_for("the console's answer to the other origin's form", lambda: "Refused" in driver.title or "Sign in first" in driver.page_source
             or "another origin" in driver.page_source)
    check(xlen("pushgw:{beta}:dead") == 1, "the other origin's purge changed nothing")
    check(xlen("pushgw:audit") == 2, "refused requests wrote no audit record")

    # MARK: The read-only token
    page("/console/dead")
    sign_out()
    sign_in(S["readonly_token"], "auditor")
    wait_for("the overview, read-only", lambda: "/console/overview" in driver.current_url and rows(".role-readonly"))
    page("/console/dead")
    check(len(rows("tr.dead")) == 1, "read-only sees the dead letters")
    page("/console/dead/preview?action=purge&ids=" + urllib.parse.quote(victim))
    check(rows("#read-only") and not rows("#confirm"), "read-only sees the preview without a confirmation button")
    ro_token = csrf_of_page()
    ro_jar = cookie_header()
    check(post("/console/dead/purge", {"ids": victim, "csrf": ro_token}, ro_jar) == 403, "read-only cannot purge")
    check(post("/console/dead/replay", {"ids": victim, "csrf": ro_token}, ro_jar) == 403, "read-only cannot replay")
    check(xlen("pushgw:{beta}:dead") == 1, "read-only changed nothing")
    search("call-acme-6")
    check("delivered_alert" in text("#call-result"), "read-only can search")
    sign_out()

    # MARK: Hostile content
    hostile_id = '<script>alert("id")</script>'
    img = '"><img src=x onerror=alert(1)>'
    name = '<img src=x onerror=alert(3)>\u001b[31mred\u202eevil'
    xadd("acme", {"v": 1, "id": hostile_id, "type": "incoming_call", "voip_token": img, "alert_token": "javascript:alert(2)",
                  "voip": {"caller": "javascript:alert(5)", "callerName": name},
                  "alert": {"title": "</pre><script>alert(6)</script>", "body": "\u001b]52;c;cHduZWQ=\u0007"}})
    xadd("acme", {"v": 1, "id": "javascript:alert(7)", "type": img, "voip_token": "a0a0"})
    wait_for("2 hostile dead letters", lambda: xlen("pushgw:{acme}:dead") == 2)
    sign_in(S["admin_token"], "ci-operator")
    wait_for("the overview", lambda: "/console/overview" in driver.current_url)
    page("/console/dead?app=acme")
    calls = [e.text for e in rows("tr.dead td.call")]
    check(hostile_id in calls and "javascript:alert(7)" in calls, "hostile call ids show as text: %s" % calls)

    def clean(where):
        nothing_fired()
        scripts = driver.execute_script("return Array.from(document.scripts).map(s => s.src)")
        check(scripts == [BASE + "/console/static/console.js"], "%s: only the console's own script is on the page" % where)
        injected = driver.execute_script("return document.querySelectorAll('img, iframe, object, embed, [onerror], [onload]').length")
        check(injected == 0, "%s: no injected element exists" % where)
        links = driver.execute_script("return Array.from(document.querySelectorAll('a')).map(a => a.getAttribute('href'))")
        check(not any(l and l.lower().startswith("javascript:") for l in links), "%s: no javascript: link" % where)
        body = driver.find_element(By.TAG_NAME, "body").text
        check("\u001b" not in body and "\u202e" not in body and "\u0007" not in body, "%s: no raw control or bidi character" % where)
    clean("the list")
    for entry in dead_ids("acme"):
        page("/console/dead/acme/" + entry)
        clean("dead letter " + entry)
        event = text("#event")
        call_cell = text("#facts td.call")
        check(call_cell in (hostile_id, "javascript:alert(7)"), "the call id shows as text: %r" % call_cell)
        if call_cell == hostile_id:
            check("<img src=x onerror=alert(3)>" in event and "</pre><script>alert(6)</script>" in event,
                  "the event's hostile strings show as text")
            check("\\u001b[31m" in event and "\\u202e" in event, "terminal escapes and bidi controls are shown as \\uXXXX")
    search(hostile_id)
    check(text("section.card.call .call-id") == hostile_id, "a hostile call id is searched and shown as text")
    clean("the search of a hostile call id")
    page("/console/search?q=" + urllib.parse.quote(img))
    check(rows("#not-found"), "a hostile unknown id is not found")
    clean("the not-found page of a hostile id")
    page("/console/dead/preview?action=replay-all&app=acme")
    clean("the replay preview")
    page("/console/audit")
    clean("the audit page")
    page("/console/webhooks")
    clean("the webhook dead letters page")
    figures["checks"] = len(checks)
    print(json.dumps(figures))
    sys.exit(0)
except CheckFailed as e:
    print("console browser test failed: %s" % e, file=sys.stderr)
    print("passed before it: %d checks; last: %s; page: %s" % (len(checks), checks[-1] if checks else "-", driver.current_url),
          file=sys.stderr)
    sys.exit(1)
finally:
    if other_origin:
        other_origin.shutdown()
    driver.quit()
