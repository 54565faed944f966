"""The example notebooks (one per paper, public API only) run from top to bottom in a fresh Jupyter kernel; each
asserts, in its own cells, that the closed form it recomputes by hand agrees with the preset's stored theory."""

import re
import shutil
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
PAPERS = ("marion", "dohmatob", "duranthon", "sakai", "bruno")


def test_there_is_a_notebook_per_paper():
    assert {p.stem.split("-")[0] for p in NOTEBOOKS} >= set(PAPERS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, tmp_path, quick_run):
    nb = nbformat.read(path, as_version=4)
    # The notebook's `attnlab.run(NAME, quick=True, out="runs/NAME")` finds the session's finished quick run of NAME
    # there (the same config and seed, so the store reuses it, as it would a user's earlier run): the preset itself
    # is run and checked once per session, by the conformance test.
    source = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for name, out in re.findall(r'attnlab\.run\("([\w-]+)", quick=True, out="([^"]+)"\)', source):
        shutil.copytree(quick_run(name).run_dir, tmp_path / out)
    # a fresh kernel in a scratch directory: the notebook writes its run there, never into the repository
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": tmp_path}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
