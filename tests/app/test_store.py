"""attnlab.app.store.write_data: a run's dataset written in memory first gives the files Zarr's file store writes."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnlab.app import store


def _dataset(value: float = 1.5) -> xr.Dataset:
    steps = np.arange(7)
    return xr.Dataset(
        {"risk": (("step", "repeat"), np.linspace(0, 1, 21).reshape(7, 3) * value, {"units": "y^2"}),
         "missing": (("step",), np.where(steps > 3, np.nan, steps.astype(float))),
         "count": ((), np.int64(12)), "flag": (("repeat",), np.array([True, False, True]))},
        coords={"step": steps, "repeat": [0, 1, 2], "link": ("repeat", ["linear", "tanh", "relu"])},
        attrs={"paper": "a paper", "scale": 0.25})


def _files(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("in_memory", [True, False])
def test_write_data_writes_the_files_of_zarrs_file_store(tmp_path, monkeypatch, in_memory):
    """The same file names and bytes as ``Dataset.to_zarr`` with the run's options, in memory (the default for a
    run's size) and directly (past :data:`attnlab.app.store.IN_MEMORY_BYTES`); the dataset reads back equal.
    Control: a dataset with one value changed gives different bytes."""
    if not in_memory:
        monkeypatch.setattr(store, "IN_MEMORY_BYTES", 0)
    ds = _dataset()
    reference = tmp_path / "reference.zarr"
    ds.to_zarr(reference, mode="w", consolidated=True, zarr_format=2, write_empty_chunks=True)
    run = tmp_path / "run"
    store.write_data(ds, run / "data.zarr")
    assert _files(run / "data.zarr") == _files(reference)
    xr.testing.assert_identical(store.read_data(run), ds)
    store.write_data(_dataset(2.5), tmp_path / "other.zarr")
    assert _files(tmp_path / "other.zarr") != _files(reference)
