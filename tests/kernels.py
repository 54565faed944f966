"""What the tests of attnlab's C kernels share."""

import pytest


def needs(kernel):
    """An autouse fixture for a test module whose every test needs ``kernel`` (a module with ``available()`` and
    ``unavailable_reason()``): each test is skipped, with the reason, where the kernel cannot be had. Asked at the
    module's first test rather than at collection (a module-level ``skipif``): there every test worker built every
    kernel before its first test, one after the other behind the build lock, whichever files it then ran."""

    @pytest.fixture(autouse=True)
    def _needs_kernel():
        if not kernel.available():
            pytest.skip(f"native kernel: {kernel.unavailable_reason()}")

    return _needs_kernel
