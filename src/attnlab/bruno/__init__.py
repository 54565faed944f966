"""Mean-field transformer dynamics on the sphere: Bruno, Pasqualotto, Agazzi (NeurIPS 2025, arXiv 2509.25040).

Public surface:

* :mod:`attnlab.bruno.attention` -- blocked online-softmax attention (O(N) memory), SA and USA, dense reference;
* :mod:`attnlab.bruno.integrate` -- the particle model, Euler + renormalisation (the paper's Eq. (1)), Heun and RK4
  with renormalisation, snapshots at (log-spaced) times;
* :mod:`attnlab.bruno.initial` -- the initial laws (uniform, latitude-uniform with azimuth mixture, heat kernels);
* :mod:`attnlab.bruno.observables` -- energy, order parameters, moments, clusters, angle histograms;
* :mod:`attnlab.bruno.reduced` -- the alignment closed form, heat-kernel mixtures, pairing and equiangular ODEs;
* :func:`animate` -- an animated GIF of the token cloud from a preset's dataset.
"""

from attnlab.bruno.animate import animate
from attnlab.bruno.attention import attention, attention_dense, log_normalizer
from attnlab.bruno.integrate import Model, make_model, normalize, simulate, step

__all__ = ["attention", "attention_dense", "log_normalizer", "Model", "make_model", "normalize", "simulate", "step",
           "animate"]
