"""Result records of the benchmarks: one JSON object per line, in bench/results/*.jsonl.

A benchmark run that feeds docs/benchmarks.md's "Current results" appends one record per
(benchmark row, machine, ISA level, thread count) to the file named by LOOM_BENCH_RESULTS;
bench/results_table.py renders the tables from every record under bench/results/ (format and
fields: its docstring). This module holds what the writers share: the machine's description
(CPU model and family/model from /proc/cpuinfo, a short name for the machines the project
measures on), the ISA level from the capping variables, and a writer that keeps the digits a
figure was written with (numbers are read back as Decimal).

Standard library only.
"""
from __future__ import annotations

import datetime
import decimal
import json
import os
import re
import shlex
import sys

# The variables that cap an ISA level (bench/isa_levels.sh, docs/benchmarks.md "ISA levels").
CAP_VARS = ("LOOM_SIMD", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE", "ATEN_CPU_CAPABILITY",
            "MKL_ENABLE_INSTRUCTIONS")


def cpuinfo(path: str = "/proc/cpuinfo") -> dict:
    """vendor, model name, family, model and flags of the first CPU."""
    info = {"model_name": "unknown", "vendor": "", "family": None, "model": None, "flags": set()}
    try:
        with open(path) as f:
            text = f.read().split("\n\n")[0]
    except OSError:
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name":
            info["model_name"] = value
        elif key == "vendor_id":
            info["vendor"] = value
        elif key == "cpu family":
            info["family"] = int(value)
        elif key == "model":
            info["model"] = int(value)
        elif key == "flags":
            info["flags"] = set(value.split())
    return info


def machine_name(info: dict) -> str:
    """The short name docs/benchmarks.md gives the machine ("Zen 5", "Xeon"), else the model name."""
    fam, mod, name = info.get("family"), info.get("model"), info.get("model_name", "")
    if info.get("vendor") == "AuthenticAMD" or "AMD" in name:
        if fam == 26:
            return "Zen 5"
        if fam == 25:  # Zen 3: models 0x00-0x0f, 0x20-0x5f; Zen 4: 0x10-0x1f, 0x60-0x7f, 0xa0-0xaf
            zen4 = mod is not None and (0x10 <= mod <= 0x1f or 0x60 <= mod <= 0x7f or 0xa0 <= mod <= 0xaf)
            return "Zen 4" if zen4 else "Zen 3"
    if "Xeon" in name:
        return "Xeon"
    return name or "unknown"


def cpu_description(info: dict) -> str:
    return f"{info.get('model_name', 'unknown')} (family {info.get('family')} model {info.get('model')})"


def isa_of(info: dict, caps: dict) -> tuple[str, str]:
    """(isa shown in the tables, level) for this CPU under the capping variables `caps`."""
    flags = info.get("flags", set())
    if caps.get("LOOM_SIMD", "").lower() == "avx2" or caps.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2":
        return ("AVX2 (capped)" if "avx512f" in flags else "AVX2 + FMA"), "avx2"
    if "avx512f" in flags:
        return "AVX-512", "native"
    if "avx2" in flags and "fma" in flags:
        return "AVX2 + FMA", "native"
    return ("AVX2" if "avx2" in flags else "baseline"), "native"


def caps_from_env(env=None) -> dict:
    env = os.environ if env is None else env
    return {k: env[k] for k in CAP_VARS if env.get(k)}


def caps_from_text(text: str) -> dict:
    """Capping variables named in a line such as isa_levels.sh's run-info 'level: avx2 (LOOM_SIMD=avx2 ...)'."""
    return {k: v for k, v in re.findall(r"\b([A-Z_]+)=(\S+?)[),]?(?=\s|$|\))", text) if k in CAP_VARS}


def today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")


def command_line() -> str:
    return " ".join(shlex.quote(a) for a in [os.path.basename(sys.executable)] + sys.argv)


def load_average() -> str | None:
    try:
        with open("/proc/loadavg") as f:
            return "load " + f.read().split()[0]
    except OSError:
        return None


def number(x: float, digits: int) -> decimal.Decimal:
    """x rounded to `digits` decimals, written with exactly those digits."""
    return decimal.Decimal(f"{x:.{digits}f}")


def dumps(value) -> str:
    """JSON text of `value`, Decimals written as they are (so 0.300 stays 0.300)."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return "{" + ", ".join(json.dumps(str(k), ensure_ascii=False) + ": " + dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def loads(line: str):
    return json.loads(line, parse_float=decimal.Decimal)


def base_record(table: str, bench: str, row: str, threads: int, caps: dict | None = None,
                date: str | None = None, command: str | None = None, info: dict | None = None) -> dict:
    """The fields every record carries; the caller adds units, loom, peers (and ratios).

    command: the command that measured (default: LOOM_BENCH_COMMAND, else this process's
    command line)."""
    info = cpuinfo() if info is None else info
    caps = caps_from_env() if caps is None else caps
    isa, level = isa_of(info, caps)
    rec = {"table": table, "bench": bench, "row": row, "machine": machine_name(info),
           "cpu": cpu_description(info), "isa": isa, "isa_level": level,
           "caps": " ".join(f"{k}={v}" for k, v in caps.items()), "threads": threads,
           "date": date or today(), "command": command or os.environ.get("LOOM_BENCH_COMMAND") or command_line(),
           "source": "measured"}
    load = load_average()
    if load:
        rec["load"] = load
    return rec


def append(path: str, records: list[dict]) -> None:
    """Append records to the JSON-lines file `path` (LOOM_BENCH_RESULTS)."""
    if not records:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        for r in records:
            f.write(dumps(r) + "\n")
    print(f"{len(records)} result records appended to {path}", file=sys.stderr)
