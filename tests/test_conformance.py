"""One conformance test over the whole catalogue (every registered preset, quick size), as optax runs one check over
all its modules: the conformance kit :func:`attnlab.testing.check_preset` (strict JSON, the data and figure
conventions, a finding in words, finite metrics, every check finite, passing and with power: its negative control,
the same check on a deliberately wrong counterpart, fails)."""

import json
import math

import pytest

import attnlab.testing
from attnlab.registry import Check, all_presets


def _strict(text: str):
    def bad(token):
        raise ValueError(f"bare {token} in JSON")

    return json.loads(text, parse_constant=bad)


REFERENCE_ONLY = {"marion-bert-probing": "only for bert-base-uncased"}
"""Presets that run here on a stand-in model (``marion-bert-probing``: a small random BERT, ``tiny_bert_dir``), and
the reason their checks against the paper's weights give: those checks are not evaluated; every other check is."""


@pytest.mark.parametrize("name", sorted(all_presets()))
def test_preset_conforms(name, quick_run, request):
    """The conformance kit over the catalogue (plugins' presets installed here included): the preset's quick run,
    shared with the papers' tests, stored and read back; determinism is tested by tests/test_api.py and the
    sweep tests, without a second run of every preset."""
    if name == "marion-bert-probing":  # needs a local model directory: the tiny model's quick run
        run = request.getfixturevalue("probing_quick_run")
    else:
        run = quick_run(name)
    attnlab.testing.check_preset(name, run=run, determinism=False,
                                 not_evaluated_ok=(REFERENCE_ONLY[name],) if name in REFERENCE_ONLY else ())


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
