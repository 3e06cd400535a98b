#!/usr/bin/python3
"""`loom ui` in headless Chromium (docs/ui.md): the pages over a store the test fills.

  check_browser.py LOOM_CLI MAKE_STORE OUT_DIR

Starts `loom ui --allow-writes` on a free loopback port over OUT_DIR/ui.db and drives Debian's
Chromium through selenium: the runs table has one row per run; selecting two runs draws two
curves; compare, group-by and the time axis; the alias shows on the right version, and moves
through the page with the token; image previews decode; a task cancelled through the API shows
as cancelled after polling; a writing request without the token is refused; every request the
pages made went to the dashboard, and the Content-Security-Policy blocks any other. Screenshots
of each page go to OUT_DIR/screenshots. Exits 77 (skipped) when Chromium or its driver is absent.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def main():
    cli, make_store, out = sys.argv[1:4]
    if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
        print("SKIP: Chromium or chromedriver is not installed (Debian: chromium chromium-driver; scripts/setup.sh)")
        return 77
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    shots = os.path.join(out, "screenshots")
    os.makedirs(shots, exist_ok=True)
    db = os.path.join(out, "ui.db")
    for p in (db, db + "-wal", db + "-shm"):
        if os.path.exists(p):
            os.remove(p)
    shutil.rmtree(db + ".blobs", ignore_errors=True)
    ids = json.loads(subprocess.run([make_store, db], check=True, capture_output=True, text=True).stdout)
    runs, tasks = ids["runs"], ids["tasks"]

    server = subprocess.Popen([cli, "ui", "--store", db, "--port", "0", "--allow-writes"], stdout=subprocess.PIPE, text=True)
    driver = None
    try:
        first = server.stdout.readline().strip()  # "dashboard on http://127.0.0.1:PORT/"
        second = server.stdout.readline().strip()  # "writes allowed with the token T"
        assert first.startswith("dashboard on http://127.0.0.1:"), first
        base = first.split(" on ")[1].rstrip("/")
        token = second.rsplit(" ", 1)[1]
        assert len(token) == 32, second

        def request(method, path, token=None, body=None):
            req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode())
            if token:
                req.add_header("X-Loom-Token", token)
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, dict(r.headers), r.read()
            except urllib.error.HTTPError as e:
                return e.code, dict(e.headers), e.read()

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                  "--no-first-run", "--disable-extensions", "--disable-background-networking"):
            options.add_argument(a)
        driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        wait = WebDriverWait(driver, 20)
        count = lambda css: len(driver.find_elements(By.CSS_SELECTOR, css))

        def until(what, f):
            def check(_):
                try:
                    return f()
                except Exception:  # an element replaced while read (the page redraws): look again
                    return False
            try:
                wait.until(check)
            except Exception:
                driver.save_screenshot(os.path.join(shots, "failure.png"))
                raise AssertionError("timed out waiting until " + what)

        # Runs: one row per run; two selected runs, two curves with their full names
        driver.get(base + "/#runs")
        until("the runs table has 3 rows", lambda: count("#runs-table tbody tr.run") == 3)
        # each metric's best and worst, from its summary's min and max (MetricSummary's JSON): the
        # lowest loss and the highest accuracy are the best
        listed = json.loads(request("GET", "/api/runs")[2])
        heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#runs-table thead th")]
        for run in listed["runs"]:
            cells = driver.find_elements(By.CSS_SELECTOR, '#runs-table tr.run[data-run="%d"] td' % run["id"])
            for metric, best, worst in (("loss", "min", "max"), ("val_accuracy", "max", "min")):
                s = run["summaries"][metric]
                want = driver.execute_script("return `best ${fmt(arguments[0])} · worst ${fmt(arguments[1])}`", s[best], s[worst])
                shown = cells[heads.index(metric)].find_element(By.CSS_SELECTOR, "div.sub").text
                assert shown == want, (run["id"], metric, shown, want)
        # rows per page: asked of the API, and kept by the browser across visits
        Select(driver.find_element(By.ID, "runs-limit")).select_by_value("1000")
        resources = lambda: driver.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
        until("the table asked for 1000 rows", lambda: any("/api/runs?" in e and "limit=1000" in e for e in resources()))
        driver.refresh()
        until("the page size kept", lambda: driver.find_element(By.ID, "runs-limit").get_attribute("value") == "1000" and
              count("#runs-table tbody tr.run") == 3 and any("limit=1000" in e for e in resources()))
        for r in runs[:2]:
            driver.find_element(By.CSS_SELECTOR, f'input.select-run[data-run="{r}"]').click()
        until("two curves are drawn", lambda: count("#plot svg path.curve") == 2)
        legend = driver.find_element(By.CSS_SELECTOR, "#plot svg").text
        assert f"lr-0.1 ({runs[0]}, mnist)" in legend and f"lr-0.01 ({runs[1]}, mnist)" in legend, legend
        # a legend entry hides its curve
        driver.find_element(By.CSS_SELECTOR, f'#plot g.legend[data-series="{runs[0]}"]').click()
        assert not driver.find_element(By.CSS_SELECTOR, f'#plot g.series[data-series="{runs[0]}"]').is_displayed()
        driver.find_element(By.CSS_SELECTOR, f'#plot g.legend[data-series="{runs[0]}"]').click()
        Select(driver.find_element(By.ID, "plot-x")).select_by_value("time")
        until("the time axis", lambda: "seconds since the run started" in driver.find_element(By.CSS_SELECTOR, "#plot svg").text)
        assert count("#plot svg path.curve") == 2
        driver.find_element(By.ID, "runs-compare").click()
        until("the compare table", lambda: count("#compare-table tbody tr") > 0)
        keys = [row.find_elements(By.TAG_NAME, "td")[0].text for row in driver.find_elements(By.CSS_SELECTOR, "#compare-table tbody tr.differs")]
        assert keys == ["lr"], keys  # differences only: the two runs differ in lr alone
        Select(driver.find_element(By.ID, "group-by")).select_by_value("lr")
        until("the group plot's two bands", lambda: count("#group svg path.band") == 2)
        # the page's checkbox selects every run on it, and clears them all again
        driver.find_element(By.ID, "select-page").click()
        until("a curve per run of the page", lambda: count("#plot svg path.curve") == 3 and count("input.select-run:checked") == 3)
        driver.find_element(By.ID, "select-page").click()
        until("no curves", lambda: count("#plot svg path.curve") == 0 and count("input.select-run:checked") == 0)
        for r in runs[:2]:
            driver.find_element(By.CSS_SELECTOR, f'input.select-run[data-run="{r}"]').click()
        until("two curves again", lambda: count("#plot svg path.curve") == 2)
        driver.save_screenshot(os.path.join(shots, "runs.png"))

        # Models: the alias on version 1, moved to 2 through the page with the token
        driver.get(base + "/#models")
        until("the models table", lambda: count("#models-table tbody tr") == 1)
        driver.find_element(By.CSS_SELECTOR, "#models-table tbody tr").click()
        alias_of = lambda v: driver.find_element(By.CSS_SELECTOR, f'#versions-table tr[data-version="{v}"] td.aliases').text
        until("the versions table", lambda: count("#versions-table tbody tr") == 2)
        assert alias_of(1) == "production" and alias_of(2) == "", (alias_of(1), alias_of(2))
        driver.find_element(By.CSS_SELECTOR, '#versions-table tr[data-version="2"] button').click()
        until("the architecture", lambda: "l1" in driver.find_element(By.ID, "architecture").text)
        if shutil.which("dot"):  # drawn by Graphviz too
            until("the architecture's graph", lambda: driver.execute_script(
                "const i = document.getElementById('architecture-graph'); return i && i.complete && i.naturalWidth") > 0)
        driver.save_screenshot(os.path.join(shots, "models.png"))
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "alias-name").send_keys("production")
        driver.find_element(By.ID, "alias-version").send_keys("2")
        driver.find_element(By.ID, "alias-move").click()
        until("the alias on version 2", lambda: alias_of(2) == "production" and alias_of(1) == "")

        # Datasets: image previews of the samples, and the query box
        driver.get(base + "/#datasets")
        until("the datasets table", lambda: count("#datasets-table tbody tr") == 1)
        driver.find_element(By.CSS_SELECTOR, "#datasets-table tbody tr").click()
        until("6 samples with images", lambda: count("#samples .sample") == 6 and all(
            driver.execute_script("return arguments[0].complete && arguments[0].naturalWidth", img) == 8
            for img in driver.find_elements(By.CSS_SELECTOR, "#samples img")))
        driver.save_screenshot(os.path.join(shots, "datasets.png"))
        driver.find_element(By.ID, "sample-query").send_keys("#hard")
        driver.find_element(By.ID, "sample-run").click()
        until("the query's one sample", lambda: count("#samples .sample") == 1)

        # Tasks: a task cancelled through the API shows as cancelled after polling
        driver.get(base + "/#tasks")
        status_of = lambda t: driver.find_element(By.CSS_SELECTOR, f'#tasks-table tr[data-task="{t}"] td.task-status').text
        until("three tasks, one running", lambda: count("#tasks-table tbody tr") == 3 and status_of(tasks[0]) == "pending" and
              status_of(tasks[2]) == "running" and "agent-1" in driver.find_element(By.ID, "agents-table").text)
        status, _, body = request("POST", f"/api/tasks/{tasks[0]}/cancel")  # no token: refused
        assert status == 401, (status, body)
        status, _, body = request("POST", f"/api/tasks/{tasks[0]}/cancel", token=token)
        assert status == 200, (status, body)
        until("the task shows as cancelled", lambda: status_of(tasks[0]) == "cancelled")
        driver.save_screenshot(os.path.join(shots, "tasks.png"))
        # the page itself, without the token, is refused too
        driver.find_element(By.ID, "token").clear()
        refused = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('/api/tasks/{tasks[1]}/cancel', {{method: 'POST'}}).then((r) => done(r.status));")
        assert refused == 401, refused
        assert status_of(tasks[1]) == "pending"

        # Nothing outside the dashboard: every request the pages made went to it, and the policy
        # blocks any other (an image from elsewhere raises a violation and is not fetched)
        entries = driver.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
        outside = [e for e in entries if not e.startswith(base + "/")]
        assert entries and not outside, outside
        blocked = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "document.addEventListener('securitypolicyviolation', (e) => done(e.blockedURI + ' ' + e.effectiveDirective));"
            "const img = document.createElement('img'); img.src = 'http://192.0.2.1/x.png'; document.body.append(img);")
        assert blocked.startswith("http://192.0.2.1") and "img-src" in blocked, blocked
        status, headers, _ = request("GET", "/")
        assert "script-src 'self'" in headers.get("Content-Security-Policy", ""), headers
        # JSON and SVG answers, the page, its script and styles come uncompressed (the HTTP layer
        # before, cpp-httplib, used Brotli: seconds for a large answer, tens of ms for the script)
        curves = urllib.request.Request(base + "/api/runs/curves?runs=" + ",".join(map(str, runs)), headers={"Accept-Encoding": "br, gzip"})
        with urllib.request.urlopen(curves, timeout=10) as r:
            assert r.headers.get("Content-Encoding") is None, dict(r.headers)
            assert r.headers.get("Content-Type") == "image/svg+xml; charset=utf-8", dict(r.headers)
        for path in ("/", "/app.js", "/app.css"):
            with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Accept-Encoding": "br, gzip"}), timeout=10) as r:
                body = r.read()
                assert r.headers.get("Content-Encoding") is None, (path, dict(r.headers))
                assert r.headers.get("Content-Length") == str(len(body)) and len(body) > 1000, (path, dict(r.headers), len(body))
                assert r.headers.get("Content-Security-Policy"), (path, dict(r.headers))
        print(f"ui_browser: {len(entries)} requests, all to {base}; screenshots in {shots}")
        return 0
    finally:
        if driver is not None:
            driver.quit()
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
