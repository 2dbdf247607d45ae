"""What the browser tests share: checks that stop at the first failure and count the passed
ones, waits with a deadline, and headless Chromium driven by Selenium (Debian's chromium,
chromium-driver and python3-selenium)."""
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

checks = []


class CheckFailed(Exception):
    pass


def check(condition, rule):
    if not condition:
        raise CheckFailed(rule)
    checks.append(rule)


def wait_for(what, predicate, timeout=30.0, poll=0.1):
    """predicate() until truthy, at most timeout seconds; fails naming what was awaited."""
    end = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < end:
        try:
            value = predicate()
            if value:
                return value
        except Exception as e:  # a page between loads: try again until the deadline
            last_error = e
        time.sleep(poll)
    raise CheckFailed("timed out after %.0f s waiting for %s%s" % (timeout, what, " (last error: %s)" % last_error if last_error else ""))


def chromium(profile):
    """Headless Chromium, 1280×1000 at scale 1, with its profile in `profile`."""
    options = webdriver.ChromeOptions()
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
                 "--force-device-scale-factor=1", "--hide-scrollbars", "--no-first-run", "--disable-extensions",
                 "--user-data-dir=" + profile]:
        options.add_argument(flag)
    options.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    return driver
