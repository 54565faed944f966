"""ExperimentConfig's rules for every config: finite numbers (NaN never, inf only where a field allows it) and
strict booleans (true/false is not a number), also inside tuples; one-line messages naming the field."""

import math
from typing import Literal

import pydantic
import pytest

from attnlab.config import ExperimentConfig, parse_set, validate_config
from attnlab.errors import AttnlabError


class Demo(ExperimentConfig):
    n: int = 3
    x: float = 1.0
    xs: tuple[float, ...] = (1.0, 2.0)
    matrix: tuple[tuple[float, ...], ...] | None = None
    width: int | None = None
    flag: bool = False
    mode: Literal["a", "b"] = "a"
    nu: float = pydantic.Field(1.0, gt=0, description="signal strength (inf allowed)")
    mu: float = pydantic.Field(1.0, allow_inf_nan=True)


@pytest.mark.parametrize("overrides, fragment", [
    ({"x": math.inf}, "'x'"), ({"x": -math.inf}, "'x'"), ({"x": math.nan}, "'x'"), ({"x": "inf"}, "'x'"),
    ({"xs": [1.0, math.inf]}, "'xs'"), ({"xs": [math.nan]}, "'xs'"), ({"matrix": [[1.0, math.nan]]}, "'matrix'"),
    ({"nu": math.nan}, "'nu'"), ({"mu": math.nan}, "'mu'"),
    ({"n": True}, "'n'"), ({"x": False}, "'x'"), ({"xs": [1.0, True]}, "'xs'"), ({"width": True}, "'width'"),
    ({"matrix": [[True]]}, "'matrix'"),
])
def test_rejected(overrides, fragment):
    with pytest.raises(AttnlabError) as info:
        validate_config(Demo, None, overrides)
    message = str(info.value)
    assert fragment in message and "\n" not in message, message


def test_accepted():
    c = validate_config(Demo, None, {"nu": math.inf, "mu": math.inf, "flag": True, "x": 1e300, "n": 10**30,
                                     "xs": [1, 2.5], "width": None})
    assert c.nu == math.inf and c.mu == math.inf and c.flag is True and c.xs == (1.0, 2.5)
    assert validate_config(Demo, None, parse_set(["flag=true", "x=2"])).x == 2.0


def test_defaults_must_be_finite_too():
    class Bad(ExperimentConfig):
        x: float = math.nan

    with pytest.raises(AttnlabError, match="'x'"):
        validate_config(Bad, None, {})


def test_every_preset_default_is_valid():
    from attnlab.registry import all_presets, resolve_config

    for p in all_presets().values():
        resolve_config(p)
        resolve_config(p, quick=True)
