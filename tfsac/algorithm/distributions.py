"""The TanhNormal policy distribution, optionally mapped onto a Box's bounds."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

tfd = tfp.distributions
tfb = tfp.bijectors


def squash_bijector(low=None, high=None) -> tfb.Bijector:
    """Tanh onto (-1, 1), then, when bounds are given, the per-dimension affine map onto
    (low, high): a = low + (tanh(u) + 1) * (high - low) / 2."""
    if low is None and high is None:
        return tfb.Tanh()
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
    return tfb.Chain([tfb.Shift((high + low) / 2.0), tfb.Scale((high - low) / 2.0), tfb.Tanh()])


def tanh_normal(loc, scale, low=None, high=None) -> tfd.TransformedDistribution:
    """A diagonal Normal over pre-squash actions u, pushed through `squash_bijector`. Sample
    with `experimental_sample_and_log_prob`: `log_prob(a)` inverts with atanh, infinite once
    a float32 tanh(u) rounds to +-1."""
    # A standard Normal moved by Scale then Shift takes the log-density from eps exactly;
    # Normal(loc, scale)'s (u - loc) / scale loses it in float32 once scale < loc's ulp.
    base = tfd.Independent(
        tfd.Normal(tf.zeros_like(loc), tf.ones_like(scale)), reinterpreted_batch_ndims=1
    )
    move = tfb.Chain([tfb.Shift(loc), tfb.Scale(scale)])
    return tfd.TransformedDistribution(base, tfb.Chain([squash_bijector(low, high), move]))


def policy_params(actor, observation, log_std_bounds, training=None):
    """The actor's (mean, log_std), log_std clipped to `log_std_bounds` (a custom actor's may
    be unbounded); `training` reaches its layers (CrossQ's batch renorm)."""
    loc, log_std = actor(observation, training=training)
    return loc, tf.clip_by_value(log_std, *log_std_bounds)


def deterministic_action(loc, low=None, high=None):
    """The action used for evaluation and serving: the squashed mean."""
    return squash_bijector(low, high).forward(loc)
