"""Run the benchmarks under ``bench/`` and regenerate the benchmark table of ``docs/speed.md`` from their results.

    python tools/bench_table.py --run [SCRIPT ...]   run the scripts (default: all), save each one's result, rewrite
                                                     the table
    python tools/bench_table.py --run SCRIPT --args 'ARGS'   the same, one script run with ARGS
    python tools/bench_table.py                      rewrite the table from the saved results only
    python tools/bench_table.py --import gpu FILE    save a run made on a GPU machine (bench/gpu.sh), rewrite the table

Each script prints one JSON object as its last line. ``--run`` saves it as
``bench/results/<cpu>/<script>.json`` together with the command, the CPU (model, vector extensions, core count),
the implementation of each C kernel on it (:func:`native_kernels`), the XLA flags, the load average before and
after, and the date. The table (between the markers
``<!-- bench-table:start -->`` and ``<!-- bench-table:end -->``) has one row per script and CPU model measured: what
it measures, its headline figures (the ratios against the plain reference measured in the same process), the CPU
and the command. A script without a saved result reads "not measured"; a script that failed keeps its previous
result and the run exits with status 1.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
DOC = ROOT / "docs" / "speed.md"
START, END = "<!-- bench-table:start -->", "<!-- bench-table:end -->"
GPU_START, GPU_END = "<!-- gpu-table:start -->", "<!-- gpu-table:end -->"
TARGETS_START, TARGETS_END = "<!-- targets-table:start -->", "<!-- targets-table:end -->"
PRESETS_START, PRESETS_END = "<!-- presets-table:start -->", "<!-- presets-table:end -->"

# The headline figures of each script's JSON line: (key, how to show it). Keys absent from a result are skipped.
HEADLINES = {
    "dependencies": [],  # one ratio per row, see _dependency_rows
    "circle": [("ratio_vs_native_f32_n50000", "{:.1f}x the float32 C kernel at N = 5e4"),
               ("ratio_vs_jax_f64_n50000", "{:.0f}x the float64 JAX kernel"),
               ("max_difference_vs_jax_f64_n50000", "10 steps within {:.1e} of it")],
    "kernel": [("ratio_vs_brute_force", "{:.0f}x vs brute-force covariance"),
               ("ratio_vs_exact_sampler", "{:.0f}x vs exact-sampler covariance")],
    "erm_scale": [("largest_sqrt_ND", "largest sqrt(ND) {:.0f}"), ("gap_in_se_at_largest", "gap {:.1f} SE")],
    "particles": [("ratio_vs_dense", "{:.1f}x vs dense"), ("gpairs_per_s_n10000", "{:.2f} Gpairs/s"),
                  ("ratio_vs_sdpa_n10000", "{:.1f}x PyTorch's SDPA at N = 1e4"), ("ratio_vs_sdpa_n50000", "{:.1f}x at 5e4")],
    "gpu": [("gpairs_per_s_n10000", "N = 1e4: {:.0f} Gpairs/s"), ("ratio_vs_sdpa_n10000", "{:.1f}x SDPA"),
            ("gpairs_per_s_n50000", "5e4: {:.0f}"), ("ratio_vs_sdpa_n50000", "{:.1f}x"),
            ("gpairs_per_s_n200000", "2e5: {:.0f}"), ("ratio_vs_sdpa_n200000", "{:.1f}x")],
    "presets": [("quick_warm_fixed_s_max", "largest fixed cost (quick, warm) {:.1f} s"),
                ("quick_warm_wall_s_sum", "all presets quick: warm {:.0f} s"),
                ("quick_cold_wall_s_sum", "cold {:.0f} s"),
                ("quick_warm_computation_s_sum", "of which computation {:.0f} s"),
                ("quick_warm_run_fixed_s_max", "largest first-run fixed cost without figures {:.1f} s"),
                ("quick_warm_run_fixed_within_target", "{:d} presets within 2 s"),
                ("full_warm_wall_s_sum", "all presets full: warm {:.0f} s"),
                ("full_warm_computation_s_sum", "of which computation {:.0f} s"),
                ("full_warm_fixed_s_max", "largest fixed cost (full, warm) {:.1f} s")],
    "preload": [("ratio_vs_plain", "{:.2f}x vs loading on the run's thread"), ("plain_run_s_sum", "runs {:.1f} s plain"),
                ("ahead_run_s_sum", "{:.1f} s ahead"), ("plain_lookup_s_sum", "cache reads {:.2f} s"),
                ("ahead_lookup_s_sum", "{:.2f} s")],
    "programs": [("ratio_vs_plain", "{:.2f}x vs tracing again"), ("plain_run_s_sum", "runs {:.0f} s traced"),
                 ("saved_run_s_sum", "{:.0f} s saved"), ("plain_trace_lower_s_sum", "tracing + lowering {:.1f} s"),
                 ("saved_trace_lower_s_sum", "{:.1f} s"), ("call_overhead_us", "a call {:.0f} us more than jax.jit's")],
    "replica": [("ratio_vs_reference", "{:.1f}x vs damped iteration")],
    "startup": [("version_wall_s", "--version {:.2f} s"), ("help_wall_s", "-h {:.2f} s"),
                ("list_warm_wall_s", "list {:.2f} s"), ("show_warm_wall_s", "show {:.2f} s"),
                ("list_new_wall_s", "list in a new cache directory {:.2f} s"),
                ("list_cold_wall_s", "list with no catalogue cache {:.1f} s"),
                ("import_jax_wall_s", "import jax {:.2f} s"), ("import_paper_wall_s_max", "a paper's presets {:.2f} s")],
    "slr_pgd": [("ratio_vs_reference", "PGD {:.1f}x the official-speed reference"),
                ("total_full_presets_s", "5 full presets {:.0f} s"),
                ("manifold_preset_over_official_speed_reference", "marion-manifold {:.2f}x official-speed reference"),
                ("manifold_pgd_over_official_speed_reference", "its PGD {:.0f}x")],
    "reproduce": [("full_wall_s", "`attnlab reproduce` of the five papers at full size {:.0f} s"),
                  ("quick_wall_s", "`attnlab reproduce --quick` of the five papers {:.0f} s"),
                  ("presets_worker_s", "the presets one after the other {:.0f} s"),
                  ("packing", "workers busy {:.0%} of the time"),
                  ("checks_passed", "{:d} checks passed"), ("controls_rejected", "{:d} controls rejected")],
    "softmax_rgd": [("ratio_vs_reference", "{:.1f}x vs plain RGD"), ("total_preset_s", "preset {:.0f} s"),
                    ("native_over_jax", "C kernel {:.1f}x XLA's float32 program")],
    "suite": [("cold_make_test_wall_s", "`make test` from a clean clone and an empty home {:.0f} s"),
              ("cold_setup_s", "of which set-up {:.0f} s"),
              ("warm_suite_wall_s", "the suite again with every program compiled {:.0f} s"),
              ("cold_compile_share", "compilation, lowering and tracing {:.0%} of the test workers' time"),
              ("cold_programs", "{:,d} compilations or cache loads")],
    "sweep": [("wall_1_worker_s", "1 worker {:.0f} s"), ("wall_2_workers_s", "2 workers {:.0f} s")],
    "width": [("ratio_vs_reference_n1024", "{:.0f}x vs brute force at n = 1024"),
              ("total_paper_presets_s", "Sakai paper presets {:.0f} s")],
    "xla_level": [("xla_defaults_over_attnlab", "XLA's defaults take {:.2f}x attnlab's flags' wall time"),
                  ("level1_over_attnlab", "level 1 alone {:.2f}x"),
                  ("one_core_split_over_one_module", "on one core, split modules {:.2f}x one module per program"),
                  ("level3_over_level1", "level 3 takes {:.2f}x level 1's wall time")],  # the script's first form
}


def _manifold_why(r: dict) -> str:
    """Where the whole marion-manifold run goes (bench/slr_pgd.py's profile), against the reference's whole run."""
    p, ref = r.get("manifold_profile_s") or {}, r.get("official_speed_reference_manifold_s")
    if not p or not ref:
        return "no profile recorded"
    checks = p.get("monte_carlo_checks_s", 0.0) + p.get("cross_check_full_vector_pgd_s", 0.0)
    compile_s = p["tracing_and_compilation_s"]
    return (f"10x needs the whole preset in {ref / 10:.2f} s (the reference's whole run: {ref:.2f} s); the preset's "
            f"PGD of all repeats takes {p['pgd_s']:.2f} s, its tracing and compilation (or cache loads) "
            f"{compile_s:.2f} s ({compile_s / ref:.1f}x the reference's run), its Monte Carlo checks and full-vector "
            f"cross-check {checks:.2f} s ({checks / ref:.1f}x), its figures {p['figures_s']:.2f} s: every part but the "
            f"PGD takes longer alone than 10x allows")


def _suite_why(r: dict) -> str:
    if not all(isinstance(r.get(k), (int, float)) for k in ("warm_suite_wall_s", "cold_setup_s", "cold_programs",
                                                            "cold_compile_share")):
        return "see the JSON result"
    return (f"with every program already compiled the suite takes {r['warm_suite_wall_s']:.0f} s (and the set-up "
            f"{r['cold_setup_s']:.0f} s); from an empty cache, its {r['cold_programs']:,} compilations, their lowering "
            f"and tracing are {r['cold_compile_share']:.0%} of the test workers' time")


def _reproduce_why(r: dict) -> str:
    """What bounds the reproduction: the presets' own times over the workers, and the longest of them."""
    if not all(isinstance(r.get(k), (int, float)) for k in ("presets_worker_s", "presets_over_workers_s", "workers")):
        return "see the JSON result"
    longest = ", ".join(f"{p['preset']} {p['elapsed_s']:.0f} s" for p in r.get("longest", [])[:4])
    return (f"the presets' own times sum to {r['presets_worker_s']:.0f} s, {r['presets_over_workers_s']:.0f} s on "
            f"{r['workers']} workers with no time lost; the longest: {longest}")


# The speed targets the benchmarks are held to: (what, script, key, at least / at most, bound, how to show the
# value, extra condition on the result or None, why a miss happens (a function of the result) or None).
TARGETS = [
    ("RGD >= 20x the plain reference", "softmax_rgd", "ratio_vs_reference", ">=", 20, "{:.1f}x", None, None),
    ("`dohmatob-rgd` preset <= 60 s", "softmax_rgd", "total_preset_s", "<=", 60, "{:.0f} s", None, None),
    ("five Marion presets <= 90 s", "slr_pgd", "total_full_presets_s", "<=", 90, "{:.0f} s", None, None),
    ("`marion-manifold` >= 10x the official-speed reference, whole configuration", "slr_pgd",
     "manifold_preset_over_official_speed_reference", ">=", 10, "{:.2f}x", None, _manifold_why),
    ("particle kernel >= 0.75 of the measured exp bound", "particles", "pair_rate_over_exp_bound", ">=", 0.75,
     "{:.2f}", None, None),
    ("Sakai paper presets <= 40 s", "width", "total_paper_presets_s", "<=", 40, "{:.0f} s", None, None),
    ("`attnlab --version` <= 0.3 s", "startup", "version_wall_s", "<=", 0.3, "{:.2f} s", None, None),
    ("`attnlab -h` <= 0.3 s", "startup", "help_wall_s", "<=", 0.3, "{:.2f} s", None, None),
    ("`attnlab list` <= 0.6 s (catalogue cached)", "startup", "list_warm_wall_s", "<=", 0.6, "{:.2f} s", None, None),
    ("`attnlab show PRESET` <= 0.6 s (catalogue cached)", "startup", "show_warm_wall_s", "<=", 0.6, "{:.2f} s", None,
     None),
    ("`attnlab list` <= 0.6 s (new cache directory)", "startup", "list_new_wall_s", "<=", 0.6, "{:.2f} s", None, None),
    ("`attnlab show PRESET` <= 0.6 s (new cache directory)", "startup", "show_new_wall_s", "<=", 0.6, "{:.2f} s",
     None, None),
    ("`make test` <= 8 min (clean clone, empty home)", "suite", "cold_make_test_wall_s", "<=", 480, "{:.0f} s",
     ("passed", True), _suite_why),
    ("`attnlab reproduce` full <= 10 min, every check passing", "reproduce", "full_wall_s", "<=", 600, "{:.0f} s",
     ("passed", True), _reproduce_why),
    ("replica curve >= 10x, every point converged", "replica", "ratio_vs_reference", ">=", 10, "{:.1f}x",
     ("converged_fraction_ours", 1.0), None),
]

# What the targets table shows next to a target's value (by the value's key): (key, how to show it).
TARGET_DETAILS = {
    "ratio_vs_reference": [("preset_run_steps_per_s", "preset {:,.0f} run-steps/s"),
                           ("reference_run_steps_per_s", "reference {:,.0f}"),
                           ("fraction_of_fma_bound", "token products at {:.2f} of the FMA bound"),
                           ("converged_fraction_ours", "converged {:.0%}"),
                           ("converged_fraction_reference", "the reference {:.0%}")],
    "pair_rate_over_exp_bound": [("gpairs_per_s_n10000", "{:.2f} Gpairs/s"),
                                 ("exp2_bound_g_per_s", "bound {:.2f} G exp2/s")],
    "manifold_preset_over_official_speed_reference": [("manifold_pgd_over_official_speed_reference",
                                                       "its PGD alone {:.1f}x")],
}


def targets_table() -> str:
    """One row per target and CPU with a saved result: the value, whether it meets the target, and why not."""
    rows = ["| target | CPU | measured | met |", "|---|---|---|---|"]
    for what, script, key, op, bound, fmt, also, why in TARGETS:
        for path in sorted(RESULTS.glob(f"*/{script}.json")):
            record = json.loads(path.read_text())
            if record.get("device"):
                continue  # the CPU targets; the GPU runs have their own tables
            r = record["result"]
            value = r.get(key)
            if not isinstance(value, (int, float)):
                rows.append(f"| {what} | {cpu_text(record['cpu'])} | not recorded | cannot be evaluated |")
                continue
            met = value >= bound if op == ">=" else value <= bound
            if also is not None:
                met = met and r.get(also[0]) == also[1]
            details = [f.format(r[k]) for k, f in TARGET_DETAILS.get(key, []) if isinstance(r.get(k), (int, float))]
            shown = fmt.format(value) + (f" ({', '.join(details)})" if details else "")
            verdict = "yes" if met else "no: " + (why(r) if why else "see the JSON result")
            rows.append(f"| {what} | {cpu_text(record['cpu'])} | {shown} | {verdict} |")
    return "\n".join(rows)


ELSEWHERE = {"gpu"}
"""Scripts run on another machine (bench/gpu.sh on a GPU machine) and saved here with ``--import``; ``--run`` with no
names leaves them out."""

VECTOR_EXTENSIONS = ("avx512f", "avx2", "fma", "avx", "sse4_2", "neon", "asimd", "sve")


def cpu() -> dict:
    """This machine's CPU: model, the vector extensions attnlab's kernels care about, logical core count."""
    model, flags, ids = "unknown CPU", set(), {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key in ("model name", "Hardware") and value and model == "unknown CPU":
                model = " ".join(value.split())
            elif key in ("flags", "Features") and not flags:
                flags = set(value.split())
            elif key in ("cpu family", "model") and key not in ids:
                ids[key] = value
    except OSError:
        pass
    if len(ids) == 2:  # virtual machines often report a generic model name: the family and model numbers tell
        model += f" (family {ids['cpu family']}, model {ids['model']})"
    return {"model": model, "vector_extensions": [f for f in VECTOR_EXTENSIONS if f in flags],
            "cores": os.cpu_count()}


def cpu_text(c: dict, device: str | None = None) -> str:
    if device:  # a GPU run: the card, then its host
        return f"{device} ({c['cores']}-core host)"
    ext = "/".join(e.upper() for e in c.get("vector_extensions", [])[:2])
    return f"{c['model']}, {c['cores']} cores" + (f" ({ext})" if ext else "")


def cpu_slug(c: dict) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{c['model']}-{c['cores']}c".lower()).strip("-")


def summary_line(script: Path) -> str:
    """The first line of a script's module docstring."""
    doc = ast.get_docstring(ast.parse(script.read_text())) or ""
    first = doc.strip().split("\n\n")[0].replace("\n", " ")
    return first.removeprefix("Benchmark: ").removeprefix("Benchmark of ")


def native_kernels() -> dict:
    """Which implementation each of attnlab's C kernels has on this machine: its vector build where it compiles,
    else why it does not (the JAX path then runs); and JAX's backend. Each benchmark also records what its own runs
    used, where it has a choice."""
    import jax

    from attnlab.bruno import native as bruno
    from attnlab.dohmatob import rgd_native
    from attnlab.sakai import native as sakai

    out = {"jax_backend": jax.default_backend()}
    for name, mod, build in (("bruno_attention", bruno, lambda: f"native, {bruno.vector_bits()}-bit vectors"),
                             ("dohmatob_rgd", rgd_native, lambda: f"native, {rgd_native.lanes()} float32 lanes"),
                             ("sakai_sampler", sakai, lambda: "native, 256-bit vectors (AVX2; no wider variant)")):
        out[name] = build() if mod.available() else f"jax ({mod.unavailable_reason()})"
    return out


def run_script(script: Path, args: tuple[str, ...] | list[str] = ()) -> dict | None:
    """Run one benchmark with this interpreter (and ``args``); its last stdout line parsed as JSON, or None when it
    failed."""
    cmd = [sys.executable, str(script.relative_to(ROOT)), *args]
    print("+ " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        print(f"bench_table: {script.name} failed (exit status {proc.returncode})", file=sys.stderr)
        return None
    try:
        return json.loads(lines[-1])
    except json.JSONDecodeError:
        print(f"bench_table: {script.name}: the last line is not JSON", file=sys.stderr)
        return None


def _dependency_rows(result: dict) -> list[str]:
    out = []
    for row in result.get("rows", []):
        ratio = row.get("ratio") or row.get("dependency_over_piece")
        piece = row.get("piece") or row.get("name")
        if piece and isinstance(ratio, (int, float)):
            out.append(f"{piece} {ratio:.1f}x")
    return out


def headline(name: str, result: dict) -> str:
    """The figures the table shows for one script's result."""
    if name == "dependencies":
        parts = _dependency_rows(result)
    else:
        parts = [fmt.format(result[k]) for k, fmt in HEADLINES.get(name, [])
                 if isinstance(result.get(k), (int, float))]
        if not parts:
            parts = [f"{k} {v:.3g}" for k, v in result.items() if k.startswith("ratio") and isinstance(v, (int, float))]
    return ", ".join(parts) or "see the JSON result"


def table(scripts: list[Path]) -> str:
    """One row per script and CPU model with a saved result ("not measured" for a script without any)."""
    rows = ["| script | what it measures | result | CPU | command |", "|---|---|---|---|---|"]
    for script in scripts:
        saved = sorted(RESULTS.glob(f"*/{script.stem}.json"))
        records = [json.loads(p.read_text()) for p in saved]
        for record in records or [None]:
            here = record and script.stem in ELSEWHERE
            args = shlex.split(record["command"])[2:] if record and not here else []  # the arguments it ran with
            local = shlex.join([".venv/bin/python", f"bench/{script.name}", *args])
            cmd = f"`{record['command']}`" if here else f"`{local}`"
            result = headline(script.stem, record["result"]) if record else "not measured"
            where = cpu_text(record["cpu"], record.get("device")) if record else ""
            rows.append(f"| `{script.name}` | {summary_line(script)} | {result} | {where} | {cmd} |")
    return "\n".join(rows)


def _between(doc: str, start: str, end: str, text: str) -> str:
    head, sep, rest = doc.partition(start)
    if not sep or end not in rest:
        raise SystemExit(f"bench_table: {DOC} lacks the markers {start} and {end}")
    return f"{head}{start}\n{text}\n{end}{rest.split(end, 1)[1]}"


def gpu_tables() -> str:
    """The saved GPU runs (``bench/results/<device>/gpu.json``) in detail: the particle step per N against SDPA, the
    presets at full size, the JAX-path tests."""
    out = []
    for path in sorted(RESULTS.glob("*/gpu*.json"), key=lambda p: (p.parent.name, p.name != "gpu.json", p.name)):
        record = json.loads(path.read_text())
        full, device = record.get("full", {}), record.get("device") or "GPU"
        label = "the latest run" if path.name == "gpu.json" else "an earlier run, before the Pallas kernel was the default"
        k, t = full.get("kernels", {}).get("sizes", {}), full.get("sdpa", {}).get("sizes", {})
        out += [f"**{device}**, {label} (`{path.relative_to(ROOT)}`; JAX {full.get('environment', {}).get('jax')}, PyTorch "
                f"{full.get('environment', {}).get('torch')}). The particle step (d = 3, beta = 30, float32), pairs "
                "per second (10^9):", "",
                "| N | attnlab (default kernel) | SDPA, PyTorch's dispatch | ratio | attnlab vs float64 | "
                "SDPA vs float64 |", "|---|---|---|---|---|---|"]
        for n, row in k.items():
            sd = t.get(n, {})
            ours, theirs = row.get("step_gpairs_per_s"), sd.get("paper_gpairs_per_s")
            cfg = sd.get("configs", {}).get(sd.get("paper_method") or "", {})
            err = row.get("rel_error_vs_float64")
            serr = cfg.get("rel_error_vs_float64")
            out.append(f"| {int(n):,} | {ours if ours else float('nan'):.0f} | "
                       f"{theirs if theirs else float('nan'):.0f} ({sd.get('paper_method', '-')}) | "
                       f"{ours / theirs if ours and theirs else float('nan'):.1f}x | "
                       f"{f'{err:.1e}' if err else '-'} | {f'{serr:.1e}' if serr else '-'} |")
        names = [v for row in k.values() for v in row.get("variants", {})]
        names = list(dict.fromkeys(names))
        if len(names) > 3:  # every form of the shift kernel's sums (bench/gpu.py's variants), pairs per second
            head = " | ".join(f"N = {int(n):,}" for n in k)
            out += ["", f"| shift kernel's sums (10^9 pairs/s): form / key blocks / exp2 | {head} |",
                    "|---|" + "---|" * len(k)]
            for v in names:
                cells = []
                for row in k.values():
                    r = row.get("variants", {}).get(v, {})
                    cells.append(f"{r['gpairs_per_s']:.0f}" if "gpairs_per_s" in r
                                 else ("out of memory" if "memory" in str(r.get("error", "")).lower()
                                       else ("fails" if "error" in r else "-")))
                out.append(f"| {v} | " + " | ".join(cells) + " |")
        out += ["", "| preset (full size) | wall time | checks passed | controls rejected |", "|---|---|---|---|"]
        for name, r in full.get("presets", {}).items():
            if name.startswith("_"):
                continue
            if "wall_s" in r:
                sets = "".join(f" `--set {x}`" for x in r.get("sets", []))
                out.append(f"| `{name}`{sets} | {r['wall_s']:.0f} s | "
                           f"{r.get('checks_passed')}/{r.get('checks')} | {r.get('controls_rejected')}/{r.get('checks')} |")
            else:
                why = (f"cut off at {r['timed_out_after_s']:.0f} s" if "timed_out_after_s" in r
                       else r.get("skipped", r.get("error", "?"))[:80])
                out.append(f"| `{name}` | not finished ({why}) | - | - |")
        tests = full.get("tests", {})
        if tests:
            cut = " (cut off at the run's deadline)" if tests.get("exit") == "timeout" else ""
            out += ["", f"`pytest -m jax_path` on the GPU: {tests.get('passed')} passed, {len(tests.get('failed', []))} "
                    f"failed, {tests.get('skipped')} skipped in {tests.get('wall_s')} s{cut}."]
        out.append("")
    return "\n".join(out).strip() or "No GPU run saved."


def presets_table() -> str:
    """Every preset's profile (``bench/presets.py``) per CPU and size, ranked by the warm fixed cost: the wall time of
    a fresh process with a warm compile cache, its computation, its fixed cost and the phases of it (imports: those
    before the run and those the run makes), and the cold (empty cache) wall time and compilation."""
    out = []
    for path in sorted(RESULTS.glob("*/presets.json")):
        record = json.loads(path.read_text())
        rows = record["result"].get("rows", [])
        for size in ("quick", "full"):
            warm = {r["preset"]: r for r in rows if r["size"] == size and r["cache"] == "warm"}
            cold = {r["preset"]: r for r in rows if r["size"] == size and r["cache"] == "cold"}
            if not warm:
                continue
            how = record.get("sizes", {}).get(size)
            out += [f"{size} size, {cpu_text(record['cpu'])}" + (f" (`{how['command']}`)" if how else "") + ":", "",
                    "| preset | warm: wall | computation | fixed | tracing | compile (programs) | checks | figures | "
                    "imports + start | writing | cold: wall | compile |", "|" + "---|" * 12]
            ranked = sorted(warm.values(), key=lambda r: -r.get("fixed_s", -1.0))
            for r in ranked:
                c = cold.get(r["preset"], {})
                if "error" in r:
                    out.append(f"| `{r['preset']}` | {r['error'][:80]} |" + " - |" * 10)
                    continue
                cold_cells = (f"{c['wall_s']:.1f} s | {c['compilation_s']:.1f} s" if "wall_s" in c
                              else f"{c.get('error', 'not measured')[:60]} | -")
                out.append(f"| `{r['preset']}` | {r['wall_s']:.1f} s | {r['computation_s']:.1f} s | "
                           f"{r['fixed_s']:.1f} s | {r['tracing_s']:.1f} s | {r['compilation_s']:.1f} s "
                           f"({r['programs']}) | {r['checks_s']:.2f} s | {r['figures_s']:.1f} s | "
                           f"{r['imports_s'] + r.get('run_imports_s', 0.0) + r['startup_s']:.1f} s | "
                           f"{r['writing_s']:.2f} s | {cold_cells} |")
            out.append("")
    return "\n".join(out).strip() or "No profile saved (`tools/bench_table.py --run presets`)."


def rewrite_doc(text: str) -> str:
    doc = _between(DOC.read_text(), START, END, text)
    if PRESETS_START in doc:
        doc = _between(doc, PRESETS_START, PRESETS_END, presets_table())
    if GPU_START in doc:
        doc = _between(doc, GPU_START, GPU_END, gpu_tables())
    if TARGETS_START in doc:
        doc = _between(doc, TARGETS_START, TARGETS_END, targets_table())
    return doc


def import_result(name: str, path: str) -> int:
    """Save the JSON a script wrote on another machine (``bench/gpu.py``'s ``gpu.json``: its environment, every
    stage, and the summary that ``python bench/gpu.py summary --from FILE`` recomputes) under
    ``bench/results/<device>/``, and rewrite the table."""
    try:
        full = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        print(f"bench_table: cannot read {path}: {exc}", file=sys.stderr)
        return 2
    proc = subprocess.run([sys.executable, str(BENCH / f"{name}.py"), "summary", "--from", str(path)], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"bench_table: bench/{name}.py cannot summarise {path}", file=sys.stderr)
        return 2
    env = full.get("environment", {})
    device = str(env.get("nvidia_smi", "")).split(",")[0].strip() or None
    host = {"model": "host", "vector_extensions": [], "cores": env.get("cpu_count")}
    record = {"script": f"{name}.py", "command": f"bash bench/{name}.sh OUT", "cpu": host, "device": device,
              "xla_flags": env.get("XLA_FLAGS") or "", "date": datetime.date.today().isoformat(),
              "result": json.loads(proc.stdout.splitlines()[-1]), "full": full}
    folder = RESULTS / re.sub(r"[^a-z0-9]+", "-", (device or "device").lower()).strip("-")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    DOC.write_text(rewrite_doc(table(sorted(BENCH.glob("*.py")))))
    print(f"bench_table: saved {folder.relative_to(ROOT)}/{name}.json and wrote the table of {DOC.relative_to(ROOT)}")
    return 0


def keep_other_sizes(old: dict, new: dict) -> dict:
    """``new``, a result with rows per preset size (``bench/presets.py``), with the rows and summary figures of the
    sizes it did not measure taken from ``old``, the record it replaces (``--sizes quick`` keeps a saved full-size
    profile): ``sizes`` then says the command and date of each size's figures. Any other result is ``new`` as it is."""
    rows, old_rows = new["result"].get("rows"), old.get("result", {}).get("rows")
    if not isinstance(rows, list) or not isinstance(old_rows, list):
        return new
    measured = {r.get("size") for r in rows}
    kept = [r for r in old_rows if r.get("size") not in measured]
    if not kept:
        return new
    kept_sizes = {r.get("size") for r in kept}
    sizes = {size: {"command": new["command"], "date": new["date"]} for size in sorted(measured, key=str)}
    for size in sorted(kept_sizes, key=str):
        sizes[size] = old.get("sizes", {}).get(size) or {"command": old.get("command"), "date": old.get("date")}
    figures = {k: v for k, v in old["result"].items() if k.split("_")[0] in kept_sizes}  # quick_warm_..., full_...
    result = {**figures, **new["result"], "rows": rows + kept}
    return dict(new, result=result, sizes=sizes)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", action="store_true", help="run the scripts before writing the table")
    ap.add_argument("scripts", nargs="*", help="script names to run (default: all under bench/)")
    ap.add_argument("--args", default="", help="arguments for the one script run, as one string (say --args "
                                               "'--sizes quick,full' for bench/presets.py); saved with its command")
    ap.add_argument("--import", dest="imported", nargs=2, metavar=("SCRIPT", "FILE"),
                    help="save FILE, the full JSON of SCRIPT run on another machine (bench/gpu.py's gpu.json), as "
                         "that machine's result")
    args = ap.parse_args(argv)
    if args.imported:
        return import_result(*args.imported)
    scripts = sorted(BENCH.glob("*.py"))
    unknown = [s for s in args.scripts if not (BENCH / Path(s).name).with_suffix(".py").is_file()]
    if unknown:
        print(f"bench_table: no such benchmark: {', '.join(unknown)}", file=sys.stderr)
        return 2
    script_args = shlex.split(args.args)
    if script_args and (not args.run or len(args.scripts) != 1):
        print("bench_table: --args goes with --run and one script", file=sys.stderr)
        return 2
    status = 0
    if args.run:
        chosen = [(BENCH / Path(s).name).with_suffix(".py") for s in args.scripts] or [
            s for s in scripts if s.stem not in ELSEWHERE]
        for script in chosen:
            load_before = os.getloadavg()
            result = run_script(script, script_args)
            if result is None:
                status = 1
                continue
            here = cpu()
            record = {"script": script.name, "command": shlex.join(["python", f"bench/{script.name}", *script_args]),
                      "cpu": here,
                      "native_kernels": native_kernels(),
                      "xla_flags": os.environ.get("XLA_FLAGS", ""), "load_average_before_after":
                      [load_before[0], os.getloadavg()[0]], "date": datetime.date.today().isoformat(),
                      "result": result}
            folder = RESULTS / cpu_slug(here)
            folder.mkdir(parents=True, exist_ok=True)
            saved = folder / f"{script.stem}.json"
            if saved.is_file():
                record = keep_other_sizes(json.loads(saved.read_text()), record)
            saved.write_text(json.dumps(record, indent=1, default=str) + "\n")
    DOC.write_text(rewrite_doc(table(scripts)))
    print(f"bench_table: wrote the table of {DOC.relative_to(ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
