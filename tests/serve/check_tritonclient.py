"""Drives `loom serve` with NVIDIA's Triton client (tritonclient[http], PyPI, pinned in
requirements.txt): an independent implementation of the Open Inference Protocol v2's client.
Usage: check_tritonclient.py LOOM_CLI OUT_DIR (after make_store OUT_DIR)."""
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import tritonclient.http as http
from tritonclient.utils import InferenceServerException

loom, out = sys.argv[1], sys.argv[2]
store = os.path.join(out, "serve.db")
expected = json.load(open(os.path.join(out, "expected.json")))
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


server = subprocess.Popen([loom, "--store", store, "serve", "mlp@production", "--port", "0", "--reload-ms", "100"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    line = server.stdout.readline()  # "serving mlp@production (version 1) on http://127.0.0.1:PORT/v2"
    check(f"the first line names version 1: {line!r}", "(version 1)" in line)
    url = line.strip().split("http://")[1].rsplit("/v2", 1)[0]
    check(f"bound to loopback only: {url}", url.startswith("127.0.0.1:"))
    client = http.InferenceServerClient(url=url)
    check("live", client.is_server_live())
    check("ready", client.is_server_ready())
    check("model ready", client.is_model_ready("mlp"))
    meta = client.get_model_metadata("mlp")
    check(f"metadata {meta}", meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
          and meta["outputs"] == [{"name": "l2", "datatype": "FP32", "shape": [-1, 3]}] and meta["versions"] == ["1"])

    x = np.array(expected["x"], dtype=np.float32).reshape(6, 4)

    def infer(rows, version=""):
        inp = http.InferInput("x", [rows.shape[0], 4], "FP32")
        inp.set_data_from_numpy(rows, binary_data=False)
        want = http.InferRequestedOutput("l2", binary_data=False)
        return client.infer("mlp", [inp], model_version=version, outputs=[want], request_id="req-7")

    r = infer(x)
    got = r.as_numpy("l2")
    check(f"v1 outputs {got}", got.shape == (6, 3) and np.array_equal(got.ravel(), np.array(expected["v1"], dtype=np.float32)))
    check("version 1 answered", r.get_response()["model_version"] == "1" and r.get_response()["id"] == "req-7")
    # a row at a time gives the same rows
    for i in range(6):
        one = infer(x[i:i + 1]).as_numpy("l2")
        check(f"row {i}", np.array_equal(one.ravel(), np.array(expected["v1"][3 * i:3 * i + 3], dtype=np.float32)))
    # tritonclient's defaults: input data in binary, every output in binary (the binary tensor
    # extension: JSON, then raw bytes, the JSON's length in Inference-Header-Content-Length)
    default = http.InferInput("x", [6, 4], "FP32")
    default.set_data_from_numpy(x)
    for outputs in (None, [http.InferRequestedOutput("l2")]):
        got = client.infer("mlp", [default], outputs=outputs).as_numpy("l2")
        check(f"binary data, outputs {outputs}: {got}", got is not None and got.shape == (6, 3) and
              np.array_equal(got.ravel(), np.array(expected["v1"], dtype=np.float32)))
    # a wrong datatype is the protocol's error, with Loom's message
    try:
        bad = http.InferInput("x", [1, 4], "FP64")
        bad.set_data_from_numpy(np.zeros((1, 4), dtype=np.float64), binary_data=False)
        client.infer("mlp", [bad])
        check("FP64 refused", False)
    except InferenceServerException as e:
        check(f"FP64 refused with the reason: {e}", "the model takes FP32" in str(e))

    # the alias moves: the server follows within its poll period
    subprocess.run([loom, "--store", store, "models", "alias", "set", "mlp", "production", "2", "--replace"], check=True,
                   stdout=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline and client.get_model_metadata("mlp")["versions"] != ["2"]:
        time.sleep(0.05)
    r = infer(x, version="2")
    check("version 2 after the alias moved", r.get_response()["model_version"] == "2" and
          np.array_equal(r.as_numpy("l2").ravel(), np.array(expected["v2"], dtype=np.float32)))
finally:
    server.send_signal(signal.SIGTERM)
    try:
        code = server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        code = "killed"
    check(f"stops on SIGTERM with exit code 0 (got {code}; stderr {server.stderr.read()!r})", code == 0)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("tritonclient: every check passed")
