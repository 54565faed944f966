"""Single-location regression (SLR): the core shared by Marion et al. (ICLR 2025), Dohmatob (NeurIPS 2025), Duranthon et al.

* :mod:`attnlab.slr.data` -- the SLR sampler (random signal location J0), its in-frame twin, the teacher pair (k*, v*);
* :mod:`attnlab.slr.overlaps` -- the five overlaps as named structures (Marion's and Dohmatob's notation), frame coordinates;
* :mod:`attnlab.slr.owen` -- Owen's T function and Marion's zeta function;
* :mod:`attnlab.slr.montecarlo` -- the generic Monte Carlo mean with its standard error.

The functions re-exported here compute in float64 (:func:`attnlab.runtime.float64`); the modules' own functions follow
the caller's JAX setting.
"""

from attnlab.runtime import float64 as _float64
from attnlab.slr import data as _data
from attnlab.slr import montecarlo as _montecarlo
from attnlab.slr import overlaps as _overlaps
from attnlab.slr import owen as _owen
from attnlab.slr.data import SLRBatch
from attnlab.slr.overlaps import DohmatobOverlaps, Overlaps

sample_teacher = _float64(_data.sample_teacher)
init_sphere = _float64(_data.init_sphere)
sample_slr = _float64(_data.sample_slr)
sample_slr_in_frame = _float64(_data.sample_slr_in_frame)
orthonormal_frame = _float64(_data.orthonormal_frame)
overlaps = _float64(_overlaps.overlaps)
frame_coordinates = _float64(_overlaps.frame_coordinates)
owens_t = _float64(_owen.owens_t)
zeta = _float64(_owen.zeta)
mc_mean = _float64(_montecarlo.mc_mean)

__all__ = ["SLRBatch", "Overlaps", "DohmatobOverlaps", "sample_teacher", "init_sphere", "sample_slr",
           "sample_slr_in_frame", "orthonormal_frame", "overlaps", "frame_coordinates", "owens_t", "zeta", "mc_mean"]
