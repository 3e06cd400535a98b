"""Reads the event files tests/tensorboard/write_events.cpp wrote with TensorBoard's own reader
(EventAccumulator, PyPI tensorboard pinned in requirements.txt) and compares every value with
expected.json. Usage: check_events.py OUT_DIR (after write_events and `loom runs export`)."""
import json
import math
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

out = sys.argv[1]
expected = json.load(open(os.path.join(out, "expected.json")))
failures = []


def check(what, ok):
    if not ok:
        failures.append(what)


def load(path):
    acc = EventAccumulator(path, size_guidance={"scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def f32(x):  # simple_value is a float: what a double becomes when stored
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]


# 1. the writer on its own
d = load(os.path.join(out, "direct"))
loss = d.Scalars("loss")
check("10 loss values", len(loss) == 10)
for s, e in enumerate(loss):
    check(f"loss step {s}", e.step == s and e.value == f32(1.0 / (1 + s)) and e.wall_time == 1000.0 + s)
big = d.Scalars("big_step")
check("step 2^40", len(big) == 1 and big[0].step == 2**40 and big[0].value == -3.25)
nan = d.Scalars("nan")
check("NaN", len(nan) == 1 and math.isnan(nan[0].value) and nan[0].step == 3)
values = [math.sin(0.1 * i) * 3.0 for i in range(1000)]
h = d.Histograms("list")[0].histogram_value
check("list histogram stats", h.num == 1000 and h.min == min(values) and h.max == max(values))
check("list histogram sums", abs(h.sum - sum(values)) < 1e-9 and abs(h.sum_squares - sum(v * v for v in values)) < 1e-7)
check("list histogram buckets", len(h.bucket_limit) == 20 and sum(h.bucket) == 1000 and h.bucket_limit[-1] == max(values))
# every value counted in the bucket whose range (limit[i-1], limit[i]] holds it
counts = [0] * 20
for v in values:
    i = next(k for k, lim in enumerate(h.bucket_limit) if v <= lim)
    counts[i] += 1
check(f"list histogram bucket counts {counts} vs {list(h.bucket)}", counts == list(h.bucket))
t = d.Histograms("tensor")[0]
tv = t.histogram_value
check("tensor histogram", t.step == 1 and tv.num == 6 and tv.min == -1.5 and tv.max == 7.25 and tv.sum == 15.0)
c = d.Histograms("constant")[0].histogram_value
check("constant histogram", c.num == 3 and c.min == 4.0 and c.max == 4.0 and list(c.bucket) == [3.0])

# 2. the fit's logger, laid out as Keras' TensorBoard callback
hist = expected["fit"]["history"]
tr = load(os.path.join(out, "fit", "train"))
va = load(os.path.join(out, "fit", "validation"))
for name, series in hist.items():
    acc, tag = (va, "epoch_" + name[4:]) if name.startswith("val_") else (tr, "epoch_learning_rate" if name == "lr" else "epoch_" + name)
    got = acc.Scalars(tag)
    check(f"{tag}: {[e.value for e in got]} vs {series}",
          [e.step for e in got] == list(range(len(series))) and [e.value for e in got] == [f32(v) for v in series])
batch = tr.Scalars("batch_loss")
want = expected["fit"]["batch_loss"][1::2]
check(f"batch_loss every 2nd batch: {len(batch)} vs {len(want)}",
      [e.value for e in batch] == [f32(v) for v in want] and [e.step for e in batch] == list(range(2, 2 * len(want) + 1, 2)))
for name, st in expected["fit"]["state"].items():
    hs = tr.Histograms(name)
    check(f"histograms of {name} per epoch", [e.step for e in hs] == [0, 1, 2])
    last = hs[-1].histogram_value
    check(f"{name} last histogram", last.num == st["num"] and last.min == st["min"] and last.max == st["max"] and
          abs(last.sum - st["sum"]) <= 1e-9 * max(1.0, abs(st["sum"])) and
          abs(last.sum_squares - st["sum_squares"]) <= 1e-9 * max(1.0, st["sum_squares"]))

# 3. `loom runs export`: one folder per run, the name made one safe path component
run = os.path.join(out, "cli", "a_.._b-%d" % expected["store"]["id"])
check(f"the run's folder {os.listdir(os.path.join(out, 'cli'))}", os.path.isdir(os.path.join(run, "train")))
tr = load(os.path.join(run, "train"))
va = load(os.path.join(run, "validation"))
check("exported loss", [e.value for e in tr.Scalars("epoch_loss")] == [f32(2.0 - 0.25 * e) for e in range(4)])
check("exported val_loss", [e.value for e in va.Scalars("epoch_loss")] == [f32(2.5 - 0.2 * e) for e in range(4)])
check("exported lr", [e.value for e in tr.Scalars("epoch_learning_rate")] == [f32(0.1)] * 4)
check("exported wall time", all(e.wall_time == expected["store"]["started_ms"] / 1000.0 for e in tr.Scalars("epoch_loss")))

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("TensorBoard's reader read every value back")
