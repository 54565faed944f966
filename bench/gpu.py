"""attnlab on one NVIDIA GPU: the JAX-path tests, the particle step against PyTorch's SDPA, the largest presets.

One run, bounded in time (``--deadline`` seconds in all; each stage gets a share and is cut off at it), writes
``OUT/gpu.json`` after every stage and prints a table and, last, the JSON summary:

1. **environment**: the devices JAX sees, the versions of JAX, PyTorch and attnlab's dependencies.
2. **kernels** (a process of its own, JAX only): the particle attention step of Bruno et al. (d = 3, beta = 30,
   Q = K = V = I, SA, float32 tokens) at N = 1e4, 5e4, 2e5 in pairs per second (N^2 / median wall time of one
   Euler step x <- normalize(x + dt A(x)), after compilation), with attnlab's default kernel (``method="auto"``,
   which is the a-priori-shift JAX kernel on a GPU, :func:`attnlab.bruno.attention.default_blocks` and
   :func:`attnlab.bruno.attention.default_form`); and the shift kernel's sums alone in every block form
   (:data:`attnlab.bruno.attention.FORMS`), with the polynomial or XLA's exp2, with the default key blocks or one
   block of all N keys, and with the CPU's 1024 x 2048 tiles. Accuracy: the float32 output against the same
   attention in float64 (N = 1e4 and 5e4), as ||A - A_64|| / ||A_64||.
3. **sdpa** (a process of its own, PyTorch only: the two frameworks never share the GPU's memory): the same step
   with ``torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=beta)`` (Bruno et al.'s method), q, k, v
   of shape (1, 1, N, d), unpadded and zero-padded to head dimension 8, each with PyTorch's own dispatch and with
   each backend forced (efficient, flash, cuDNN, math; a backend that refuses the inputs is recorded with its
   reason), on the same tokens; its output is compared with attnlab's and with the float64 reference.
4. **presets** at full size (``python -m attnlab run PRESET --no-figures``, one process each): bruno-forward-heat,
   bruno-alignment, sakai-vary-heads, dohmatob-rgd (``implementation=jax``) and duranthon-sample-complexity at
   sqrt(N D) = 10^4; wall time, the preset's own elapsed time, checks passed, controls rejected, the recorded
   implementations and devices.
5. **tests**: ``pytest -m jax_path`` (the JAX-path tests of every paper, marked in ``tests/conftest.py``) on the GPU.

Usage (on the GPU machine, from the repository root): ``bash bench/gpu.sh OUT`` (installs what the image lacks from
``.whl/`` and runs ``python bench/gpu.py all --out OUT``). ``--smoke`` runs every stage at toy sizes (the check of the
script on a machine without a GPU). Back here, ``python tools/bench_table.py --import gpu OUT/gpu.json`` saves the
run under ``bench/results/<device>/`` and adds its row to the benchmark table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
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
PALLAS_CONFIGS = ((64, 32, 4), (128, 32, 4), (128, 64, 8), (32, 128, 4))
"""(block_q, block_k, num_warps) of the Pallas kernel's variants (attnlab.bruno.attention_gpu)."""
BETA, DT, D = 30.0, 1e-2, 3
PRESETS = (  # (name, --set overrides, share of the presets' time)
    ("sakai-vary-heads", [], 2.0),
    ("bruno-alignment", [], 0.6),
    ("bruno-forward-heat", [], 0.6),
    ("dohmatob-rgd", ["implementation=jax"], 1.2),
    ("duranthon-sample-complexity", ["sqrt_ND=10000"], 2.0),
)


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
def stage_kernels(work: Path, sizes, budget_s: float, short: bool = False) -> dict:
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
    out = {"backend": jax.default_backend(), "device": jax.devices()[0].device_kind,
           "default_form": att.default_form(jnp.float32), "sizes": {}}
    previous: dict[str, tuple[int, float]] = {}  # variant -> (N, seconds) at the last size it ran
    for n in sizes:
        row: dict = {"n": n, "default_blocks": list(att.default_blocks(n))}
        out["sizes"][str(n)] = row
        if _now() > deadline:
            row["skipped"] = "deadline"
            continue
        x = uniform_sphere(jax.random.key(n), n, D).astype(jnp.float32)
        np.save(work / f"x{n}.npy", np.asarray(x))
        try:
            t = _median_time(partial(step_fn, x), sync)
            row["step_s"], row["step_gpairs_per_s"] = t, n * n / t / 1e9
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
            row["rel_error_vs_float64"] = float(np.linalg.norm(np.asarray(a, np.float64) - ref) / np.linalg.norm(ref))
        v1 = jnp.concatenate([x, jnp.ones((n, 1), jnp.float32)], axis=1)
        beta = jnp.float32(BETA)
        _, bk = att.default_blocks(n)
        variants = {"cpu-tiles/matmul/poly": (1024, 2048, "matmul", "poly"),
                    "default/matmul/poly": (n, bk, "matmul", "poly"),
                    "default/fused/poly": (n, bk, "fused", "poly"),
                    "default/reduce/poly": (n, bk, "reduce", "poly"),
                    "default/reduce/xla": (n, bk, "reduce", "xla")}
        if bk < n:
            variants.update({"all/reduce/poly": (n, n, "reduce", "poly"), "all/fused/poly": (n, n, "fused", "poly")})
        for bq, bkk, warps in PALLAS_CONFIGS:
            variants[f"pallas-{bq}x{bkk}-w{warps}/xla"] = (bq, bkk, f"pallas{warps}", "xla")
        if short:  # the default (Pallas) kernel and the best pure-XLA form only
            variants = {k: v for k, v in variants.items() if k in ("default/reduce/xla", "pallas-64x32-w4/xla")}
        row["variants"] = {}
        q2, m2 = att._shift(x, x, beta)
        for name, (bq, bkk, form, exp) in variants.items():
            if _now() > deadline:
                row["variants"][name] = {"skipped": "deadline"}
                continue
            if name in previous and previous[name][1] * (n / previous[name][0]) ** 2 > 8.0:
                row["variants"][name] = {"skipped": "too slow at the smaller N"}
                continue
            if form.startswith("pallas"):
                fn = partial(shifted_sums, q2, m2, x, v1, block_q=bq, block_k=bkk, num_warps=int(form[6:]),
                             interpret=jax.default_backend() != "gpu")
            else:
                fn = partial(jax.jit(lambda q, v1, beta, bq=bq, bkk=bkk, form=form, exp=exp:
                                     att._shifted(q, q, v1, beta, bq, bkk, form=form, exp=exp)[1]), x, v1, beta)
            try:
                t = _median_time(fn, sync)
                if form.startswith("pallas") and "rel_error_vs_float64" in row:
                    acc = fn()
                    a_p = np.asarray(acc[:, :D] / acc[:, D:], np.float64)
                    row.setdefault("pallas_rel_error_vs_float64", {})[name] = float(
                        np.linalg.norm(a_p - ref) / np.linalg.norm(ref))
            except Exception as exc:  # noqa: BLE001
                row["variants"][name] = {"error": _error_line(exc)}
                continue
            previous[name] = (n, t)
            row["variants"][name] = {"s": t, "gpairs_per_s": n * n / t / 1e9, "blocks": [bq, bkk]}
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
    code = "import jax, json; print(json.dumps([jax.default_backend(), [d.device_kind for d in jax.devices()]]))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    env["jax_devices"] = json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr.strip()[-500:]
    return env


def _sub(stage: str, out_dir: Path, work: Path, budget: float, smoke: bool, short: bool) -> dict:
    """Run one stage in a process of its own (cut off at its budget plus a margin), return its JSON."""
    result = work / f"{stage}.json"
    result.unlink(missing_ok=True)
    cmd = [sys.executable, __file__, stage, "--out", str(out_dir), "--work", str(work), "--deadline", str(budget)]
    cmd += (["--smoke"] if smoke else []) + (["--short"] if short else [])
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget + 90, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"cut off after {budget + 90:.0f} s"}
    if result.is_file():
        return json.loads(result.read_text())
    return {"error": (proc.stderr.strip() or proc.stdout.strip())[-1500:]}


def summarise(res: dict) -> dict:
    s: dict = {"device": res.get("environment", {}).get("nvidia_smi")}
    k, t = res.get("kernels", {}).get("sizes", {}), res.get("sdpa", {}).get("sizes", {})
    for n, row in k.items():
        ours, paper = row.get("step_gpairs_per_s"), t.get(n, {}).get("paper_gpairs_per_s")
        variants = {v: r["gpairs_per_s"] for v, r in row.get("variants", {}).items() if "gpairs_per_s" in r}
        s[f"n{n}"] = {"attnlab_gpairs_per_s": ours, "sdpa_gpairs_per_s": paper,
                      "sdpa_method": t.get(n, {}).get("paper_method"),
                      "sdpa_fastest": t.get(n, {}).get("fastest"),
                      "ratio_attnlab_over_sdpa": ours / paper if ours and paper else None,
                      "best_variant": max(variants, key=variants.get) if variants else None,
                      "best_variant_gpairs_per_s": max(variants.values()) if variants else None,
                      "rel_error_vs_float64": row.get("rel_error_vs_float64")}
        if ours and paper:  # flat headline figures (the benchmark table)
            s[f"gpairs_per_s_n{n}"], s[f"sdpa_gpairs_per_s_n{n}"], s[f"ratio_vs_sdpa_n{n}"] = ours, paper, ours / paper
    s["presets"] = {p: {k2: r.get(k2) for k2 in ("wall_s", "elapsed_s", "checks_passed", "checks", "controls_rejected",
                                                  "exit", "timed_out_after_s", "skipped")}
                    for p, r in res.get("presets", {}).items() if not p.startswith("_")}
    tests = res.get("tests", {})
    s["tests"] = {k2: tests.get(k2) for k2 in ("passed", "failed", "failures", "errors", "skipped", "exit", "wall_s")}
    return s


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("stage", choices=("all", "kernels", "sdpa", "summary"))
    p.add_argument("--from", dest="source", type=Path, help="summary: the gpu.json of a run to summarise again")
    p.add_argument("--out", type=Path, default=Path("gpu-out"))
    p.add_argument("--work", type=Path, default=None, help="scratch directory (tokens and outputs shared by stages)")
    p.add_argument("--deadline", type=float, default=450.0, help="seconds for the whole run (or this stage)")
    p.add_argument("--smoke", action="store_true", help="toy sizes: check the script without a GPU")
    p.add_argument("--short", action="store_true", help="the default kernels and PyTorch's own dispatch only")
    p.add_argument("--presets", default="", help="comma-separated presets to run (default: all of PRESETS)")
    p.add_argument("--workers", type=int, default=8, help="test processes")
    p.add_argument("--stages", default="kernels,sdpa,presets,tests", help="the stages to run (comma-separated)")
    p.add_argument("--shares", default="0.20,0.10,0.46", help="shares of the deadline: kernels, sdpa, presets")
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
        (work / "kernels.json").write_text(json.dumps(stage_kernels(work, sizes, args.deadline, args.short)))
        return 0
    if args.stage == "sdpa":
        (work / "sdpa.json").write_text(json.dumps(stage_sdpa(work, sizes, args.deadline, args.short)))
        return 0
    start = _now()
    res: dict = {"environment": environment()}
    path = out_dir / "gpu.json"

    def save():
        res["elapsed_s"] = round(_now() - start, 1)
        path.write_text(json.dumps(res, indent=1))

    save()
    print(json.dumps(res["environment"]), flush=True)
    left = lambda: args.deadline - (_now() - start)  # noqa: E731
    shares = dict(zip(("kernels", "sdpa", "presets"), (float(v) for v in args.shares.split(","))))
    stages = set(args.stages.split(","))
    for stage in ("kernels", "sdpa"):
        if stage not in stages:
            continue
        res[stage] = _sub(stage, out_dir, work, shares[stage] * args.deadline, args.smoke, args.short)
        save()
        print(stage, json.dumps(res[stage])[:3000], flush=True)
    only = [p for p in args.presets.split(",") if p]
    if "presets" in stages:
        budget = min(shares["presets"] * args.deadline, left() * (0.7 if "tests" in stages else 1.0))
        res["presets"] = stage_presets(work / "runs", budget, args.smoke, only)
        save()
        print("presets", json.dumps(res["presets"])[:3000], flush=True)
    if "tests" in stages:
        res["tests"] = stage_tests(out_dir, max(30.0, left() - 10), args.smoke, args.workers)
    res["summary"] = summarise(res)
    save()
    print(json.dumps(res["summary"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
