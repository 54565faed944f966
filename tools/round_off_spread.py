"""The spread of the multi-head notebook's faithful runs under float32 round-off: the basis of the faithful checks'
bound in float32 (:data:`attnlab.marion.transformer_preset.FAITHFUL_SPREAD_F32`).

The notebook trained in float32; a faithful rerun on another platform (another summation order in the matrix
products) differs from its printed outputs by the amplification, over 10 000 updates, of differences of the order of
one unit in the last place. This tool trains the notebook's model of ``marion-transformer-multihead`` at the
notebook's sizes, seed 0 and its key tree, ``replicas`` times side by side (the replicas are the vectorised "arm"
axis of :func:`attnlab.marion.transformer.train`: same batches, same keys), each from the float32 initial weights
with every entry moved by one unit in the last place up or down at random (replica 0 unmoved), and prints, for each
quantity the faithful checks compare (the final ``|e_1^a . k*_j|`` table, the last five logs of run 10), the
standard deviation over the replicas, the largest over entries, and each replica's largest distance to the
notebook's printed numbers. JSON on the last line.

    .venv/bin/python tools/round_off_spread.py [--replicas 8] [--precision float32]
"""

from __future__ import annotations

import argparse
import functools
import json
import time

import jax
import jax.numpy as jnp
import numpy as np


@functools.partial(jax.jit, static_argnums=2)
def _moved_by_one_ulp(params, key, n_replicas: int):
    """Each leaf (1, run, ...) repeated ``n_replicas`` times along its first axis, every entry of replicas 1, 2, ...
    moved by one unit in the last place up or down (a Rademacher sign per entry, from ``fold_in(key, leaf index)``);
    replica 0 unmoved. One compiled program for the whole tree."""
    leaves, treedef = jax.tree.flatten(params)
    moved = []
    for i, leaf in enumerate(leaves):
        sign = jax.random.rademacher(jax.random.fold_in(key, i), (n_replicas, *leaf.shape[1:]), dtype=leaf.dtype)
        x = jnp.where(sign > 0, jnp.nextafter(leaf, jnp.inf), jnp.nextafter(leaf, -jnp.inf))
        moved.append(x.at[0].set(leaf[0]))  # (replica, run, ...) from the (1, run, ...) leaf
    return jax.tree.unflatten(treedef, moved)


def replicas(n_replicas: int, precision: str = "float32", n_steps: int = 10_000, seed: int = 12345,
             n_runs: int | None = None) -> dict:
    """Train the multi-head notebook's model ``n_replicas`` times (replica 0 from the preset's own initial weights,
    the others from them moved by one unit in the last place, entry by entry, up or down at random: ``seed``).
    ``n_runs``: the preset's first ``n_runs`` runs only (their keys and data unchanged; default: all of them).
    Returns the logged ``steps`` and the replicas' ``kappa`` (replica, log, run, head, direction), ``nu`` (same
    axes) and ``risk`` (replica, log, run), with ``elapsed_s``."""
    from attnlab import runtime
    from attnlab.marion import transformer as tf
    from attnlab.marion import transformer_preset as tp
    from attnlab.registry import resolve_config

    cfg = resolve_config("marion-transformer-multihead",
                         overrides={"official": True, "paired": False, "precision": precision, "n_steps": n_steps})
    (label, switches), = cfg.models()
    assert label == "notebook", label
    t0 = time.perf_counter()
    with runtime.x64(), jax.threefry_partitionable(False):
        one = tf.Arm(*(jnp.asarray([switches.get(f, False)]) for f in tp._ARM_FIELDS))
        arms = jax.tree.map(lambda a: jnp.repeat(a, n_replicas), one)
        sz = cfg.sizes()
        run_keys = jax.random.split(jax.random.key(0), cfg.n_repeats)[:n_runs]  # the preset's first runs
        params0, runs, step_keys, _ = tp._initial(run_keys, one, sz, cfg.n_steps)
        moved = _moved_by_one_ulp(params0, jax.random.key(seed), n_replicas)
        steps, logs, _ = tf.train(moved, runs, step_keys, arms, sz, gamma=cfg.gamma,
                                  eps=cfg.eps, step_size=cfg.step_size, n_steps=cfg.n_steps,
                                  log_every=cfg.log_every, notebook_logging=True)
        by_replica = {k: np.moveaxis(np.asarray(logs[v]), 1, 0)
                      for k, v in (("kappa", "kappa_notebook"), ("nu", "nu_notebook"), ("risk", "test_excess_risk"))}
    return {"steps": [int(s) for s in steps], **by_replica, "elapsed_s": time.perf_counter() - t0}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=8)
    ap.add_argument("--precision", default="float32", choices=("float32", "float64"))
    ap.add_argument("--n-steps", type=int, default=10_000)
    args = ap.parse_args(argv)

    from attnlab import runtime
    from attnlab.marion import transformer_preset as tp
    from attnlab.marion import transformer_summary as ts

    runtime.configure()
    rep = replicas(args.replicas, args.precision, args.n_steps)
    kappa, nu, risk, steps, R = rep["kappa"], rep["nu"], rep["risk"], rep["steps"], args.replicas
    out = {"precision": args.precision, "replicas": R, "n_steps": args.n_steps, "elapsed_s": round(rep["elapsed_s"], 1)}
    if steps[-1] == tp.NOTEBOOK_T3["run10_tail"]["step"][-1]:
        final = kappa[:, -1]  # (replica, run, head, direction)
        out["table_sd_max"] = float(np.max(np.std(final, axis=0, ddof=1)))
        out["table_gap_to_print"] = [float(np.max(np.abs(f - tp.NOTEBOOK_T3["kappa"]))) for f in final]
        c = np.stack([ts.tail_curves(kappa[r], nu[r], risk[r], steps, 9) for r in range(R)])
        out["tail_sd_max"] = float(np.max(np.std(c, axis=0, ddof=1)))
        out["tail_gap_to_print"] = [float(np.max(np.abs(x - ts.tail_reference()))) for x in c]
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
