#!/usr/bin/python3
"""Replays every case written by loom_traincheck in PyTorch and compares.

Usage: /usr/bin/python3 tests/train/check_train.py CASES.json

Run it with /usr/bin/python3: the reference is Debian 12's python3-torch (1.13), which only that
interpreter imports (docs/testing.md).

- optimizer: the same problem (a linear model fit by MSE plus a parameter whose loss term exists
  only on even steps, lr halved before step 3) stepped by torch.optim; every parameter after
  every step must match to atol = rtol = 1e-6 (float32) / 1e-12 (float64).
- schedule / plateau: the lr sequence of torch.optim.lr_scheduler to rtol 1e-12.
- loss: torch.nn.functional's value and the gradients of sum(out * cot) to (1e-5, 1e-6)
  (float32) / (1e-10, 1e-12) (float64).
- clip_norm / clip_value: torch.nn.utils.clip_grad_norm_ / clip_grad_value_ on the same
  gradients: the returned total norm and the clipped gradients.
Prints one line per failure and a summary per kind; exits 1 on any failure.
"""
import json
import math
import sys
import warnings
from collections import defaultdict

import torch
import torch.nn.functional as F

torch.set_num_threads(2)
warnings.filterwarnings("ignore")  # SequentialLR and kl_div(reduction="mean") warn by design

DT = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
      "bool": torch.bool, "uint8": torch.uint8}
PARAM_TOL = {"float32": (1e-6, 1e-6), "float64": (1e-12, 1e-12)}   # (rtol, atol)
LOSS_TOL = {"float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}


def T(d):
    return torch.tensor(d["data"], dtype=torch.float64).to(DT[d["dtype"]]).reshape(d["shape"])


def close(a, b, rtol, atol):
    """max |a - b| - (atol + rtol |b|) <= 0, and the worst absolute error."""
    a = a.detach().double()
    b = b.detach().double()
    if a.shape != b.shape:
        return False, float("inf")
    if a.numel() == 0:
        return True, 0.0
    err = (a - b).abs()
    ok = bool(((err <= atol + rtol * b.abs()) | (a.isnan() & b.isnan()) | (a == b)).all())
    return ok, float(err.nan_to_num(0.0).max())


# ---------------------------------------------------------------- optimizers
def make_optimizer(name, params, o):
    o = dict(o)
    if "betas" in o:
        o["betas"] = tuple(o["betas"])
    cls = {"SGD": torch.optim.SGD, "Adam": torch.optim.Adam, "AdamW": torch.optim.AdamW,
           "RMSprop": torch.optim.RMSprop, "Adagrad": torch.optim.Adagrad}[name]
    return cls(params, **o)


def check_optimizer(c):
    X, Y, ct = T(c["X"]), T(c["Y"]), T(c["c_target"])
    params = [T(t).clone().requires_grad_() for t in c["init"]]
    opt = make_optimizer(c["name"], params, c["options"])
    rtol, atol = PARAM_TOL[c["dtype"]]
    worst = 0.0
    for s, expected in enumerate(c["trajectory"]):
        if s == 3:
            for g in opt.param_groups:
                g["lr"] *= 0.5
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(X @ params[0] + params[1], Y)
        if s % 2 == 0:
            loss = loss + ((params[2] - ct).square() * params[2]).sum()
        loss.backward()
        opt.step()
        for i, (p, e) in enumerate(zip(params, expected)):
            ok, err = close(T(e), p, rtol, atol)
            worst = max(worst, err)
            if not ok:
                return False, f"step {s} parameter {i}: max |loom - torch| = {err:.3g}"
    return True, f"max err {worst:.2g}"


# ---------------------------------------------------------------- schedules
def check_schedule(c):
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=c["base_lr"])
    a = c["args"]
    S = torch.optim.lr_scheduler
    name = c["name"]
    if name == "StepLR":
        sched = S.StepLR(opt, step_size=int(a["step_size"]), gamma=a["gamma"])
    elif name == "ExponentialLR":
        sched = S.ExponentialLR(opt, gamma=a["gamma"])
    elif name == "CosineAnnealingLR":
        sched = S.CosineAnnealingLR(opt, T_max=int(a["T_max"]), eta_min=a["eta_min"])
    elif name == "LinearWarmup":
        sched = S.LinearLR(opt, start_factor=a["start_factor"], end_factor=1.0, total_iters=int(a["warmup"]))
    elif name.startswith("LinearWarmup+"):
        warm = S.LinearLR(opt, start_factor=a["start_factor"], end_factor=1.0, total_iters=int(a["warmup"]))
        if name.endswith("CosineAnnealingLR"):
            after = S.CosineAnnealingLR(opt, T_max=int(a["T_max"]), eta_min=a["eta_min"])
        else:
            after = S.StepLR(opt, step_size=int(a["step_size"]), gamma=a["gamma"])
        sched = S.SequentialLR(opt, [warm, after], milestones=[int(a["warmup"])])
    else:
        return False, f"unknown schedule {name}"
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(len(c["lrs"]) - 1):
        opt.step()
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return compare_lrs(c["lrs"], lrs)


def compare_lrs(loom, ref):
    for e, (a, b) in enumerate(zip(loom, ref)):
        if not abs(a - b) <= 1e-12 * abs(b) + 1e-15:
            return False, f"epoch {e}: loom lr {a!r} vs torch {b!r}"
    if len(loom) != len(ref):
        return False, "length differs"
    return True, f"{len(ref)} epochs"


def check_plateau(c):
    w = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([w], lr=c["base_lr"])
    a = dict(c["args"])
    for k in ("patience", "cooldown"):
        if k in a:
            a[k] = int(a[k])
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **a)
    lrs = []
    for v in c["values"]:
        opt.step()
        sched.step(v)
        lrs.append(opt.param_groups[0]["lr"])
    return compare_lrs(c["lrs"], lrs)


# ---------------------------------------------------------------- losses
def RED(a):
    return a.get("reduction", "mean")


def loss_fn(name, a, x):
    r = RED(a)
    if name == "mse":
        return F.mse_loss(x[0], x[1], reduction=r)
    if name == "mae":
        return F.l1_loss(x[0], x[1], reduction=r)
    if name == "huber":
        return F.huber_loss(x[0], x[1], reduction=r, delta=a["delta"])
    if name == "cross_entropy":
        return F.cross_entropy(x[0], x[1], reduction=r, label_smoothing=a.get("label_smoothing", 0.0))
    if name == "nll":
        return F.nll_loss(x[0], x[1], reduction=r)
    if name == "binary_cross_entropy":
        return F.binary_cross_entropy(x[0], x[1], weight=x[2] if len(x) > 2 else None, reduction=r)
    if name == "binary_cross_entropy_with_logits":
        return F.binary_cross_entropy_with_logits(x[0], x[1], pos_weight=x[2] if len(x) > 2 else None, reduction=r)
    if name == "kl_divergence":
        return F.kl_div(x[0], x[1], reduction=r, log_target=a["log_target"])
    if name == "cosine":
        out = 1 - F.cosine_similarity(x[0], x[1], dim=-1)
        return {"none": out, "sum": out.sum(), "mean": out.mean()}[r]
    if name == "cosine_similarity":
        return F.cosine_similarity(x[0], x[1], dim=int(a["axis"]), eps=a["eps"])
    if name == "cosine_embedding":
        return F.cosine_embedding_loss(x[0], x[1], x[2], margin=a["margin"], reduction=r)
    raise KeyError(name)


def check_loss(c):
    xs = [T(d) for d in c["inputs"]]
    diff = c["diff"]
    for i in diff:
        xs[i] = xs[i].clone().requires_grad_()
    out = loss_fn(c["name"], c["args"], xs)
    dtype = c["inputs"][0]["dtype"]
    rtol, atol = LOSS_TOL[dtype]
    ok, err = close(T(c["out"]), out, rtol, atol)
    if not ok:
        return False, f"value: max err {err:.3g} (loom {c['out']['data'][:4]} torch {out.detach().flatten()[:4].tolist()})"
    if str(out.dtype).replace("torch.", "") != c["out"]["dtype"] or list(out.shape) != c["out"]["shape"]:
        return False, f"output {c['out']['dtype']} {c['out']['shape']} vs torch {out.dtype} {list(out.shape)}"
    worst = err
    if diff:
        grads = torch.autograd.grad(out, [xs[i] for i in diff], T(c["cot"]))
        for k, (g, e) in enumerate(zip(grads, c["grads"])):
            e = T(e)
            if c["name"] == "kl_divergence" and not c["args"]["log_target"] and diff[k] == 1:
                # torch's xlogy(t, t) backward is 0/0 = NaN where t == 0; Loom treats 0 log 0
                # as the constant 0 there (gradient -input). Compare where t > 0.
                keep = xs[1].detach() > 0
                e, g = e[keep], g[keep]
            ok, err = close(e, g, rtol, atol)
            worst = max(worst, err)
            if not ok:
                return False, f"gradient of input {diff[k]}: max err {err:.3g}"
    return True, f"max err {worst:.2g}"


# ---------------------------------------------------------------- clipping
def check_clip(c):
    grads = [T(g) for g in c["grads"]]
    params = [torch.zeros_like(g, requires_grad=True) for g in grads] + [torch.zeros(2, requires_grad=True)]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    rtol, atol = PARAM_TOL[c["dtype"]]
    if c["kind"] == "clip_norm":
        total = float(torch.nn.utils.clip_grad_norm_(params, c["max"], norm_type=c["norm_type"]))
        tol = 1e-6 if c["dtype"] == "float32" else 1e-12
        if not abs(total - c["total"]) <= tol * abs(total):
            return False, f"total norm loom {c['total']!r} vs torch {total!r}"
    else:
        torch.nn.utils.clip_grad_value_(params, c["max"])
    for i, e in enumerate(c["after"]):
        ok, err = close(T(e), params[i].grad, rtol, atol)
        if not ok:
            return False, f"clipped gradient {i}: max err {err:.3g}"
    return True, ""


CHECK = {"optimizer": check_optimizer, "schedule": check_schedule, "plateau": check_plateau, "loss": check_loss,
         "clip_norm": check_clip, "clip_value": check_clip}


def label(c):
    parts = [c["kind"], c.get("name", "")]
    for k in ("dtype",):
        if k in c:
            parts.append(c[k])
    if "fused" in c:
        parts.append("fused" if c["fused"] else "ops")
    for k in ("options", "args"):
        if k in c:
            parts.append(json.dumps(c[k], separators=(",", ":")))
    if c["kind"].startswith("clip"):
        parts.append(f"max={c['max']} p={c['norm_type']}")
    if c["kind"] == "loss":
        parts.append(c["inputs"][0]["dtype"])
    return " ".join(p for p in parts if p)


def main():
    cases = json.load(open(sys.argv[1]))
    counts = defaultdict(lambda: [0, 0])
    failed = 0
    for c in cases:
        try:
            ok, msg = CHECK[c["kind"]](c)
        except Exception as e:  # a replay error is a failure of that case
            ok, msg = False, f"replay raised {type(e).__name__}: {e}"
        counts[c["kind"]][0 if ok else 1] += 1
        if not ok:
            failed += 1
            print(f"FAIL {label(c)}: {msg}")
        elif "-v" in sys.argv:
            print(f"ok   {label(c)}: {msg}")
    for k, (p, f) in counts.items():
        print(f"{k}: {p} passed, {f} failed")
    print(f"{len(cases) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
