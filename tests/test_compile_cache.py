"""The persistent compilation cache: atomic writes (a reader never sees half an entry), used across processes."""

import os
import subprocess
import sys
import threading

from jax._src import lru_cache

import attnlab


def test_cache_writes_are_atomic_renames(tmp_path):
    assert attnlab._atomic_cache_writes()  # installed at import, and idempotent
    cache = lru_cache.LRUCache(str(tmp_path), max_size=-1)
    value = os.urandom(8 << 20)
    seen, stop = [], threading.Event()

    def reader():  # polls while the 8 MiB entry is written: sees nothing, or all of it
        while not stop.is_set():
            got = cache.get("k")
            if got is not None:
                seen.append(len(got))

    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(3):
            cache.put("k", value)
    finally:
        stop.set()
        t.join()
    assert cache.get("k") == value and set(seen) <= {len(value)}
    assert [p.name for p in tmp_path.iterdir()] == [f"k{lru_cache._CACHE_SUFFIX}"]  # no temporary left behind


def test_a_second_process_loads_programs_from_the_cache(tmp_path):
    """Two processes compile the same small program; the second finds it on disk (every program is cached)."""
    code = ("import attnlab, jax, jax.numpy as jnp; "
            "print(float(jax.jit(lambda x: jnp.sin(x) @ x)(jnp.arange(3.0))))")
    env = {**os.environ, "ATTNLAB_JAX_CACHE": str(tmp_path)}
    env.pop("ATTNLAB_JAX_CACHE_MIN_S", None)
    out = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
           for _ in range(2)]
    entries = [p for p in tmp_path.iterdir() if p.name.endswith(lru_cache._CACHE_SUFFIX)]
    assert out[0] == out[1] and entries
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
