"""What the command-line tests share: a tiny marion-manifold config and the one-line error check."""

TINY = ["--set", "n_steps=1000", "--set", "log_every=100", "--set", "n_repeats=2", "--set", "n_mc=2000"]
"""``--set`` overrides that make a marion-manifold run take a fraction of a second (and still reject its negative
controls: with fewer steps the final iterate is too close to the initial point that serves as the control)."""

TINY_ITEMS = tuple(TINY[1::2])
"""The same overrides as ``key=value`` items, for ``--grid`` and :func:`attnlab.app.sweep.parse_grid`: the sweep tests'
tasks run this config too, so the command-line, API and sweep tests (and their Dask workers) share its compiled
programs instead of each compiling a config of its own."""
TINY_GRID = [arg for item in TINY_ITEMS for arg in ("--grid", item)]
TINY_KWARGS = {k: int(v) for k, v in (item.split("=") for item in TINY_ITEMS)}


def one_error_line(capsys) -> str:
    """The single ``error:`` line the command printed to stderr (bad input: one line, no traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]
