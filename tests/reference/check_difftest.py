#!/usr/bin/python3
"""Checks the random op chains written by loom_difftest against PyTorch (docs/testing.md,
"Random differential testing").

Usage: /usr/bin/python3 tests/reference/check_difftest.py OUTDIR [--verbose]

Each op is replayed with check_ops.py's per-op replay table (the same code that checks the
fixed cases), so attributes, NumPy semantics and Loom's documented conventions are expressed
once. For every chain:

* local check, step by step: the op is replayed in float64 on exactly the inputs Loom's step
  received (the dumped values), and Loom's output must match; Loom's isolated vector-Jacobian
  product (the step re-run on detached inputs, with the chain gradient of its output as the
  cotangent) must match torch's; and the chain gradient of every value must be the sum of its
  consumers' products (accumulation);
* global check: the whole chain is replayed in float64 from the leaves, and every intermediate
  value and every gradient of sum(final * W) must match Loom's.

Tolerances: check_ops.py's per-category (rtol, atol) for the value's dtype, plus a conditioning
term: 8 times the largest error of the same computation done in float32 (scaled by 2**-29 for
float64 values), so cancellation and amplification along a chain are allowed for exactly as much
as the float32 reference itself suffers.

A mismatch is minimized to the first step (in chain order) whose output or input gradient
mismatches given its dumped inputs, and printed on one line with a reproducer. Mismatches in ops
listed in PENDING_FIXES are printed but do not fail the run. Exits 1 on any other mismatch.
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_ops as co  # noqa: E402  (the per-op replays R, NP, tolerances)

# Known bugs awaiting a fix: a minimized mismatch whose op is listed here is reported as
# "PENDING" and does not fail the run. Empty: the ops-fixes branch fixed the ones first listed
# (empty-axis softmax/logsumexp, batched matmul with K = 0, std/elu/power gradients, max_pool2d
# padding windows, INT64_MIN / -1, clip lo > hi, NaN gradient conventions).
PENDING_FIXES: set = set()

# Where Loom deliberately differs from torch 1.13 the difference is encoded once, in
# check_ops.py's replays, and applies here as well:
#   mod / floor_divide: NumPy's values (sign of the divisor; floor of the true quotient);
#   sign: numpy.sign (sign(nan) is nan); argmax / argmin / all / any: NumPy (first index wins);
#   indexing (index, take, take_along_axis, index_put): NumPy semantics, scatter-add gradients;
#   dtype promotion: numpy.promote_types; float math on integer input computes in float32;
#   embedding: a negative padding_idx means none (torch would wrap it);
#   scaled_dot_product_attention: the math form (torch 1.13 has no F.scaled_dot_product_attention).
# The generator itself keeps away from points where the reference is ill-defined (difftest_main.cpp:
# kinks of abs/relu/leaky_relu/clip, near-ties of max/min/maximum/argmax/pooling, discontinuities
# of floor/ceil/round/mod/floor_divide, log/sqrt of non-positive values, overflow).

K_COND = 8.0
F64_PER_F32 = 2.0 ** -29  # float64 / float32 unit roundoff


def cast_floats(a, dtype):
    return a.astype(dtype) if a.dtype.kind == "f" else a


def evaluate(op, attrs, xs_np, diff_slots, cot, mode, loom_out):
    """Replays one op. mode: "ref" (floating inputs as float64), "lo" (as float32) or "native".
    Returns (output ndarray, {slot: gradient ndarray}); gradients only when cot is given."""
    attrs = dict(attrs, _loom_out=loom_out)
    if mode == "ref":
        xs_np = [cast_floats(a, np.float64) for a in xs_np]
        if op == "astype":
            attrs["dtype"] = "float64"
    elif mode == "lo":
        xs_np = [cast_floats(a, np.float32) for a in xs_np]
        if op == "astype":
            attrs["dtype"] = "float32"
    xs = []
    for k, a in enumerate(xs_np):
        t = torch.from_numpy(np.array(a, copy=True))
        if cot is not None and k in diff_slots:
            t.requires_grad_(True)
        xs.append(t)
    res = co.replay_of(op)(xs, attrs, cot)
    if isinstance(res, co.NP):
        out, torch_out = res.out, res.torch_out
    else:
        out, torch_out = co.arr(res), res
    grads = None
    if cot is not None and diff_slots:
        if isinstance(res, co.NP) and res.grads is not None:
            grads = {k: np.asarray(res.grads[k]) if k in res.grads else np.zeros(xs_np[k].shape, xs_np[k].dtype)
                     for k in diff_slots}
        elif torch_out is None or not torch_out.requires_grad:
            grads = {k: np.zeros(xs_np[k].shape, xs_np[k].dtype) for k in diff_slots}
        else:
            c = torch.from_numpy(np.array(cot, copy=True)).to(torch_out.dtype)
            gs = torch.autograd.grad(torch_out, [xs[k] for k in diff_slots], c, allow_unused=True)
            grads = {k: co.arr(g) if g is not None else np.zeros(xs_np[k].shape, xs_np[k].dtype)
                     for k, g in zip(diff_slots, gs)}
    return np.asarray(out), grads


def cond_error(ref, lo, f64):
    """The conditioning term: the largest |lo - ref| over finite elements, scaled for float64."""
    if ref is None or lo is None or ref.shape != lo.shape or ref.size == 0:
        return 0.0
    r, l = ref.astype(np.float64), lo.astype(np.float64)
    ok = np.isfinite(r) & np.isfinite(l)
    if not ok.any():
        return 0.0
    e = float(np.max(np.abs(r[ok] - l[ok])))
    return e * F64_PER_F32 if f64 else e


def cot_scale(cot):
    c = np.asarray(cot, dtype=np.float64)
    c = c[np.isfinite(c)]
    return max(1.0, float(np.max(np.abs(c)))) if c.size else 1.0


def compare(what, got, ref, op, grad, est=0.0, want_dtype=None, scale=1.0, tol_dtype=None):
    """None when `got` (Loom) matches the float64 reference `ref`, else a one-line problem.
    `scale` multiplies atol: gradients scale with their cotangent (sums of cotangent entries,
    e.g. the scatter-add of a gather, round in proportion to them)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape} != reference {ref.shape}"
    if want_dtype is not None and got.dtype != want_dtype:
        return f"{what}: dtype {got.dtype} != reference {want_dtype}"
    if got.size == 0:
        return None
    if got.dtype.kind != "f":
        if not np.array_equal(got, ref.astype(got.dtype)):
            bad = tuple(np.argwhere(got != ref)[0]) if got.ndim else ()
            return f"{what}: values differ; first at {list(bad)}: loom {got[bad]!r}, reference {ref[bad]!r}"
        return None
    rtol, atol = co.tolerance(op, tol_dtype or got.dtype.name, grad)
    g, r = got.astype(np.float64), ref.astype(np.float64)
    tol = atol * scale + rtol * np.abs(r) + K_COND * est
    with np.errstate(invalid="ignore"):
        ok = (np.abs(g - r) <= tol) | (np.isnan(g) & np.isnan(r)) | (g == r)
    if ok.all():
        return None
    k = tuple(np.argwhere(~ok)[0])
    with np.errstate(invalid="ignore"):
        err = np.nanmax(np.abs(g - r)) if np.isfinite(g - r).any() else float("nan")
    return (f"{what}: {int((~ok).sum())} of {got.size} values differ (rtol {rtol:g}, atol {atol * scale:g}, conditioning "
            f"{K_COND * est:.3g}); first at {list(k)}: loom {g[k]!r}, reference {r[k]!r}; max abs error {err:.3g}")


class ChainCheck:
    def __init__(self, d, chain, verbose):
        self.d, self.c, self.verbose = d, chain, verbose
        self.path = os.path.join(d, chain["file"])
        with np.load(self.path) as z:
            self.arrays = {k: z[k] for k in z.files}
        self.vals = chain["values"]
        self.steps = chain["steps"]
        self.loom = [self.arrays[v["file"]] for v in self.vals]
        self.lgrad = [self.arrays[v["grad"]["file"]] if v["grad"] else None for v in self.vals]
        # alias groups: values that share one autograd node share their gradient
        self.root = list(range(len(self.vals)))
        for i, v in enumerate(self.vals):
            if v["alias_of"] is not None:
                self.root[i] = self.root[v["alias_of"]]
        self.consumers = {}
        for si, st in enumerate(self.steps):
            for k, a in enumerate(st["args"]):
                self.consumers.setdefault(a, []).append((si, k))
        self.w = self.arrays[chain["weights"]] if chain["weights"] else None
        self.both_raised = 0

    def load(self, key):
        return self.arrays[key]

    def diff_slots(self, st):
        # Loom's flags decide: non-differentiable ops with a float output (floor, sign, ...) pass
        # a zero gradient (as torch's do), others carry no history
        if st["out"] is None or not self.vals[st["out"]]["requires_grad"]:
            return []
        return [k for k, a in enumerate(st["args"]) if self.vals[a]["requires_grad"]]

    def describe(self, si):
        st = self.steps[si]
        ins = []
        for a in st["args"]:
            v = self.vals[a]
            lay = f" {v['layout']}" if v["layout"] not in ("", "contiguous") else ""
            ins.append(f"{v['dtype']}{tuple(v['shape'])} strides={tuple(v['strides'])} offset={v['offset']}{lay} "
                       f"file={self.path}[{v['file']}]")
        return f"op={st['op']} attrs={json.dumps(st['attrs'], separators=(',', ':'))} inputs=[{'; '.join(ins)}]"

    # ------------------------------------------------------------ local (per-op) checks
    def local(self):
        """Problems as (step, text, confirmed_in_isolation), in chain order."""
        probs = []
        for si, st in enumerate(self.steps):
            op = st["op"]
            xs = [self.loom[a] for a in st["args"]]
            if st["error"] is not None:
                try:
                    evaluate(op, st["attrs"], xs, [], None, "native", None)
                except Exception:
                    self.both_raised += 1  # outside the op's domain for torch too
                    continue
                probs.append((si, f"Loom raised: {st['error']}", True))
                continue
            out = self.loom[st["out"]]
            nat, _ = evaluate(op, st["attrs"], xs, [], None, "native", out)
            ref, _ = evaluate(op, st["attrs"], xs, [], None, "ref", out)
            lo, _ = evaluate(op, st["attrs"], xs, [], None, "lo", out)
            est = cond_error(ref, lo, out.dtype == np.float64)
            p = compare("output", out, ref, op, False, est, nat.dtype)
            if p:
                iso = True
                if not st["iso_same"] and st["iso_out"]:
                    iso = compare("output", self.load(st["iso_out"]), ref, op, False, est, nat.dtype) is not None
                probs.append((si, p, iso))
                continue
            if st["iso_error"] is not None:
                probs.append((si, f"the isolated re-run raised: {st['iso_error']}", False))
                continue
            if not st["iso_same"]:
                p = compare("isolated output vs chain output", self.load(st["iso_out"]), out, op, False)
                if p:
                    probs.append((si, p, False))
                    continue
            slots = self.diff_slots(st)
            cot = self.lgrad[st["out"]]
            if not slots or cot is None:
                continue
            _, gref = evaluate(op, st["attrs"], xs, slots, cot.astype(np.float64), "ref", out)
            _, glo = evaluate(op, st["attrs"], xs, slots, cot.astype(np.float32), "lo", out)
            for k in slots:
                info = st["iso_grads"][k]
                if info is None:
                    probs.append((si, f"grad of input {k}: missing", True))
                    continue
                g = self.load(info["file"])
                a = self.vals[st["args"][k]]
                est = cond_error(gref[k], glo[k], a["dtype"] == "float64")
                p = compare(f"grad of input {k}", g, gref[k], op, True, est, np.dtype(a["dtype"]), cot_scale(cot))
                if p:
                    probs.append((si, p, True))
        # accumulation: each value's chain gradient is the sum of its consumers' products
        groups = {}
        for i, v in enumerate(self.vals):
            if v["requires_grad"]:
                groups.setdefault(self.root[i], []).append(i)
        for root, members in groups.items():
            g = self.lgrad[root]
            if g is None:
                if self.w is not None:
                    probs.append((self.first_consumer(members), f"value {root}: no chain gradient", False))
                continue
            total = np.zeros(g.shape, np.float64)
            mag = np.zeros(g.shape, np.float64)
            for i in members:
                if i == self.c["final"] and self.w is not None:
                    total += self.w
                    mag += np.abs(self.w)
                for si, k in self.consumers.get(i, []):
                    st = self.steps[si]
                    if st["out"] is not None and self.root[st["out"]] == root:
                        continue  # the op returned its input: one node, no separate contribution
                    info = st["iso_grads"][k] if st["error"] is None and k < len(st["iso_grads"]) else None
                    if info is None:
                        continue
                    part = self.load(info["file"]).astype(np.float64)
                    total += part
                    mag += np.abs(part)
            rtol, atol = co.tolerance("add", g.dtype.name, True)
            bad = np.abs(g.astype(np.float64) - total) > atol + rtol * mag
            if bad.any():
                si = self.first_consumer(members)
                k = tuple(np.argwhere(bad)[0])
                probs.append((si, f"gradient accumulation into value {root} (consumers: steps "
                                  f"{sorted({s for i in members for s, _ in self.consumers.get(i, [])})}): chain gradient "
                                  f"{g[k]!r} != sum of the consumers' gradients {total[k]!r} at {list(k)}", False))
        probs.sort(key=lambda p: p[0])
        return probs

    def first_consumer(self, members):
        s = [si for i in members for si, _ in self.consumers.get(i, [])]
        return min(s) if s else len(self.steps) - 1

    # ------------------------------------------------------------ global (whole chain) check
    def sweep(self, mode):
        dt = np.float64 if mode == "ref" else np.float32
        vals = [None] * len(self.vals)
        for i, v in enumerate(self.vals):
            if v["producer"] == -1:
                vals[i] = cast_floats(self.loom[i], dt)
        for st in self.steps:
            if st["error"] is not None:
                break
            xs = [vals[a] for a in st["args"]]
            if any(x is None for x in xs):
                break
            vals[st["out"]], _ = evaluate(st["op"], st["attrs"], xs, [], None, mode, self.loom[st["out"]])
        grads = [None] * len(self.vals)
        if self.w is None or vals[self.c["final"]] is None:
            return vals, grads
        grads[self.c["final"]] = self.w.astype(dt)
        for st in reversed(self.steps):
            if st["error"] is not None or st["out"] is None:
                continue
            cot = grads[st["out"]]
            slots = self.diff_slots(st)
            if cot is None or not slots:
                continue
            xs = [vals[a] for a in st["args"]]
            _, gs = evaluate(st["op"], st["attrs"], xs, slots, np.asarray(cot, dt), mode, self.loom[st["out"]])
            for k in slots:
                a = st["args"][k]
                grads[a] = gs[k].astype(np.float64) if grads[a] is None else grads[a] + gs[k]
        return vals, grads

    def global_check(self):
        ref_v, ref_g = self.sweep("ref")
        lo_v, lo_g = self.sweep("lo")
        # along a chain, errors of every op add up, and a float64 value computed from float32
        # ones carries their rounding: the loosest category, for float32 if any value is float32
        any32 = any(v["dtype"] == "float32" for v in self.vals)
        tdt = "float32" if any32 else "float64"
        probs = []
        for st in self.steps:
            if st["error"] is not None:
                break
            o = st["out"]
            if ref_v[o] is None:
                continue
            p = compare(f"value {o} ({st['op']})", self.loom[o], ref_v[o], "sum", False,
                        cond_error(ref_v[o], lo_v[o], not any32), tol_dtype=tdt)
            if p:
                probs.append(p)
        if self.w is None:
            return probs
        # gradients: absolute errors scale with the largest gradient anywhere in the chain (large
        # contributions that cancel leave float32 rounding of their size)
        gscale = max([cot_scale(g) for g in ref_g if g is not None] + [1.0])
        for i, v in enumerate(self.vals):
            if not v["requires_grad"] or self.root[i] != i or self.lgrad[i] is None:
                continue
            # the earliest value of an alias group: its reference gradient includes everything
            # that flows through the identity steps to the later ones
            ref = ref_g[i] if ref_g[i] is not None else np.zeros(self.lgrad[i].shape)
            lo = lo_g[i] if lo_g[i] is not None else np.zeros(self.lgrad[i].shape)
            p = compare(f"gradient of value {i}", self.lgrad[i], ref, "sum", True, cond_error(ref, lo, not any32),
                        scale=gscale, tol_dtype=tdt)
            if p:
                probs.append(p)
        return probs



def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    if len(args) != 1:
        print("usage: /usr/bin/python3 check_difftest.py OUTDIR [--verbose]", file=sys.stderr)
        return 2
    d = args[0]
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    print(f"reference: torch {torch.__version__}, numpy {np.__version__}")
    missing = [op for op in manifest["generated_ops"] if co.replay_of(op) is None]
    if missing:
        print(f"FAIL: no replay in check_ops.py for generated ops {missing}")
        return 1
    n_steps = 0
    seen = {}
    failed, pending, unattributed, both_raised = [], [], [], 0
    for chain in manifest["chains"]:
        seed = chain["seed"]
        rerun = (f"rerun: loom_difftest OUT --seeds {seed}:{seed + 1} && "
                 f"/usr/bin/python3 tests/reference/check_difftest.py OUT")
        try:
            cc = ChainCheck(d, chain, verbose)
            for st in chain["steps"]:
                seen[st["op"]] = seen.get(st["op"], 0) + 1
            n_steps += len(chain["steps"])
            local = cc.local()
            both_raised += cc.both_raised
            glob = [] if local else cc.global_check()
        except Exception as e:  # a replay that raises is a problem of the chain
            if verbose:
                import traceback
                traceback.print_exc()
            failed.append(f"seed={seed}: the checker raised {type(e).__name__}: {e} | {rerun}")
            continue
        if local:
            si, text, iso = local[0]
            op = chain["steps"][si]["op"]
            where = "reproduces in isolation" if iso else "only inside the chain"
            line = (f"seed={seed} step={si} {cc.describe(si)} -- {text} [{where}; {len(local)} local problem(s) in "
                    f"the chain] | {rerun}")
            (pending if op in PENDING_FIXES else failed).append(("PENDING " if op in PENDING_FIXES else "") + line)
            if verbose:
                for si2, text2, _ in local[1:]:
                    print(f"    also step {si2} ({chain['steps'][si2]['op']}): {text2}")
        elif glob:
            ops = [st["op"] for st in chain["steps"]]
            unattributed.append(f"seed={seed} chain {ops}: {glob[0]} [no single op mismatches given its inputs; "
                                f"{len(glob)} problem(s)] | {rerun}")
    for line in pending:
        print(line)
    for line in failed:
        print("MISMATCH " + line)
    for line in unattributed:
        print("UNATTRIBUTED " + line)
    gen = manifest["generated_ops"]
    print(f"ops exercised: {len(seen)} of {len(gen)} generated ("
          + ", ".join(f"{k} {v}" for k, v in sorted(seen.items())) + ")")
    never = [r["name"] for r in manifest["registry"] if r["name"] not in seen]
    if never:
        print(f"registry ops not exercised: {' '.join(never)}")
    n_fail = len(failed) + len(unattributed)
    print(f"{len(manifest['chains'])} chains, {n_steps} steps: {n_fail} mismatches ({len(failed)} minimized to one op, "
          f"{len(unattributed)} unattributed), {len(pending)} pending fixes ({', '.join(sorted(PENDING_FIXES))}), "
          f"{both_raised} steps raised in both")
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
