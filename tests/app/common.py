"""What the command-line tests share: a tiny marion-manifold config and the one-line error check."""

TINY = ["--set", "n_steps=400", "--set", "log_every=100", "--set", "n_repeats=2", "--set", "n_mc=200"]
"""``--set`` overrides that make a marion-manifold run take a fraction of a second."""


def one_error_line(capsys) -> str:
    """The single ``error:`` line the command printed to stderr (bad input: one line, no traceback)."""
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    return lines[0]
