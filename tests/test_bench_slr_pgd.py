"""bench/slr_pgd.py times parts of a Marion preset's run by replacing functions of attnlab.marion.presets: each
must be a function that module has and calls, else the benchmark fails or times nothing."""

import attnlab.marion.presets as marion
from tool_modules import load_tool


def test_the_profiled_functions_are_the_presets_own():
    bench = load_tool("slr_pgd", folder="bench")
    names = [name for part in bench.PROFILED.values() for name in part]
    assert names and all(callable(getattr(marion, name, None)) for name in names), names
    source = open(marion.__file__).read()
    assert all(f"{name}(" in source for name in names)
