"""attnlab.add_xla_flags: appends missing flags, never overrides one the user set."""

import attnlab


def test_add_xla_flags_appends_missing_and_keeps_the_users(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    attnlab.add_xla_flags("--xla_backend_optimization_level=1", "--xla_cpu_multi_thread_eigen=false")
    import os

    flags = os.environ["XLA_FLAGS"].split()
    assert flags == ["--xla_backend_optimization_level=3", "--xla_cpu_multi_thread_eigen=false"]
    monkeypatch.delenv("XLA_FLAGS")
    attnlab.add_xla_flags("--xla_backend_optimization_level=1")
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=1"
