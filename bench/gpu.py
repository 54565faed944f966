"""attnlab on one NVIDIA GPU: the particle kernel against the exp bound, the whole reproduction, the JAX-path tests.

One run, bounded in time (``--deadline`` seconds in all; each stage gets a share and is cut off at it), writes
``OUT/gpu.json`` after every stage (and while ``reproduce`` runs) and prints a table and, last, the JSON summary.
Stages (``--stages``, default ``kernels,reproduce,tests``; shares of the deadline in ``--shares``, the tests get what
is left):

1. **environment**: the devices JAX sees, the versions of JAX, PyTorch and attnlab's dependencies.
2. **kernels** (a process of its own, JAX only): the particle attention step of Bruno et al. (d = 3, beta = 30,
   Q = K = V = I, SA, float32 tokens) at N = 1e4, 5e4, 2e5 in pairs per second (N^2 / median wall time of one
   Euler step x <- normalize(x + dt A(x)), after compilation), with attnlab's default kernel (``method="auto"``,
   which is the a-priori-shift JAX kernel on a GPU, :func:`attnlab.bruno.attention.default_blocks` and
   :func:`attnlab.bruno.attention.default_form`); and the shift kernel's sums alone in variants of the Pallas kernel
   (:func:`attnlab.bruno.attention_gpu.shifted_sums`: block shapes and warps, ``prefetch``, ``exp_split`` (a share
   of the exp2's by the polynomial on the multiply-add units), ``mufu``), at N = 5e4 and 2e5 (``--short``; without
   it also at 1e4, with more block shapes and the XLA forms of :data:`attnlab.bruno.attention.FORMS`). Each rate is
   also given as a fraction of the card's exp bound, multiprocessors x 16 exp2 per clock x the maximum SM clock (the
   multiprocessor count from JAX's device, the clock from ``nvidia-smi --query-gpu=clocks.max.sm``; both recorded).
   Accuracy: the float32 output against the same attention in float64 (N = 1e4 and 5e4), as
   ||A - A_64|| / ||A_64||, for the default step and every Pallas variant.
3. **sdpa** (only when named; a process of its own, PyTorch only: the two frameworks never share the GPU's memory):
   the same step with ``torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=beta)`` (Bruno et al.'s
   method), q, k, v of shape (1, 1, N, d), unpadded and zero-padded to head dimension 8, each with PyTorch's own
   dispatch and with each backend forced (efficient, flash, cuDNN, math; a backend that refuses the inputs is
   recorded with its reason), on the same tokens; its output is compared with attnlab's and with the float64
   reference.
4. **presets** (only when named): the presets with the largest work at full size, one ``python -m attnlab run
   PRESET --no-figures`` process each (:data:`PRESETS`).
5. **reproduce**: ``python -m attnlab reproduce --out DIR`` at full size, with the scheduling attnlab chooses
   (``--reproduce-workers`` passes ``--workers``; ``--papers`` limits it), into a new folder, with a compilation
   cache of its own that starts empty. Each preset's elapsed time (``summary.json``), when it finished after the
   start, its checks (passed, failed, not evaluated; controls rejected) and whatever time split its run records,
   next to the README's full time on two CPU cores; the whole wall time, the closing line, the presets that had not
   finished. The run folders are read every few seconds and at the cut-off, so a reproduction cut off by the
   deadline still leaves every finished preset in the JSON. When the first pass leaves time for it, a second pass
   into a new folder with the same (now warm) compilation cache measures the times with the cache.
6. **tests**: ``pytest -m jax_path`` (the JAX-path tests of every paper, marked in ``tests/conftest.py``) on the GPU.

Every stage's failure is recorded in the JSON and the later stages still run.

Usage (on the GPU machine, from the repository root): ``bash bench/gpu.sh OUT [options]`` (installs what the image
lacks from ``.whl/`` and runs ``python bench/gpu.py all --out OUT``). ``--smoke`` runs every stage at toy sizes (the
check of the script on a machine without a GPU: the Pallas kernels in Pallas's interpreter, ``reproduce PAPER
--quick`` for one paper, the SLR tests). Back here, ``python tools/bench_table.py --import gpu OUT/gpu.json`` saves
the run under ``bench/results/<device>/`` and adds its row to the benchmark table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = (10_000, 50_000, 200_000)
SMOKE_SIZES = (500, 1500)
VARIANT_SIZES = (50_000, 200_000)
"""The sizes at which --short measures the Pallas variants (the float64 check at the first, the rate at the last)."""
EXP2_PER_CLOCK = 16
"""exp2 per clock per multiprocessor of the special-function units (MUFU.EX2) of NVIDIA's Volta to Hopper GPUs."""
KNOWN_CARDS = {"NVIDIA H100 80GB HBM3": (132, 1980.0), "NVIDIA H200": (132, 1980.0), "NVIDIA H100 PCIe": (114, 1755.0)}
"""device_kind -> (multiprocessors, maximum SM clock in MHz) by NVIDIA's datasheets: used only where the device
does not say."""
PALLAS_VARIANTS = (  # (block_q, block_k, num_warps, prefetch, exp_split, mufu), the most telling first
    (64, 32, 4, False, (0, 1), "exp2"),  # the default
    (64, 32, 4, True, (0, 1), "exp2"),
    (32, 32, 4, False, (0, 1), "exp2"),
    (32, 32, 4, True, (0, 1), "exp2"),
    (64, 32, 4, False, (0, 1), "ftz"),
    (64, 32, 4, False, (1, 2), "exp2"),
    (64, 32, 4, False, (1, 4), "exp2"),
    (64, 32, 4, False, (1, 1), "exp2"),
    (32, 32, 4, True, (0, 1), "ftz"),
    (64, 32, 8, True, (0, 1), "exp2"),
    (64, 32, 4, True, (1, 2), "ftz"),
    (32, 32, 4, True, (1, 4), "ftz"),
    (64, 32, 4, False, (0, 2), "exp2"),
    (64, 64, 8, True, (0, 1), "ftz"),
)
"""Variants of the Pallas kernel (attnlab.bruno.attention_gpu.shifted_sums) measured by the kernels stage."""
MORE_PALLAS_VARIANTS = ((128, 32, 4, False, (0, 1), "exp2"), (128, 64, 8, False, (0, 1), "exp2"),
                        (32, 128, 4, False, (0, 1), "exp2"))
"""Block shapes measured before (slower than 64 x 32 on an H100), only without --short."""
SMOKE_VARIANTS = (0, 1, 4, 5, 10)
"""Indices into PALLAS_VARIANTS that --smoke measures: every option at least once."""
BETA, DT, D = 30.0, 1e-2, 3
PRESETS = (  # (name, --set overrides, share of the presets' time)
    ("sakai-vary-heads", [], 2.0),
    ("bruno-alignment", [], 0.6),
    ("bruno-forward-heat", [], 0.6),
    ("dohmatob-rgd", ["implementation=jax"], 1.2),
    ("duranthon-sample-complexity", ["sqrt_ND=10000"], 2.0),
)
DEFAULT_SHARES = "kernels=0.20,sdpa=0.10,presets=0.30,reproduce=0.50"
"""Shares of --deadline per stage (tests: what is left); the stages not run give their time to the later ones."""
SMOKE_PAPER = "bruno"
"""The paper --smoke reproduces at quick size."""


def variant_name(bq, bk, warps, prefetch, split, mufu) -> str:
    """``pallas-64x32-w4/xla`` for the default (the name earlier runs used), ``-pf`` for prefetch, ``/ftz`` for the
    PTX exp2, ``+poly1of2`` for a share of exp2's by the polynomial, ``+unroll2`` for groups of blocks without it."""
    name = f"pallas-{bq}x{bk}-w{warps}{'-pf' if prefetch else ''}/{'xla' if mufu == 'exp2' else mufu}"
    k, g = split
    return name + (f"+poly{k}of{g}" if k else (f"+unroll{g}" if g > 1 else ""))


def _now():
    return time.perf_counter()


def _median_time(fn, sync, *, min_reps=3, max_reps=20, target_s=1.0):
    """Median wall time of ``fn()`` after one warm-up call (compilation), ``sync`` waiting for the device."""
    sync(fn())
    times, start = [], _now()
    while len(times) < min_reps or (len(times) < max_reps and _now() - start < target_s):
        t0 = _now()
        sync(fn())
        times.append(_now() - t0)
    return statistics.median(times)


def _error_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------------------------------------------- JAX kernels
def _nvidia_smi(query: str) -> str | None:
    try:
        proc = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip().splitlines()[0].strip() if proc.returncode == 0 and proc.stdout.strip() else None


def exp_bound(device) -> dict:
    """The card's exp bound: multiprocessors (JAX's ``core_count``, else :data:`KNOWN_CARDS`) x EXP2_PER_CLOCK x
    the maximum SM clock (``nvidia-smi``, else :data:`KNOWN_CARDS`), with both inputs and where each came from;
    without the bound where either is missing (a CPU)."""
    out: dict = {"exp2_per_clock_per_sm": EXP2_PER_CLOCK}
    gpu = device.platform == "gpu"
    known = KNOWN_CARDS.get(device.device_kind, (None, None)) if gpu else (None, None)
    sms = getattr(device, "core_count", None) if gpu else None
    out["sm_count"], out["sm_count_from"] = (int(sms), "jax") if sms else (known[0], "table" if known[0] else None)
    clock = _nvidia_smi("clocks.max.sm")
    try:
        out["sm_clock_max_mhz"], out["sm_clock_from"] = float(clock), "nvidia-smi"
    except (TypeError, ValueError):
        out["sm_clock_max_mhz"], out["sm_clock_from"] = known[1], ("table" if known[1] else None)
    if out["sm_count"] and out["sm_clock_max_mhz"]:
        out["exp_bound_per_s"] = out["sm_count"] * EXP2_PER_CLOCK * out["sm_clock_max_mhz"] * 1e6
    return out


def stage_kernels(work: Path, sizes, budget_s: float, short: bool = False, smoke: bool = False) -> dict:
    import importlib

    import jax
    import jax.numpy as jnp
    import numpy as np

    from attnlab import runtime
    from attnlab.bruno.attention_gpu import shifted_sums
    from attnlab.bruno.initial import uniform_sphere
    from attnlab.bruno.integrate import make_model, step

    att = importlib.import_module("attnlab.bruno.attention")
    runtime.configure()
    deadline = _now() + budget_s
    eye = jnp.eye(D, dtype=jnp.float32)
    model = make_model(D, beta=BETA, kernel_dtype="float32", kernel_method="auto")
    step_fn = jax.jit(lambda x: step(x, model, DT))
    attention_fn = jax.jit(lambda x: att.attention(x, eye, eye, eye, BETA))
    sync = jax.block_until_ready
    gpu = jax.default_backend() == "gpu"
    bound = exp_bound(jax.devices()[0])
    out = {"backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
           "default_form": att.default_form(jnp.float32), **bound, "sizes": {}}
    per_s = bound.get("exp_bound_per_s")

    def rate(n, t):
        r = {"s": t, "gpairs_per_s": n * n / t / 1e9}
        if per_s:
            r["exp_bound_fraction"] = n * n / t / per_s
        return r

    pallas = [PALLAS_VARIANTS[i] for i in SMOKE_VARIANTS] if smoke else list(PALLAS_VARIANTS)
    if not short and not smoke:
        pallas += list(MORE_PALLAS_VARIANTS)
    data: dict[int, tuple] = {}  # N -> (tokens, float64 reference or None)
    for n in sizes:
        row: dict = {"n": n, "default_blocks": list(att.default_blocks(n)), "variants": {}}
        out["sizes"][str(n)] = row
        if _now() > deadline:
            row["skipped"] = "deadline"
            continue
        x = uniform_sphere(jax.random.key(n), n, D).astype(jnp.float32)
        np.save(work / f"x{n}.npy", np.asarray(x))
        data[n] = (x, None)
        try:
            t = _median_time(partial(step_fn, x), sync)
            row["step_s"], row["step_gpairs_per_s"] = t, n * n / t / 1e9
            if per_s:
                row["step_exp_bound_fraction"] = n * n / t / per_s
            a = attention_fn(x)
            np.save(work / f"a{n}.npy", np.asarray(a))
        except Exception as exc:  # noqa: BLE001  (an out-of-memory is a result)
            row["step_error"] = _error_line(exc)
            continue
        if n <= 50_000:
            with runtime.x64():
                x64 = x.astype(jnp.float64)
                ref = np.asarray(att.attention(x64, jnp.eye(D), jnp.eye(D), jnp.eye(D), BETA, method="jax"))
            np.save(work / f"ref{n}.npy", ref)
            data[n] = (x, ref)
            row["rel_error_vs_float64"] = float(np.linalg.norm(np.asarray(a, np.float64) - ref) / np.linalg.norm(ref))
    if gpu:
        out["sm_clock_after_steps_mhz"] = _nvidia_smi("clocks.sm")

    # The shift kernel's sums alone, variant by variant (the most telling first, so that a cut-off loses the
    # least), each at the largest N first (its rate), then at the smaller ones (the float64 check).
    variant_sizes = sorted((n for n in data if smoke or not short or n in VARIANT_SIZES), reverse=True)
    variants: dict = {}
    for bq, bkk, warps, pf, split, mufu in pallas:
        variants[variant_name(bq, bkk, warps, pf, split, mufu)] = ("pallas", bq, bkk, warps, pf, split, mufu)
    if not short and not smoke:
        for name, (bq, form, exp) in {"cpu-tiles/matmul/poly": (1024, "matmul", "poly"),
                                      "default/matmul/poly": (None, "matmul", "poly"),
                                      "default/fused/poly": (None, "fused", "poly"),
                                      "default/reduce/poly": (None, "reduce", "poly"),
                                      "default/reduce/xla": (None, "reduce", "xla")}.items():
            variants[name] = ("xla", bq, form, exp)
    beta = jnp.float32(BETA)
    for name, spec in variants.items():
        for n in variant_sizes:
            row = out["sizes"][str(n)]
            if _now() > deadline:
                row["variants"][name] = {"skipped": "deadline"}
                continue
            x, ref = data[n]
            v1 = jnp.concatenate([x, jnp.ones((n, 1), jnp.float32)], axis=1)
            if spec[0] == "pallas":
                _, bq, bkk, warps, pf, split, mufu = spec
                q2, m2 = att._shift(x, x, beta)
                fn = partial(shifted_sums, q2, m2, x, v1, block_q=bq, block_k=bkk, num_warps=warps, prefetch=pf,
                             exp_split=split, mufu=mufu, interpret=not gpu)
            else:
                _, bq, form, exp = spec
                bq, bkk = (bq, 2048) if bq else (n, att.default_blocks(n)[1])
                fn = partial(jax.jit(lambda q, v1, beta, bq=bq, bkk=bkk, form=form, exp=exp:
                                     att._shifted(q, q, v1, beta, bq, bkk, form=form, exp=exp)[1]), x, v1, beta)
            try:
                rec = rate(n, _median_time(fn, sync))
                if ref is not None:
                    acc = fn()
                    a_p = np.asarray(acc[:, :D] / acc[:, D:], np.float64)
                    rec["rel_error_vs_float64"] = float(np.linalg.norm(a_p - ref) / np.linalg.norm(ref))
            except Exception as exc:  # noqa: BLE001
                rec = {"error": _error_line(exc)}
            row["variants"][name] = rec
    if gpu:
        out["sm_clock_after_variants_mhz"] = _nvidia_smi("clocks.sm")
    return out


# ---------------------------------------------------------------------------------------------------- torch SDPA
def stage_sdpa(work: Path, sizes, budget_s: float, short: bool = False) -> dict:
    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    deadline = _now() + budget_s
    dev = torch.device("cuda")
    out = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "sizes": {}}
    backends = {"dispatch": None, "efficient": SDPBackend.EFFICIENT_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}

    def sync(_):
        torch.cuda.synchronize()

    for n in sizes:
        row: dict = {"n": n, "configs": {}}
        out["sizes"][str(n)] = row
        path = work / f"x{n}.npy"
        if not path.is_file():
            row["skipped"] = "no tokens from the JAX stage"
            continue
        x = torch.from_numpy(np.load(path)).to(dev)
        ours = np.load(work / f"a{n}.npy") if (work / f"a{n}.npy").is_file() else None
        ref = np.load(work / f"ref{n}.npy") if (work / f"ref{n}.npy").is_file() else None
        for pad in (0, 8):
            for bname, backend in backends.items():
                name = f"{bname}/pad{pad}" if pad else f"{bname}/d{D}"
                if short and name not in ("dispatch/d3", "dispatch/pad8", "efficient/pad8"):
                    continue
                if _now() > deadline:
                    row["configs"][name] = {"skipped": "deadline"}
                    continue
                if bname == "math" and n > 50_000:
                    row["configs"][name] = {"skipped": f"the math backend stores N^2 scores ({4 * n * n / 2**30:.0f}"
                                                       " GiB in float32)"}
                    continue

                def attn(x=x, pad=pad):
                    q = x[None, None]
                    if pad:
                        q = F.pad(q, (0, pad - D))
                    return F.scaled_dot_product_attention(q, q, q, scale=BETA)[0, 0, :, :D]

                def step_once(attn=attn, x=x):
                    y = x + DT * attn()
                    return y / torch.linalg.norm(y, dim=1, keepdim=True)

                try:
                    with torch.no_grad(), (sdpa_kernel([backend]) if backend is not None else _null()):
                        t = _median_time(step_once, sync)
                        a = attn().double().cpu().numpy()
                except Exception as exc:  # noqa: BLE001  (a refusal or an out-of-memory is a result)
                    row["configs"][name] = {"error": _error_line(exc)}
                    torch.cuda.empty_cache()
                    continue
                cfg = {"step_s": t, "gpairs_per_s": n * n / t / 1e9}
                if ref is not None:
                    cfg["rel_error_vs_float64"] = float(np.linalg.norm(a - ref) / np.linalg.norm(ref))
                if ours is not None:
                    cfg["rel_diff_vs_attnlab"] = float(np.linalg.norm(a - ours) / np.linalg.norm(ours))
                row["configs"][name] = cfg
                torch.cuda.empty_cache()
        timed = {k: v for k, v in row["configs"].items() if "gpairs_per_s" in v}
        dispatch = {k: v for k, v in timed.items() if k.startswith("dispatch/")}
        if dispatch:  # Bruno et al.'s call: PyTorch's own dispatch, the faster of unpadded and padded
            best = max(dispatch, key=lambda k: dispatch[k]["gpairs_per_s"])
            row["paper_method"] = best
            row["paper_gpairs_per_s"] = dispatch[best]["gpairs_per_s"]
        if timed:
            best = max(timed, key=lambda k: timed[k]["gpairs_per_s"])
            row["fastest"] = best
            row["fastest_gpairs_per_s"] = timed[best]["gpairs_per_s"]
    return out


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ---------------------------------------------------------------------------------------------------- presets
def stage_presets(runs: Path, budget_s: float, smoke: bool, only=None) -> dict:
    out = {}
    presets = [p for p in PRESETS if not only or p[0] in only]
    total_share = sum(share for _, _, share in presets)
    deadline = _now() + budget_s
    for i, (name, sets, share) in enumerate(presets):
        left = deadline - _now()
        rest = sum(s for _, _, s in presets[i:])
        limit = max(0.0, left * share / rest) if not smoke else left / (len(presets) - i)
        if limit < 5:
            out[name] = {"skipped": "deadline"}
            continue
        cmd = [sys.executable, "-m", "attnlab", "run", name, "--out", str(runs / name), "--no-figures", "--force"]
        cmd += ["--quick"] if smoke else []
        for s in sets if not smoke else [s for s in sets if not s.startswith("sqrt_ND")]:
            cmd += ["--set", s]
        t0 = _now()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limit, cwd=ROOT)
        except subprocess.TimeoutExpired:
            out[name] = {"timed_out_after_s": round(limit, 1), "sets": sets}
            continue
        wall = _now() - t0
        rec: dict = {"wall_s": round(wall, 2), "exit": proc.returncode, "sets": sets}
        if proc.returncode != 0:
            rec["error"] = (proc.stderr.strip() or proc.stdout.strip())[-1500:]
        summary = runs / name / "summary.json"
        if summary.is_file() and proc.returncode == 0:
            s = json.loads(summary.read_text())
            checks = s.get("checks", [])
            rec.update(elapsed_s=round(s.get("elapsed_s", float("nan")), 2),
                       checks_passed=sum(bool(c.get("passed")) for c in checks), checks=len(checks),
                       controls_rejected=sum(bool(c.get("control_rejected")) for c in checks),
                       implementations=s.get("implementations"), finding=s.get("finding"))
            cfg = json.loads((runs / name / "config.json").read_text())
            rec["devices"], rec["jax_backend"] = cfg.get("devices"), cfg.get("jax_backend")
            rec["failed_checks"] = [c.get("name") for c in checks if not c.get("passed")]
        out[name] = rec
    out["_budget_s"] = round(budget_s, 1)
    out["_share"] = total_share
    return out


# ---------------------------------------------------------------------------------------------------- reproduce
def cpu_full_times(readme: Path = ROOT / "README.md") -> dict:
    """The README's presets table: preset -> {"paper", "full_s", "quick_s"} (None where "not measured"), and under
    "_note" the sentence saying how those times were taken."""
    out: dict = {}
    text = readme.read_text() if readme.is_file() else ""
    note = re.search(r"^Run times on .*$", text, re.M)
    out["_note"] = note.group(0) if note else None

    def seconds(cell: str):
        m = re.fullmatch(r"\s*([\d.]+) (s|min)\s*", cell)
        return None if not m else float(m.group(1)) * (60.0 if m.group(2) == "min" else 1.0)

    for line in text.splitlines():
        m = re.match(r"^\| `([\w-]+)` \| (\w+) \|.*\|([^|]*)\|([^|]*)\|\s*$", line)
        if m:
            out[m.group(1)] = {"paper": m.group(2), "full_s": seconds(m.group(3)), "quick_s": seconds(m.group(4))}
    return out


def _check_counts(checks: list) -> dict:
    """Counts as ``attnlab.app.report.check_summary`` makes them, for one run's checks."""
    n = {"checks": 0, "passed": 0, "failed": 0, "not evaluated": 0, "inconclusive": 0, "controls": 0, "rejected": 0}
    for c in checks:
        n["checks"] += 1
        status = c.get("status") or ("passed" if c.get("passed") else "failed")
        n[status if status in n else "failed"] += 1
        if c.get("control_rejected") is not None:
            n["controls"] += 1
            n["rejected"] += bool(c["control_rejected"])
    return n


def _timing_fields(record: dict) -> dict:
    """Whatever a run's summary.json or config.json records about its time besides ``elapsed_s``: top-level numbers
    whose name ends in ``_s`` or mentions time, and mappings named like ``timings``."""
    out = {}
    for k, v in record.items():
        low = k.lower()
        if k == "elapsed_s":
            continue
        timely = low.endswith("_s") or "time" in low or "timing" in low
        if isinstance(v, (int, float)) and not isinstance(v, bool) and timely:
            out[k] = v
        elif isinstance(v, dict) and (timely or "split" in low):
            out[k] = v
    return out


def collect_runs(runs: Path, t0_epoch: float, cpu: dict, quick: bool) -> dict:
    """Every finished run under ``runs`` (a folder holding summary.json, hidden folders skipped): preset -> its
    record, with the CPU's time beside it."""
    out = {}
    for summary in sorted(runs.rglob("summary.json")) if runs.is_dir() else []:
        rel = summary.relative_to(runs).parts
        if any(p.startswith(".") for p in rel):
            continue
        try:
            s = json.loads(summary.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        name = s.get("preset") or rel[0]
        rec: dict = {"elapsed_s": s.get("elapsed_s"), "finished_after_s": round(summary.stat().st_mtime - t0_epoch, 1),
                     **_check_counts(s.get("checks", [])), "implementations": s.get("implementations"),
                     "run_dir": str(summary.parent.relative_to(runs))}
        rec["failed_checks"] = [c.get("name") for c in s.get("checks", [])
                                if (c.get("status") or ("passed" if c.get("passed") else "failed")) != "passed"]
        split = _timing_fields(s)
        try:
            cfg = json.loads((summary.parent / "config.json").read_text())
            rec["devices"], rec["jax_backend"] = cfg.get("devices"), cfg.get("jax_backend")
            split.update({f"config.{k}": v for k, v in _timing_fields(cfg).items()})
        except (OSError, json.JSONDecodeError):
            pass
        if split:
            rec["time_split"] = split
        ref = cpu.get(name, {}).get("quick_s" if quick else "full_s")
        rec["cpu_s"] = ref
        if ref and isinstance(rec["elapsed_s"], (int, float)):
            rec["ratio_to_cpu"] = round(rec["elapsed_s"] / ref, 3)
        out[name] = rec
    return out


def _cache_state(path: Path) -> dict:
    files = [p for p in path.rglob("*") if p.is_file()] if path.is_dir() else []
    return {"files": len(files), "mb": round(sum(p.stat().st_size for p in files) / 2**20, 1)}


def _stop(proc: subprocess.Popen) -> None:
    """End the process group that ``proc`` leads (the reproduction and its Dask workers), SIGTERM then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def reproduce_pass(runs: Path, log: Path, budget_s: float, args: list[str], env: dict, cpu: dict, quick: bool,
                   save) -> dict:
    """One ``attnlab reproduce`` into the new folder ``runs``, cut off at ``budget_s``; the finished runs are read
    every few seconds (``save(record)`` with the partial record) and at the end."""
    cmd = [sys.executable, "-m", "attnlab", "reproduce", "--out", str(runs), *args]
    rec: dict = {"command": " ".join(["attnlab", "reproduce", "--out", "DIR", *args]), "budget_s": round(budget_s, 1)}
    t0, t0_epoch = _now(), time.time()
    with open(log, "w") as f:
        try:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=env, start_new_session=True)
        except OSError as exc:
            rec["error"] = _error_line(exc)
            return rec
        last = t0
        while proc.poll() is None:
            if _now() - t0 > budget_s:
                rec["cut_off_after_s"] = round(_now() - t0, 1)
                _stop(proc)
                break
            time.sleep(1.0)
            if _now() - last > 10:
                last = _now()
                rec["presets"] = collect_runs(runs, t0_epoch, cpu, quick)
                rec["wall_s"] = round(_now() - t0, 1)
                save(rec)
    _stop(proc)  # the workers of a finished run are gone already; of a cut-off one, ended here
    rec["wall_s"] = round(_now() - t0, 1)
    rec["exit"] = proc.returncode
    rec["presets"] = collect_runs(runs, t0_epoch, cpu, quick)
    text = log.read_text(errors="replace") if log.is_file() else ""
    closing = [ln for ln in text.splitlines() if "checks passed" in ln]
    rec["closing_line"] = closing[-1].strip() if closing else None
    rec["failed_presets"] = re.findall(r"^(\S+): FAILED", text, re.M)
    rec["skipped_presets"] = dict(re.findall(r"^(\S+): skipped, not run \((.*)\)", text, re.M))
    if rec.get("exit") not in (0, None) or "cut_off_after_s" in rec:
        rec["log_tail"] = text[-2000:]
    done = rec["presets"]
    total = _check_counts([])
    for r in done.values():
        for k in total:
            total[k] += r.get(k, 0)
    rec["totals"] = total
    rec["finished"] = len(done)
    rec["sum_elapsed_s"] = round(sum(r["elapsed_s"] or 0 for r in done.values()), 1)
    slower = {k: (r["elapsed_s"], r["cpu_s"]) for k, r in done.items()
              if r.get("cpu_s") and isinstance(r.get("elapsed_s"), (int, float)) and r["elapsed_s"] > r["cpu_s"]}
    rec["slower_than_cpu"] = slower
    return rec


def _keep_records(runs: Path, dest: Path) -> None:
    """Copy each run's summary.json and config.json, and the report, from ``runs`` to ``dest`` (what comes back)."""
    if not runs.is_dir():
        return
    for f in [*runs.rglob("summary.json"), *runs.rglob("config.json"), *runs.glob("report.md")]:
        rel = f.relative_to(runs)
        if any(p.startswith(".") for p in rel.parts):
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest / rel)


def stage_reproduce(work: Path, out_dir: Path, budget_s: float, smoke: bool, workers: int | None, papers: list[str],
                    passes: int, save) -> dict:
    """``attnlab reproduce`` at full size (``--smoke``: ``SMOKE_PAPER`` at quick size), with a compilation cache
    that starts empty; a second pass with the cache it left when the first leaves time for it."""
    deadline = _now() + budget_s
    cpu = cpu_full_times()
    papers = papers or ([SMOKE_PAPER] if smoke else [])
    expected = sorted(k for k, v in cpu.items() if not k.startswith("_") and (not papers or v["paper"] in papers))
    args = [*papers, *(["--quick"] if smoke else []), *(["--workers", str(workers)] if workers else [])]
    cache = work / "reproduce-jax-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "ATTNLAB_JAX_CACHE": str(cache)}
    out: dict = {"cpu_reference": cpu.get("_note"), "expected_presets": expected, "compile_cache": str(cache),
                 "passes": []}
    for i in range(passes):
        left = deadline - _now()
        if i and left < 1.3 * out["passes"][-1]["wall_s"] + 10:
            out["second_pass"] = f"not run: {left:.0f} s left, the first pass took {out['passes'][-1]['wall_s']} s"
            break
        runs = work / f"reproduce-{i + 1}"
        shutil.rmtree(runs, ignore_errors=True)
        rec = {"cache_before": _cache_state(cache)}
        out["passes"].append(rec)

        def partial_save(r, rec=rec):
            rec.update(r)
            save(out)

        rec.update(reproduce_pass(runs, out_dir / f"reproduce-{i + 1}.log", max(5.0, left), args, env, cpu, smoke,
                                  partial_save))
        rec["cache_after"] = _cache_state(cache)
        _keep_records(runs, out_dir / f"reproduce-{i + 1}")
        rec["not_finished"] = [p for p in expected if p not in rec["presets"] and p not in rec["skipped_presets"]]
        save(out)
    return out


# ---------------------------------------------------------------------------------------------------- tests
def stage_tests(out_dir: Path, budget_s: float, smoke: bool, workers: int = 8) -> dict:
    junit = out_dir / "tests.xml"
    log = out_dir / "tests.log"
    workers = "2" if smoke else str(workers)
    cmd = [sys.executable, "-m", "pytest", "-m", "jax_path", "-n", workers, "-p", "no:cacheprovider", "-v",
           "--timeout", "240", f"--junitxml={junit}"]
    if smoke:
        cmd += ["tests/slr"]
    t0 = _now()
    with open(log, "w") as f:
        try:
            proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=budget_s, cwd=ROOT)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    rec: dict = {"wall_s": round(_now() - t0, 1), "exit": code}
    text = log.read_text(errors="replace")
    if junit.is_file() and code != "timeout":
        root = ET.parse(junit).getroot()
        suites = [root] if root.tag == "testsuite" else list(root)
        for k in ("tests", "failures", "errors", "skipped"):
            rec[k] = sum(int(s.get(k, 0)) for s in suites)
        rec["passed"] = rec["tests"] - rec["failures"] - rec["errors"] - rec["skipped"]
        failed = []
        for case in root.iter("testcase"):
            for bad in list(case.findall("failure")) + list(case.findall("error")):
                msg = (bad.get("message") or "").strip().splitlines()
                failed.append(f"{case.get('classname')}::{case.get('name')}: {msg[0][:200] if msg else ''}")
        rec["failed"] = failed
    else:  # cut off: count the per-test lines pytest -v printed so far
        for k in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            rec[k.lower()] = len(re.findall(rf"\b{k}\b tests/", text))
        rec["failed"] = re.findall(r"(?:FAILED|ERROR) (tests/\S+)", text)[:40]
    return rec


# ---------------------------------------------------------------------------------------------------- driver
def environment() -> dict:
    import importlib.metadata as md

    from attnlab import runtime

    env = {"python": platform.python_version(), "cpu_count": os.cpu_count(),
           "accelerator_plugin": runtime.accelerator_plugin(), "XLA_FLAGS": os.environ.get("XLA_FLAGS")}
    for pkg in ("jax", "jaxlib", "numpy", "scipy", "torch", "equinox", "diffrax", "optimistix", "lineax", "xarray",
                "zarr", "pydantic", "dask", "matplotlib", "typer", "rich"):
        try:
            env[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            env[pkg] = None
    try:
        env["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version,clocks.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True,
                                           timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        env["nvidia_smi"] = _error_line(exc)
    env["sm_clock_max_mhz"] = _nvidia_smi("clocks.max.sm")
    code = ("import jax, json; d = jax.devices(); print(json.dumps([jax.default_backend(), [x.device_kind for x in d], "
            "[getattr(x, 'core_count', None) for x in d]]))")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        found = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError) as exc:
        proc, found = None, None
        env["jax_devices"] = _error_line(exc)
    if found:
        env["jax_devices"], env["jax_core_counts"] = found[:2], found[2]
    elif proc is not None:
        env["jax_devices"] = proc.stderr.strip()[-500:]
    return env


def _sub(stage: str, out_dir: Path, work: Path, budget: float, smoke: bool, short: bool) -> dict:
    """Run one stage in a process of its own (cut off at its budget plus a margin), return its JSON."""
    result = work / f"{stage}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, stage, "--out", str(out_dir), "--work", str(work), "--deadline", str(budget)]
    cmd += (["--smoke"] if smoke else []) + (["--short"] if short else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget + 30, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"cut off after {budget + 30:.0f} s"}
    if result.is_file():
        return json.loads(result.read_text())
    return {"error": (proc.stderr.strip() or proc.stdout.strip())[-1500:]}


def _best(variants: dict) -> str | None:
    timed = {k: v for k, v in variants.items() if "gpairs_per_s" in v}
    return max(timed, key=lambda k: timed[k]["gpairs_per_s"]) if timed else None


def summarise(res: dict) -> dict:
    s: dict = {"device": res.get("environment", {}).get("nvidia_smi")}
    kern = res.get("kernels", {})
    k, t = kern.get("sizes", {}), res.get("sdpa", {}).get("sizes", {})
    s["exp_bound"] = {key: kern.get(key) for key in ("sm_count", "sm_count_from", "sm_clock_max_mhz", "sm_clock_from",
                                                     "exp2_per_clock_per_sm", "exp_bound_per_s")}
    for n, row in k.items():
        ours, paper = row.get("step_gpairs_per_s"), t.get(n, {}).get("paper_gpairs_per_s")
        variants = row.get("variants", {})
        best = _best(variants)
        s[f"n{n}"] = {"attnlab_gpairs_per_s": ours, "step_exp_bound_fraction": row.get("step_exp_bound_fraction"),
                      "sdpa_gpairs_per_s": paper, "sdpa_method": t.get(n, {}).get("paper_method"),
                      "sdpa_fastest": t.get(n, {}).get("fastest"),
                      "ratio_attnlab_over_sdpa": ours / paper if ours and paper else None,
                      "best_variant": best,
                      "best_variant_gpairs_per_s": variants[best]["gpairs_per_s"] if best else None,
                      "best_variant_exp_bound_fraction": variants[best].get("exp_bound_fraction") if best else None,
                      "rel_error_vs_float64": row.get("rel_error_vs_float64")}
        if ours:  # flat headline figures (the benchmark table)
            s[f"gpairs_per_s_n{n}"] = ours
        if ours and paper:
            s[f"sdpa_gpairs_per_s_n{n}"], s[f"ratio_vs_sdpa_n{n}"] = paper, ours / paper
    if k:  # every variant's rate at the largest N with its float64 error at the largest N that has one
        sizes = sorted(k, key=int)
        big = k[sizes[-1]].get("variants", {})
        checked = [k[n].get("variants", {}) for n in sizes if k[n].get("rel_error_vs_float64") is not None]
        s["variants_at_largest_n"] = {
            name: {"gpairs_per_s": r.get("gpairs_per_s"), "exp_bound_fraction": r.get("exp_bound_fraction"),
                   "rel_error_vs_float64": checked[-1].get(name, {}).get("rel_error_vs_float64") if checked else None,
                   **({"error": r["error"]} if "error" in r else {}), **({"skipped": r["skipped"]} if "skipped" in r
                                                                          else {})}
            for name, r in sorted(big.items(), key=lambda kv: -kv[1].get("gpairs_per_s", 0))}
    if "presets" in res:
        s["presets"] = {p: {k2: r.get(k2) for k2 in ("wall_s", "elapsed_s", "checks_passed", "checks",
                                                      "controls_rejected", "exit", "timed_out_after_s", "skipped")}
                        for p, r in res.get("presets", {}).items() if not p.startswith("_")}
    rep = res.get("reproduce", {})
    if rep:
        s["reproduce"] = [{k2: r.get(k2) for k2 in ("wall_s", "cut_off_after_s", "exit", "finished", "not_finished",
                                                     "totals", "sum_elapsed_s", "slower_than_cpu", "cache_before",
                                                     "closing_line", "error")}
                          for r in rep.get("passes", [])]
        if "error" in rep:
            s["reproduce_error"] = rep["error"]
    tests = res.get("tests", {})
    s["tests"] = {k2: tests.get(k2) for k2 in ("passed", "failed", "failures", "errors", "skipped", "exit", "wall_s")}
    return s


STAGES = ("kernels", "sdpa", "presets", "reproduce", "tests")


def _shares(text: str, stages: list[str]) -> dict:
    shares = {k: float(v) for k, v in (item.split("=") for item in text.split(",") if item)}
    if "tests" in stages and "tests" not in shares:
        shares["tests"] = max(0.1, 1.0 - sum(shares.get(st, 0.0) for st in stages if st != "tests"))
    return shares


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=("all", "kernels", "sdpa", "summary"))
    p.add_argument("--from", dest="source", type=Path, help="summary: the gpu.json of a run to summarise again")
    p.add_argument("--out", type=Path, default=Path("gpu-out"))
    p.add_argument("--work", type=Path, default=None, help="scratch directory (tokens and outputs shared by stages)")
    p.add_argument("--deadline", type=float, default=450.0, help="seconds for the whole run (or this stage)")
    p.add_argument("--smoke", action="store_true", help="toy sizes: check the script without a GPU")
    p.add_argument("--short", action="store_true",
                   help="kernels: the Pallas variants at N = 5e4 and 2e5 only; sdpa: PyTorch's own dispatch only")
    p.add_argument("--presets", default="", help="presets stage: comma-separated presets (default: all of PRESETS)")
    p.add_argument("--workers", type=int, default=8, help="test processes")
    p.add_argument("--reproduce-workers", type=int, default=None,
                   help="reproduce: --workers for attnlab reproduce (default: none given, attnlab's choice)")
    p.add_argument("--papers", default="", help="reproduce: comma-separated papers (default: all)")
    p.add_argument("--reproduce-passes", type=int, default=2,
                   help="reproduce: passes (the second with the first's compilation cache, when time is left)")
    p.add_argument("--stages", default="kernels,reproduce,tests",
                   help=f"the stages to run, comma-separated, of {', '.join(STAGES)}")
    p.add_argument("--shares", default=DEFAULT_SHARES,
                   help="stage=share of the deadline, comma-separated (tests: what the others leave)")
    args = p.parse_args(argv)
    out_dir = args.out.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    work = (args.work or Path(os.environ.get("TMPDIR", "/tmp")) / "attnlab-gpu").resolve()
    work.mkdir(parents=True, exist_ok=True)
    sizes = SMOKE_SIZES if args.smoke else SIZES
    if args.stage == "summary":
        print(json.dumps(summarise(json.loads(args.source.read_text()))))
        return 0
    if args.stage == "kernels":
        (work / "kernels.json").write_text(json.dumps(stage_kernels(work, sizes, args.deadline, args.short,
                                                                    args.smoke)))
        return 0
    if args.stage == "sdpa":
        (work / "sdpa.json").write_text(json.dumps(stage_sdpa(work, sizes, args.deadline, args.short)))
        return 0
    start = _now()
    path = out_dir / "gpu.json"
    res: dict = {"command": sys.argv[1:] if argv is None else list(argv)}

    def save():
        res["elapsed_s"] = round(_now() - start, 1)
        path.write_text(json.dumps(res, indent=1))

    try:
        res["environment"] = environment()
    except Exception as exc:  # noqa: BLE001  (recorded; the stages still run)
        res["environment"] = {"error": _error_line(exc)}
    save()
    print(json.dumps(res["environment"]), flush=True)
    left = lambda: args.deadline - (_now() - start)  # noqa: E731
    stages = [st for st in STAGES if st in args.stages.split(",")]
    shares = _shares(args.shares, stages)
    for i, stage in enumerate(stages):
        later = sum(shares.get(st, 0.0) for st in stages[i + 1:])
        budget = max(5.0, left() * shares.get(stage, 0.0) / max(shares.get(stage, 0.0) + later, 1e-9))
        if stage == "tests":
            budget = max(30.0, left() - 10)
        t0 = _now()
        try:
            if stage in ("kernels", "sdpa"):
                res[stage] = _sub(stage, out_dir, work, budget, args.smoke, args.short)
            elif stage == "presets":
                res[stage] = stage_presets(work / "runs", budget, args.smoke, [x for x in args.presets.split(",") if x])
            elif stage == "reproduce":
                def keep(rec):
                    res["reproduce"] = rec
                    save()

                res[stage] = stage_reproduce(work, out_dir, budget, args.smoke, args.reproduce_workers,
                                             [x for x in args.papers.split(",") if x], args.reproduce_passes, keep)
            else:
                res[stage] = stage_tests(out_dir, budget, args.smoke, args.workers)
        except Exception as exc:  # noqa: BLE001  (recorded; the later stages still run)
            res[stage] = {**res.get(stage, {}), "error": _error_line(exc)}
        res[stage]["_budget_s"] = round(budget, 1)
        res[stage]["_wall_s"] = round(_now() - t0, 1)
        save()
        print(stage, json.dumps(res[stage])[:3000], flush=True)
    try:
        res["summary"] = summarise(res)
    except Exception as exc:  # noqa: BLE001
        res["summary"] = {"error": _error_line(exc)}
    save()
    print(json.dumps(res["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
