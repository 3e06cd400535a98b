#!/usr/bin/python3
"""The dashboard benchmark (bench/ui_bench.sh): `loom ui` next to MLflow's UI over the same runs.

  ui_bench.py --loom-cli LOOM --loom-store STORE.db --mlflow MLFLOW_BIN --mlflow-db MLFLOW.db
              --experiment ID [--requests 50] [--loads 7] [--skip-browser]

Starts `loom ui` and `mlflow server` on free loopback ports, then
  - API latency: each route of Loom's dashboard and the calls MLflow's runs page makes, one
    keep-alive connection, `--requests` requests after 5 warm-up ones: p50 and p95 (ms);
  - page render in headless Chromium (selenium, Debian's chromium-driver, under /usr/bin/python3):
    from navigation start to the runs table showing its rows, and from selecting runs to their
    curves drawn, timed inside the page (performance.now(), a MutationObserver installed before
    the page's own scripts run), `--loads` times each: median and p95.
Prints one JSON line per figure.
"""
import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request


def percentile(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except Exception:
            time.sleep(0.5)
    raise RuntimeError("no answer from " + url)


def load():
    return os.getloadavg()[0]


def latency(port, method, path, body, n):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    data = None if body is None else json.dumps(body)
    headers = {"Content-Type": "application/json"} if body is not None else {}
    times, size = [], 0
    for i in range(5 + n):
        t0 = time.perf_counter()
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        payload = r.read()
        dt = time.perf_counter() - t0
        if r.status != 200:
            raise RuntimeError("%s %s: %d %s" % (method, path, r.status, payload[:300]))
        if i >= 5:
            times.append(dt * 1e3)
        size = len(payload)
    conn.close()
    return {"p50_ms": percentile(times, 0.5), "p95_ms": percentile(times, 0.95), "bytes": size, "requests": n}


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the servers are stopped
    p = argparse.ArgumentParser()
    p.add_argument("--loom-cli", required=True)
    p.add_argument("--loom-store", required=True)
    p.add_argument("--mlflow", required=True, help="the mlflow command of a Python with MLflow")
    p.add_argument("--mlflow-db", required=True)
    p.add_argument("--experiment", required=True, help="MLflow's experiment id of the runs")
    p.add_argument("--requests", type=int, default=50)
    p.add_argument("--loads", type=int, default=7)
    p.add_argument("--skip-browser", action="store_true")
    p.add_argument("--skip-api", action="store_true")
    a = p.parse_args()

    lport, mport = free_port(), free_port()
    loom = subprocess.Popen([a.loom_cli, "ui", "--store", a.loom_store, "--port", str(lport)], stdout=subprocess.DEVNULL)
    mlflow = subprocess.Popen([a.mlflow, "server", "--backend-store-uri", "sqlite:///" + a.mlflow_db, "--host", "127.0.0.1",
                               "--port", str(mport), "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)  # its own process group: it starts a job runner and consumers
    out = []

    def emit(rec):
        rec["load"] = round(load(), 2)
        out.append(rec)
        print(json.dumps(rec), flush=True)

    try:
        wait_http("http://127.0.0.1:%d/api/runs?limit=1" % lport)
        wait_http("http://127.0.0.1:%d/health" % mport)
        time.sleep(15)  # MLflow's server starts more processes after it answers: let them settle
        loom_base = "http://127.0.0.1:%d" % lport
        ml_base = "http://127.0.0.1:%d" % mport

        with urllib.request.urlopen(loom_base + "/api/runs?limit=1000") as r:
            listing = json.load(r)
        ids = [r["id"] for r in listing["runs"]]
        assert listing["total"] >= 100, listing["total"]
        join = lambda xs: ",".join(map(str, xs))
        one, two, hundred = ids[:1], ids[:2], ids[:100]
        with urllib.request.urlopen(loom_base + "/api/models") as r:
            model = json.load(r)["models"][0]["name"]
        with urllib.request.urlopen(loom_base + "/api/datasets") as r:
            dataset = json.load(r)["datasets"][0]["name"]
        q = urllib.parse.quote
        loom_routes = [
            ("runs list, page of 50", "/api/runs?limit=50"),
            ("runs list, page of 100", "/api/runs?limit=100"),
            ("runs list, 1000 rows", "/api/runs?limit=1000"),
            ("runs list sorted by val_accuracy", "/api/runs?limit=50&sort=val_accuracy&order=desc"),
            ("runs list filtered lr=0.005", "/api/runs?limit=50&filter=" + q("lr=0.005")),
            ("curves SVG, 1 run", "/api/runs/curves?runs=" + join(one)),
            ("curves SVG, 2 runs", "/api/runs/curves?runs=" + join(two)),
            ("curves SVG, 10 runs", "/api/runs/curves?runs=" + join(ids[:10])),
            ("curves SVG, 100 runs", "/api/runs/curves?runs=" + join(hundred)),
            ("curves SVG, 1000 runs", "/api/runs/curves?runs=" + join(ids)),
            ("curves SVG, 2 runs, time axis, smoothed", "/api/runs/curves?x=time&smoothing=0.6&runs=" + join(two)),
            ("curves JSON, 100 runs", "/api/runs/curves?format=json&runs=" + join(hundred)),
            ("curves JSON, 1000 runs", "/api/runs/curves?format=json&runs=" + join(ids)),
            ("compare, 2 runs", "/api/runs/compare?runs=" + join(two)),
            ("compare, 100 runs", "/api/runs/compare?runs=" + join(hundred)),
            ("group by lr, SVG", "/api/runs/group?by=lr"),
            ("group by optimizer, JSON", "/api/runs/group?by=optimizer&format=json"),
            ("models", "/api/models"),
            ("model versions", "/api/models/" + q(model)),
            ("architecture", "/api/models/%s/3/architecture" % q(model)),
            ("datasets", "/api/datasets"),
            ("dataset versions", "/api/datasets/" + q(dataset)),
            ("samples, 24", "/api/datasets/%s/1/samples?limit=24" % q(dataset)),
            ("sample image PNG", "/api/datasets/%s/1/samples/0/image.png" % q(dataset)),
            ("tasks", "/api/tasks"),
            ("page: index.html", "/"),
            ("page: app.js", "/app.js"),
        ]
        for name, path in [] if a.skip_api else loom_routes:
            emit({"bench": "ui-api", "impl": "loom", "route": name, "path": path, **latency(lport, "GET", path, None, a.requests)})

        # MLflow's runs page: what its UI sends (the experiment, the runs search of its first
        # page of 100 and of all 1000, and the charts' metric histories).
        exp = a.experiment
        search = {"experiment_ids": [exp], "filter": "", "run_view_type": "ACTIVE_ONLY", "order_by": ["attributes.start_time DESC"]}
        body = json.dumps({**search, "max_results": 1000}).encode()
        with urllib.request.urlopen(urllib.request.Request(ml_base + "/ajax-api/2.0/mlflow/runs/search", data=body,
                                                           headers={"Content-Type": "application/json"})) as r:
            mruns = [x["info"]["run_id"] for x in json.load(r)["runs"]]
        assert len(mruns) == listing["total"], (len(mruns), listing["total"])
        mroutes = [
            ("experiment", "GET", "/ajax-api/2.0/mlflow/experiments/get?experiment_id=" + exp, None),
            ("runs search, page of 100", "POST", "/ajax-api/2.0/mlflow/runs/search", {**search, "max_results": 100}),
            ("runs search, 1000 runs", "POST", "/ajax-api/2.0/mlflow/runs/search", {**search, "max_results": 1000}),
            ("runs search sorted by val_accuracy", "POST", "/ajax-api/2.0/mlflow/runs/search",
             {**search, "max_results": 100, "order_by": ["metrics.val_accuracy DESC"]}),
            ("runs search filtered lr=0.005", "POST", "/ajax-api/2.0/mlflow/runs/search",
             {**search, "max_results": 100, "filter": "params.lr = '0.005'"}),
            ("metric history, 1 run", "GET", "/ajax-api/2.0/mlflow/metrics/get-history?metric_key=loss&run_id=" + mruns[0], None),
            ("metric histories, 2 runs (bulk-interval)", "GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?metric_key=loss&max_results=320&" +
             "&".join("run_ids=" + r for r in mruns[:2]), None),
            ("metric histories, 10 runs (bulk-interval)", "GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?metric_key=loss&max_results=320&" +
             "&".join("run_ids=" + r for r in mruns[:10]), None),
            ("metric histories, 100 runs (bulk-interval)", "GET", "/ajax-api/2.0/mlflow/metrics/get-history-bulk-interval?metric_key=loss&max_results=320&" +
             "&".join("run_ids=" + r for r in mruns[:100]), None),
            ("run", "GET", "/ajax-api/2.0/mlflow/runs/get?run_id=" + mruns[0], None),
            ("page: index.html", "GET", "/", None),
        ]
        for name, method, path, body in [] if a.skip_api else mroutes:
            emit({"bench": "ui-api", "impl": "mlflow", "route": name, "path": path, "body": body,
                  **latency(mport, method, path, body, a.requests)})

        if not a.skip_browser:
            for rec in browser(loom_base, ml_base, exp, ids, a.loads):
                emit(rec)
    finally:
        loom.terminate()
        os.killpg(mlflow.pid, signal.SIGTERM)
        for proc in (loom, mlflow):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        try:
            os.killpg(mlflow.pid, signal.SIGKILL)  # whatever of its group is still there
        except ProcessLookupError:
            pass
    return 0


# Installed before the page's scripts: records performance.now() (ms since navigation start) the
# first time window.__benchDone() holds after a DOM change.
OBSERVER = """
window.__benchMarks = {};
window.__benchWatch = function (name, test) {
  const check = () => { try { if (!(name in window.__benchMarks) && test()) window.__benchMarks[name] = performance.now(); } catch (e) {} };
  new MutationObserver(check).observe(document, {childList: true, subtree: true, attributes: true});
  check();
};
"""


def browser(loom_base, ml_base, exp, ids, loads):
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_bin = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--no-first-run", "--disable-extensions", "--disable-background-networking"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    driver.set_page_load_timeout(120)
    wait = WebDriverWait(driver, 120, poll_frequency=0.05)
    scripts = []

    def mark(name):
        wait.until(lambda d: d.execute_script("return window.__benchMarks && window.__benchMarks[arguments[0]]", name))
        return driver.execute_script("return window.__benchMarks[arguments[0]]", name)

    def summary(impl, what, xs, **extra):
        return {"bench": "ui-page", "impl": impl, "what": what, "median_ms": statistics.median(xs),
                "p95_ms": percentile(xs, 0.95), "loads": len(xs), **extra}

    def navigate(url, watch):
        # a blank page first, so that each load is a new document (a hash change is not)
        driver.get("about:blank")
        while scripts:
            driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": scripts.pop()})
        scripts.append(driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": OBSERVER + watch})["identifier"])
        driver.get(url)

    try:
        # Loom: the table with 50 rows (the default page) and with 1000 rows (the page size kept
        # in localStorage), then selecting 2, 10, 50, 100 runs (of a page of 200) and their curves
        # drawn, then every run of a page of 1,000 and their 1,000 curves.
        driver.get(loom_base + "/")
        for rows in (50, 200, 1000):
            driver.execute_script("localStorage.setItem('loom-runs-limit', arguments[0])", str(rows))
            xs = []
            for _ in range(loads):
                navigate(loom_base + "/#runs", "window.__benchWatch('rows', () => document.querySelectorAll('#runs-table tbody tr.run').length === %d);" % rows)
                xs.append(mark("rows"))
            yield (summary("loom", "runs table, %d rows" % rows, xs, rows=rows))
        driver.execute_script("localStorage.setItem('loom-runs-limit', '200')")
        for n in (2, 10, 50, 100):
            xs = []
            for _ in range(loads):
                navigate(loom_base + "/#runs", "window.__benchWatch('rows', () => document.querySelectorAll('#runs-table tbody tr.run').length === 200);")
                mark("rows")
                # n - 1 runs selected (their curves drawn), then the click on the n-th timed
                driver.execute_script("""
                  const n = arguments[0];
                  [...document.querySelectorAll('input.select-run')].slice(0, n - 1).forEach((b) => b.click());
                  window.__benchWatch('before', () => document.querySelectorAll('#plot svg path.curve').length === n - 1);""", n)
                mark("before")
                t = driver.execute_script("""
                  const n = arguments[0];
                  window.__benchWatch('curves', () => document.querySelectorAll('#plot svg path.curve').length === n);
                  const t = performance.now();
                  document.querySelectorAll('input.select-run')[n - 1].click();
                  return t;""", n)
                xs.append(mark("curves") - t)
            yield (summary("loom", "select %d runs to curves drawn" % n, xs, runs=n))
        # every run: a page of 1,000 rows, the header's checkbox, 1,000 curves drawn
        driver.execute_script("localStorage.setItem('loom-runs-limit', '1000')")
        xs = []
        for _ in range(loads):
            navigate(loom_base + "/#runs", "window.__benchWatch('rows', () => document.querySelectorAll('#runs-table tbody tr.run').length === 1000);")
            mark("rows")
            t = driver.execute_script("""
              window.__benchWatch('curves', () => document.querySelectorAll('#plot svg path.curve').length === 1000);
              const t = performance.now();
              document.getElementById('select-page').click();
              return t;""")
            xs.append(mark("curves") - t)
        yield (summary("loom", "select all 1000 runs to curves drawn", xs, runs=1000))

        # MLflow: its experiment's runs page ("Model training"), whose table shows the runs 100 at a
        # time (run-999 to run-900 first), then its chart view: a chart per metric of the first
        # 10 runs (the ones it shows by default).
        url = ml_base + "/#/experiments/%s/runs?workflowType=machine_learning" % exp
        xs = []
        for _ in range(loads):
            navigate(url, "window.__benchWatch('rows', () => document.body.textContent.includes('run-900'));")
            xs.append(mark("rows"))
        rows = driver.execute_script("return document.querySelectorAll('.ag-center-cols-container .ag-row').length")
        yield summary("mlflow", "runs table, first page of 100 rows", xs, rows=rows)
        xs = []
        for _ in range(loads):
            navigate(url + "&compareRunsMode=CHART",
                     "window.__benchWatch('charts', () => document.querySelectorAll('.js-plotly-plot .scatterlayer .trace').length >= 40);")
            xs.append(mark("charts"))
        charts = driver.execute_script("return document.querySelectorAll('.js-plotly-plot').length")
        yield summary("mlflow", "chart view, 10 runs' curves drawn (a chart per metric)", xs, charts=charts)
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())
