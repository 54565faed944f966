"""What the command-line tests share: a tiny marion-manifold config and the one-line error check."""

TINY_KWARGS = {"n_steps": 1000, "log_every": 100, "n_repeats": 2, "n_mc": 2000}
"""Overrides that make a marion-manifold run take a fraction of a second (and still reject its negative controls:
with fewer steps the final iterate is too close to the initial point that serves as the control). The command-line,
API and sweep tests (and their Dask workers) all run this one config, so they share its compiled programs instead
of each compiling a config of its own."""
TINY_ITEMS = tuple(f"{k}={v}" for k, v in TINY_KWARGS.items())
"""The same as ``key=value`` items (:func:`attnlab.app.sweep.parse_grid`)."""
TINY = [arg for item in TINY_ITEMS for arg in ("--set", item)]
"""The same as ``--set`` options of ``attnlab run``."""
TINY_GRID = [arg for item in TINY_ITEMS for arg in ("--grid", item)]
"""The same as ``--grid`` options of ``attnlab sweep``."""


def one_error_line(capsys) -> str:
    """The single ``error:`` line the command printed to stderr (bad input: one line, no traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]
