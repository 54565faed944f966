"""One conformance test over the whole catalogue (every registered preset, quick size), as optax runs one check over
all its modules: strict JSON, the data and figure conventions of ``conventions.py`` (CF coordinates with units,
JSON-native attributes, mathtext labels, colour bars), a finding in words, and every check finite,
passing and with power: its negative control (the same check on a deliberately wrong counterpart) fails."""

import json
import math

import matplotlib.pyplot as plt
import pytest

from attnlab import runtime
from attnlab.registry import Check, all_presets
from conventions import dataset_problems, figure_problems


def _strict(text: str):
    def bad(token):
        raise ValueError(f"bare {token} in JSON")

    return json.loads(text, parse_constant=bad)


REFERENCE_ONLY = {"marion-bert-probing": "only for bert-base-uncased"}
"""Presets that run here on a stand-in model (``marion-bert-probing``: a small random BERT, ``tiny_bert_dir``), and
the reason their checks against the paper's weights give: those checks are not evaluated; every other check is."""


@pytest.mark.parametrize("name", sorted(all_presets()))
def test_preset_conforms(name, quick_run, request):
    preset = all_presets()[name]
    if name == "marion-bert-probing":  # needs a local model directory: the tiny model's quick run
        run = request.getfixturevalue("probing_quick_run")
    else:
        run = quick_run(name)  # stored with the store (no figures) and read back, shared with the papers' tests
    config = run.config
    with runtime.x64():
        figures = preset.plot(run.data, config)  # drawn from the stored data (saving them is tested elsewhere)
    assert figures and all(f.axes for f in figures.values())
    problems = [p for n, f in figures.items() for p in figure_problems(f, n)]
    plt.close("all")
    assert not problems, "figure conventions:\n" + "\n".join(problems)
    summary = _strict((run.run_dir / "summary.json").read_text())
    _strict((run.run_dir / "config.json").read_text())
    assert summary["finding"] and "\n" not in summary["finding"], "a one-line finding in words"

    problems = dataset_problems(run.data)
    assert not problems, "data conventions:\n" + "\n".join(problems)

    assert run.checks
    for c in run.checks:
        label = f"{name}: {c.name}"
        if not c.evaluated and name in REFERENCE_ONLY and c.reason.startswith(REFERENCE_ONLY[name]):
            continue
        assert c.evaluated, f"{label} not evaluated at quick size: {c.reason}"
        assert all(math.isfinite(float(x)) for x in (c.theory, c.simulation, c.tolerance)), label
        assert c.passed, f"{label}: |{c.theory} - {c.simulation}| > {c.tolerance}"
        assert c.control, f"{label} has no negative control"
        assert c.control_rejected, f"{label}: its control ({c.control}) passes too, error {c.control_error:.3g}"


def test_check_states():
    with pytest.raises(ValueError, match="finite and positive"):
        Check("x", 1.0, 1.0, math.inf)
    with pytest.raises(ValueError, match="finite and positive"):
        Check("x", 1.0, 1.0, 0.0)
    c = Check.not_evaluated("x", "one repeat: no standard error")
    assert not c.passed and c.status == "not evaluated" and c.control_rejected is None
    assert _strict(json.dumps(c.as_dict(), allow_nan=False))["reason"] == "one repeat: no standard error"
    ok = Check("x", 1.0, 1.05, 0.1, "5 SE", control="frozen", control_simulation=1.5)
    assert ok.passed and ok.control_rejected and Check.from_dict(ok.as_dict()) == ok
    weak = Check("x", 1.0, 1.05, 0.1, "5 SE", control="frozen", control_simulation=1.08)
    assert not weak.passed and weak.status == "inconclusive" and weak.control_rejected is False
