"""Single-location regression (SLR): the core shared by Marion et al. (ICLR 2025), Dohmatob (NeurIPS 2025), Duranthon et al.

* :mod:`attnlab.slr.data` -- the SLR sampler (random signal location J0), its in-frame twin, the teacher pair (k*, v*);
* :mod:`attnlab.slr.overlaps` -- the five overlaps as named structures (Marion's and Dohmatob's notation), frame coordinates;
* :mod:`attnlab.slr.owen` -- Owen's T function and Marion's zeta function;
* :mod:`attnlab.slr.montecarlo` -- the generic Monte Carlo mean with its standard error.

The functions re-exported here compute in float64 (:func:`attnlab.runtime.float64`) and check their arguments first
(:mod:`attnlab.slr.domain`: a one-line ValueError names an argument outside the domain); the modules' own functions
follow the caller's JAX setting and check nothing.
"""

from attnlab._validate import public as _public
from attnlab.slr import data as _data
from attnlab.slr import domain as _domain
from attnlab.slr import montecarlo as _montecarlo
from attnlab.slr import overlaps as _overlaps
from attnlab.slr import owen as _owen
from attnlab.slr.data import SLRBatch
from attnlab.slr.overlaps import DohmatobOverlaps, Overlaps

sample_teacher = _public(_data.sample_teacher, _domain.sample_teacher)
init_sphere = _public(_data.init_sphere, _domain.init_sphere)
sample_slr = _public(_data.sample_slr, _domain.sample_slr)
sample_slr_in_frame = _public(_data.sample_slr_in_frame, _domain.sample_slr_in_frame)
orthonormal_frame = _public(_data.orthonormal_frame, _domain.orthonormal_frame)
overlaps = _public(_overlaps.overlaps, _domain.overlaps)
frame_coordinates = _public(_overlaps.frame_coordinates, _domain.frame_coordinates)
owens_t = _public(_owen.owens_t, _domain.owens_t)
zeta = _public(_owen.zeta, _domain.zeta)
mc_mean = _public(_montecarlo.mc_mean, _domain.mc_mean)
mc_mean_to_se = _public(_montecarlo.mc_mean_to_se, _domain.mc_mean_to_se)
resolving_se = _montecarlo.resolving_se

__all__ = ["SLRBatch", "Overlaps", "DohmatobOverlaps", "sample_teacher", "init_sphere", "sample_slr",
           "sample_slr_in_frame", "orthonormal_frame", "overlaps", "frame_coordinates", "owens_t", "zeta", "mc_mean",
           "mc_mean_to_se", "resolving_se"]
