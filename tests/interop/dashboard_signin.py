#!/usr/bin/python3
"""Dashboard sign-in on a standalone node (`--db`, a dashboard on 127.0.0.1), through the
API and in headless Chromium:

1. users `root` (admin) and `vera` (viewer) get passwords with `tracker admin user
   password` (standard input); the clear password is in no log line and no row;
2. the API: a sign-in without `X-Tracker-CSRF` is refused (403); a wrong password and an
   unknown name get the same 401; five failures for one name turn even the right
   password away (429) while another user still signs in; the cookie is `HttpOnly;
   SameSite=Strict`; a viewer's session reads but is refused controls and the users; an
   admin's session changes things only with the CSRF header; signing out ends that
   session; a new password ends the sessions made with the old one;
3. Chromium: vera signs in from the page, sees the tabs, is refused the Stop button,
   signs out; signed in again, her session ends when root disables her: the page shows
   her signed out after a reload.
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import admin, fail, standalone_with_db, start_tracker, stop, wait_for_udp_tracker  # noqa: E402

ROOT_PASSWORD, VERA_PASSWORD = "correct horse battery", "vera-sees-all-9"


def call(dashboard, method, path, body=None, cookie=None, csrf=True):
    """(status, headers, JSON body) of one request, with a session cookie if given."""
    headers = {"Content-Type": "application/json"}
    if csrf:
        headers["X-Tracker-CSRF"] = "1"
    if cookie:
        headers["Cookie"] = cookie
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{dashboard}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status, r.headers, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read() or b"{}")


def sign_in(dashboard, name, password):
    status, headers, body = call(dashboard, "POST", "/api/session", {"name": name, "password": password})
    if status != 200:
        return status, None
    set_cookie = headers.get("Set-Cookie", "")
    if "HttpOnly" not in set_cookie or "SameSite=Strict" not in set_cookie:
        fail(f"the session cookie must be HttpOnly and SameSite=Strict: {set_cookie!r}")
    return status, set_cookie.split(";", 1)[0]


def api(dashboard, token, work):
    if call(dashboard, "POST", "/api/session", {"name": "root", "password": ROOT_PASSWORD}, csrf=False)[0] != 403:
        fail("a sign-in without X-Tracker-CSRF must be refused")
    wrong = call(dashboard, "POST", "/api/session", {"name": "root", "password": "not-the-password"})
    unknown = call(dashboard, "POST", "/api/session", {"name": "nobody", "password": "not-the-password"})
    if wrong[0] != 401 or unknown[0] != 401 or wrong[2] != unknown[2]:
        fail(f"a wrong password and an unknown name must get the same 401: {wrong[0]} {wrong[2]} / {unknown[0]} {unknown[2]}")
    for _ in range(4):
        call(dashboard, "POST", "/api/session", {"name": "nobody", "password": "guess"})
    if (status := sign_in(dashboard, "nobody", "guess")[0]) != 429:
        fail(f"five failures for one name must turn the next sign-in away: {status}")
    status, vera = sign_in(dashboard, "vera", VERA_PASSWORD)
    if status != 200:
        fail(f"vera cannot sign in after another name's failures: {status}")
    if call(dashboard, "GET", "/api/session", cookie=vera)[2] != {"name": "vera", "role": "viewer"}:
        fail("GET /api/session must name the signed-in viewer")
    if call(dashboard, "GET", "/api/swarms", cookie=vera)[0] != 200:
        fail("a viewer's session must read the swarms")
    for method, path in (("POST", "/api/service/stop"), ("GET", "/api/users")):
        if (status := call(dashboard, method, path, cookie=vera)[0]) != 401:
            fail(f"a viewer's session must be refused {method} {path}: {status}")
    status, root = sign_in(dashboard, "root", ROOT_PASSWORD)
    if status != 200:
        fail(f"root cannot sign in: {status}")
    if call(dashboard, "POST", "/api/users", {"action": "add", "name": "carol", "key": False}, cookie=root, csrf=False)[0] != 401:
        fail("an admin's session must not change anything without X-Tracker-CSRF")
    if call(dashboard, "POST", "/api/users", {"action": "add", "name": "carol", "key": False}, cookie=root)[0] != 200:
        fail("an admin's session with X-Tracker-CSRF must add a user")
    if call(dashboard, "DELETE", "/api/session", cookie=vera)[0] != 200 or call(dashboard, "GET", "/api/session", cookie=vera)[0] != 401:
        fail("signing out must end the session")
    admin(dashboard, token, "user", "password", "root", stdin="a-new-root-password\n")
    if call(dashboard, "GET", "/api/session", cookie=root)[0] != 401:
        fail("a new password must end the sessions made with the old one")
    admin(dashboard, token, "user", "password", "root", stdin=ROOT_PASSWORD + "\n")
    print("API: CSRF header asked, one refusal for a wrong password or name, a name's failures limited, HttpOnly and "
          "SameSite=Strict, a viewer reads but is refused controls and users, sign-out and a new password end sessions", flush=True)


def browser(dashboard, token, work):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900",
                "--user-data-dir=" + os.path.join(work, "chrome")):
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)

    def wait(what, predicate, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                if predicate():
                    return
            except Exception:  # noqa: BLE001 - the page may be between renders
                pass
            time.sleep(0.1)
        fail(f"the page: {what} (within {timeout} s); it says {driver.find_element(By.TAG_NAME, 'body').text[:600]!r} "
             f"{driver.get_log('browser') if hasattr(driver, 'get_log') else ''}")

    def text(element_id):
        return driver.find_element(By.ID, element_id).text

    def sign_in_on_page():
        driver.find_element(By.ID, "signin").click()
        driver.find_element(By.ID, "signin-name").clear()
        driver.find_element(By.ID, "signin-name").send_keys("vera")
        driver.find_element(By.ID, "signin-password").send_keys(VERA_PASSWORD)
        driver.find_element(By.ID, "signin-ok").click()
        wait("it says vera is signed in", lambda: text("session-user") == "signed in as vera (viewer)")

    try:
        driver.get(f"http://127.0.0.1:{dashboard}/#config")
        sign_in_on_page()
        if driver.execute_script("return document.cookie") != "":
            fail("the session cookie must be HttpOnly: the page's script read it")
        for tab in ("trackers", "swarms", "torrents", "activity"):
            driver.find_element(By.CSS_SELECTOR, f"#tabs button[data-tab='{tab}']").click()
            wait(f"the {tab} tab shows", lambda: driver.find_element(By.ID, f"tab-{tab}").is_displayed())
        driver.find_element(By.CSS_SELECTOR, "#tabs button[data-tab='config']").click()
        wait("the stop button is enabled", lambda: driver.find_element(By.ID, "btn-stop").is_enabled())
        driver.find_element(By.ID, "btn-stop").click()
        wait("the Stop button is refused", lambda: text("control-result").startswith("refused:"))
        if "running" not in json.load(urllib.request.urlopen(f"http://127.0.0.1:{dashboard}/api/node", timeout=5))["service"]:
            fail("a viewer stopped the service")
        driver.find_element(By.ID, "signout").click()
        wait("it shows the sign-in button again", lambda: driver.find_element(By.ID, "signin").is_displayed() and text("session-user") == "")
        sign_in_on_page()
        admin(dashboard, token, "user", "disable", "vera")
        driver.refresh()
        wait("vera is signed out once disabled", lambda: driver.find_element(By.ID, "signin").is_displayed() and text("session-user") == "")
    finally:
        driver.quit()
    print("Chromium: vera signed in, saw the tabs, was refused Stop, signed out; her session ended when she was disabled", flush=True)


def main():
    work = tempfile.mkdtemp(prefix="dashboard-signin-")
    udp, dashboard, token, args = standalone_with_db(work)
    tracker = start_tracker(args, os.path.join(work, "tracker.log"))
    ok = False
    try:
        wait_for_udp_tracker(udp)
        admin(dashboard, token, "user", "add", "root", "--role", "admin", "--no-key")
        admin(dashboard, token, "user", "add", "vera", "--role", "viewer", "--no-key")
        admin(dashboard, token, "user", "password", "root", stdin=ROOT_PASSWORD + "\n")
        admin(dashboard, token, "user", "password", "vera", stdin=VERA_PASSWORD + "\n")
        api(dashboard, token, work)
        browser(dashboard, token, work)
        stop(tracker)
        tracker = None
        logged = open(os.path.join(work, "tracker.log")).read()
        stored = b"".join(row[0] or b"" for row in sqlite3.connect(os.path.join(work, "standalone.sqlite")).execute("SELECT password FROM users"))
        for password in (ROOT_PASSWORD, VERA_PASSWORD):
            if password in logged or password.encode() in stored:
                fail("a clear password reached the log or the file")
        print("no clear password in the log or the file", flush=True)
        ok = True
    finally:
        code = stop(tracker) if tracker else 0
        if not ok:
            print(open(os.path.join(work, "tracker.log")).read()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
        if code not in (0, None):
            fail(f"tracker exited with {code} on SIGTERM")
    print("PASS dashboard_signin", flush=True)


if __name__ == "__main__":
    main()
