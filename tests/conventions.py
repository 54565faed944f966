"""The conventions every preset's figures and data follow: the conformance kit's rules (:mod:`attnlab.testing`),
imported here by the papers' tests that apply them to one figure or dataset."""

from attnlab.testing import dataset_problems, figure_problems, preset_problems

__all__ = ["dataset_problems", "figure_problems", "preset_problems"]
