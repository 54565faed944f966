"""Replica-symmetric fixed point and Bayes-optimal state evolution (moved from ``replica.py``; split in the next
commit)."""

from attnlab.duranthon.replica import fixed_point_map as _module

globals().update({k: v for k, v in vars(_module).items() if not k.startswith("__")})
__all__ = list(_module.__all__)
