"""Helpers of the Dohmatob tests."""

import jax.numpy as jnp

from attnlab.dohmatob.model import get_link


def labels_through_links(batch, v_star, links):
    """Labels of one batch of :func:`attnlab.dohmatob.data.sample_dohmatob` (linear link) through each link, with the
    batch's own noise: ``y_link = sigma_link(x_{J0} . v*) + (y - x_{J0} . v*)`` (len(links), n); to round-off the
    labels ``sample_dohmatob`` draws with that link from the same key, without drawing the tokens once per link."""
    s = batch.X[jnp.arange(batch.X.shape[0]), batch.J0] @ v_star
    return jnp.stack([get_link(link)(s) for link in links]) + (batch.y - s)
