"""Mean-field transformer dynamics: tokens as particles on the sphere. Bruno, Pasqualotto, Agazzi, "A multiscale
analysis of mean-field transformers in the moderate interaction regime" (NeurIPS 2025, arXiv:2509.25040).

* ``attention`` -- self-attention on the sphere with O(N) memory (blocked, SA and USA), and the dense reference;
* ``integrate`` -- the particle model: Euler + renormalisation (the paper's Eq. (1)), Heun, RK4, adaptive BS3(2);
* ``initial`` -- the initial laws of the paper's figures (uniform, wrapped normals, heat kernels);
* ``observables`` -- interaction energy, order parameter, moments, clusters, angle histograms;
* ``reduced`` -- the reduced models of the three phases: alignment closed form (Thm. 3.2), heat (Eq. (7)), pairing;
* ``native`` -- the C kernel of the float32 attention sums (``implementation``);
* ``animate``, ``presets``, ``figures`` -- the paper's experiments (Figs. 1-4), their figures and an animation.

The model: dx_i/dt = P_{x_i} sum_j w_ij V x_j with w_ij = exp(beta <Q x_i, K x_j>) / Z_i (Eq. (1)); the paper's
discrete model is one Euler step of size dt followed by the renormalisation x / |x|. The functions below compute in
float64 unless given float32 tokens or kernel dtype (:func:`attnlab.runtime.float64`), and check their arguments
first (:mod:`attnlab.bruno.domain`: a one-line ValueError names an argument outside the domain).
"""

from attnlab._validate import public as _public
from attnlab.bruno import attention as _attention
from attnlab.bruno import domain as _domain
from attnlab.bruno import initial as _initial
from attnlab.bruno import integrate as _integrate
from attnlab.bruno import observables as _observables
from attnlab.bruno import reduced as _reduced
from attnlab.bruno.animate import animate as animate
from attnlab.bruno.integrate import Model as Model

attention = _public(_attention.attention, _domain.attention)
attention_dense = _public(_attention.attention_dense, _domain.attention_dense)
log_normalizer = _public(_attention.log_normalizer, _domain.log_normalizer)
make_model = _public(_integrate.make_model, _domain.make_model)
normalize = _public(_integrate.normalize, _domain.normalize)
step = _public(_integrate.step, _domain.step)
simulate = _public(_integrate.simulate, _domain.simulate)
simulate_adaptive = _public(_integrate.simulate_adaptive, _domain.simulate_adaptive)
uniform_sphere = _public(_initial.uniform_sphere, _domain.uniform_sphere)
wrapped_normal_mixture = _public(_initial.wrapped_normal_mixture, _domain.wrapped_normal_mixture)
log_energy = _public(_observables.log_energy, _domain.log_energy)
order_parameter = _public(_observables.order_parameter, _domain.order_parameter)
alignment_closed_form = _public(_reduced.alignment_closed_form, _domain.alignment_closed_form)
heat_mixture_s2 = _public(_reduced.heat_mixture_s2, _domain.heat_mixture_s2)

__all__ = ["attention", "attention_dense", "log_normalizer", "Model", "make_model", "normalize", "step", "simulate",
           "simulate_adaptive", "uniform_sphere", "wrapped_normal_mixture", "log_energy", "order_parameter",
           "alignment_closed_form", "heat_mixture_s2", "animate"]
