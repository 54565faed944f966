"""The proximal problems of every sample solved in batches of a few fixed sizes.

The Newton loops of all (sample, start) pairs run in rounds of ``PRESOLVE_STEPS`` steps; after each round the
unfinished pairs are gathered and cut into blocks of the sizes ``BLOCKS`` (:func:`_blocks`), so that neither the
slowest pair sets the cost of the whole batch nor a new number of samples or starts costs a compilation
(:func:`_presolve`). :func:`_channel` evaluates the channel integrands at the end points, in the same blocks.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab.duranthon.activations import Activation
from attnlab.duranthon.replica.proximal import INNER_GTOL, NEWTON_STOP, _implicit_fields, _newton, _newton_loop
from attnlab.duranthon.replica.samples import FrozenSamples

__all__ = ["compile_blocks"]


PRESOLVE_STEPS = 3  # Newton steps per round of _presolve; after each round the unfinished pairs are gathered
BLOCKS = (256, 64, 16)  # the batch sizes for which the inner-solver programs are compiled (see _blocks)


def _blocks(count: int) -> list[tuple[int, int]]:
    """``(start, size)`` blocks covering ``count`` items: full blocks of ``BLOCKS[0]``, then the remainder in the
    smallest block size that holds it (padded).

    Every program of the inner solver (:func:`_advance_block`, :func:`_channel_block`) runs on blocks of these fixed
    sizes, whatever the number of samples, of starts per sample or of unfinished pairs in a round: it is compiled
    once per (activation, L, block size), three programs, instead of once per (samples, starts, batch size). A block
    of a few hundred pairs already fills the vector lanes, so its cost per pair-step is that of one large batch, and
    cutting a batch into blocks adds only one dispatch per block; one program per shape would instead compile a new
    Newton loop for every number of samples, starts or unfinished pairs."""
    big = BLOCKS[0]
    out = [(start, big) for start in range(0, count - count % big, big)]
    rest = count % big
    if rest:
        out.append((count - rest, min(b for b in BLOCKS if b >= rest)))
    return out


def _pad(idx, size: int):
    """Indices ``idx`` padded to ``size`` by repeating the first (the padding computes that item again)."""
    return np.concatenate([idx, np.full(size - idx.size, idx[0])]) if idx.size < size else idx


def _scalars(*values):
    """Host float64 scalars: the traced scalar arguments of the block programs always have the same type (a Python
    float is weakly typed and would compile a second program)."""
    return tuple(np.float64(v) for v in values)


@partial(programs.jit, static_argnames=("act",))
def _advance_block(act, pairs, V_k, V_v, c, x, i, moved, cap, n_newton, target):
    """One block of (sample, start) Newton loops (:func:`_newton_loop`), each resumed from its state ``(x, i, moved)``
    until its step counter reaches ``cap`` (per pair) or it stops. ``pairs = (omega^k, omega^v, y, mask)`` of each
    pair. Returns the new states, whether each loop would go on (only a loop that reached its cap below ``n_newton``
    can), and J and max|grad J| at the new points. ``target``: each pair's known minimum (+inf for none), see
    :func:`_newton_loop`."""
    ok, ov, y, mask = pairs
    i, x, moved = jax.vmap(lambda a, b, yy, m, xx, ii, mv, cp, t: _newton_loop(act, a, b, yy, m, V_k, V_v, c, xx, ii,
                                                                               mv, cp, t))(ok, ov, y, mask, x, i,
                                                                                           moved, cap, target)

    def ends(a, b, yy, m, xx):
        J, _, _, gmax = _newton(act, a, b, yy, m, V_k, V_v, c)
        return J(xx), gmax(xx)

    Jx, g = jax.vmap(ends)(ok, ov, y, mask, x)
    return x, i, moved, (i < n_newton) & (g > NEWTON_STOP) & moved, Jx, g


class _Ends(NamedTuple):
    """End points of the Newton loops of ``_presolve`` (host arrays, leading shape (n, S)): points (n, S, L), J,
    max|grad J|, steps taken, and which loops are unfinished (only when ``max_rounds`` stopped the rounds)."""

    x: np.ndarray
    J: np.ndarray
    gmax: np.ndarray
    steps: np.ndarray
    active: np.ndarray


def _presolve(act, V_k, V_v, c, pairs, starts, n_newton: int, max_rounds: int | None = None, more=(),
              target=None, steps: int = PRESOLVE_STEPS) -> _Ends:
    """The Newton loops of every (sample, start) pair, from ``starts`` (n, S, L), for the samples' ``pairs =
    (omega^k, omega^v, y, mask)`` (host arrays, leading dimension n): rounds of PRESOLVE_STEPS steps, after each of
    which the unfinished pairs are gathered and cut into blocks (:func:`_blocks`), so that neither the slowest pair
    sets the cost of the whole batch nor a new batch size costs a compilation. Per pair the step sequence is the
    same as in one long loop. ``act`` has c = 0 (``c`` is passed as a number).

    ``more``: further ``(pairs, starts)`` groups (other sizes n', S') run in the same rounds and blocks (the tracked
    minima of a warm evaluation: one read-back per round for both); then a list of one ``_Ends`` per group.
    ``target`` (n, L): a known local minimum per sample of the first group, a shortcut for its loops
    (:func:`_newton_loop`). ``steps``: Newton steps per round (a block's vmapped loop runs as many steps as its
    slowest pair, so rounds of one step waste less where the pairs need different numbers of steps, as with
    targets, at the price of one read-back per round)."""
    groups = [(pairs, starts), *more]
    ok, ov, y, mask, x, tg, shapes = [], [], [], [], [], [], []
    for g, (prs, st) in enumerate(groups):
        n, S, L = st.shape
        sample = np.repeat(np.arange(n), S)
        for dst, a in zip((ok, ov, y, mask), prs):
            dst.append(a[sample])
        x.append(np.asarray(st, dtype=np.float64).reshape(n * S, L))
        tg.append(np.asarray(target, dtype=np.float64)[sample] if g == 0 and target is not None
                  else np.full((n * S, L), np.inf))
        shapes.append((n, S, L))
    ok, ov, y, mask, x, tg = (np.concatenate(a) for a in (ok, ov, y, mask, x, tg))
    P = x.shape[0]
    i, moved = np.zeros(P, np.int32), np.ones(P, bool)
    J, g, active = np.full(P, np.nan), np.full(P, np.nan), np.ones(P, bool)
    V_k, V_v, c = _scalars(V_k, V_v, c)
    cap_all, rounds = np.int32(n_newton), 0
    while active.any() and (max_rounds is None or rounds < max_rounds):
        idx = np.nonzero(active)[0]
        calls = []
        for start, size in _blocks(idx.size):  # dispatched one after the other, read back afterwards
            sel = idx[start:start + size]
            p = _pad(sel, size)
            cap = np.minimum(i[p] + steps, n_newton).astype(np.int32)
            calls.append((sel, _advance_block(act, (ok[p], ov[p], y[p], mask[p]), V_k, V_v, c, x[p], i[p], moved[p],
                                              cap, cap_all, tg[p])))
        for sel, out in calls:
            xb, ib, mb, ab, Jb, gb = (np.asarray(a)[:sel.size] for a in out)
            # A pair whose loop took no step in this round has stopped by the loop's own test. The activity test is
            # evaluated after the loop, whose round-off can put |grad J| on the other side of NEWTON_STOP = 1e-12:
            # without this, such a pair was "active" forever and _presolve never returned (seen at lambda = 0.01 in
            # duranthon-low-snr).
            active[sel] = ab & (ib != i[sel])
            x[sel], i[sel], moved[sel], J[sel], g[sel] = xb, ib, mb, Jb, gb
        rounds += 1
    out, start = [], 0
    for n, S, L in shapes:
        part = slice(start, start + n * S)
        out.append(_Ends(x[part].reshape(n, S, L), J[part].reshape(n, S), g[part].reshape(n, S),
                         i[part].reshape(n, S), active[part].reshape(n, S)))
        start += n * S
    return out if more else out[0]


def _lowest(ends: _Ends):
    """Per sample, the end point with the lowest J: points (n, L) and values (n,)."""
    b = np.argmin(ends.J, axis=1)
    rows = np.arange(b.size)
    return ends.x[rows, b], ends.J[rows, b]


@partial(programs.jit, static_argnames=("act",))
def _channel_block(act, pairs, V_k, V_v, c, x):
    """One block of samples: the final full Newton step of :func:`_prox_all` from the loops' end points ``x`` (kept
    unless it raises J beyond round-off), then :func:`_implicit_fields` there. Returns (f^k, f^v, r, div_k, div_v,
    frob, unconverged (|grad J| > INNER_GTOL), chi_hat)."""

    def one(ok, ov, y, mask, x0):
        J, direction, _, gmax = _newton(act, ok, ov, y, mask, V_k, V_v, c)
        xn = x0 + direction(x0)
        chi = jnp.where(J(xn) <= J(x0) + 1e-12 * (1.0 + jnp.abs(J(x0))), xn, x0)
        return _implicit_fields(act, ok, ov, y, mask, V_k, V_v, c, chi) + (gmax(chi) > INNER_GTOL, chi)

    return jax.vmap(one)(*pairs, x)


def _channel(act, V_k, V_v, c, pairs, x):
    """:func:`_channel_block` over every sample, in blocks (:func:`_blocks`): host arrays with leading dimension n."""
    n = x.shape[0]
    V_k, V_v, c = _scalars(V_k, V_v, c)
    calls = []
    for start, size in _blocks(n):
        p = _pad(np.arange(start, min(start + size, n)), size)
        calls.append(_channel_block(act, tuple(a[p] for a in pairs), V_k, V_v, c, x[p]))
    parts = [[np.asarray(a) for a in out] for out in calls]
    return [np.concatenate([part[j] for part in parts])[:n] for j in range(len(parts[0]))]


def compile_blocks(act: Activation, samples: FrozenSamples, n_newton: int = 30):
    """Compile the inner solver's programs (:func:`_advance_block`, :func:`_channel_block`) for every block size
    (:data:`BLOCKS`) at the samples' L (benchmarks call this so that no compilation falls inside a timing). The
    programs do not depend on the number of samples or of starts."""
    L = samples.chi.shape[1]
    act0 = dataclasses.replace(act, c=0.0)
    V_k, V_v, c = _scalars(1.0, 1.0, act.c)
    for size in BLOCKS:
        pairs = (np.zeros((size, L)), np.zeros((size, L)), np.zeros(size), np.ones((size, L), bool))
        x, i = np.zeros((size, L)), np.zeros(size, np.int32)
        jax.block_until_ready(_advance_block(act0, pairs, V_k, V_v, c, x, i, np.ones(size, bool), i,
                                             np.int32(n_newton), np.full((size, L), np.inf)))
        jax.block_until_ready(_channel_block(act0, pairs, V_k, V_v, c, x))
