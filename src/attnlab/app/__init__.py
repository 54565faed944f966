"""The application layer: the command line, the run store, Dask sweeps and the report (the only modules importing
Typer, Rich, Dask and Zarr)."""
