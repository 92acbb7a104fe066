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
    """A diagonal Normal over pre-squash actions u, pushed through `squash_bijector`.

    Use `experimental_sample_and_log_prob`: it takes the log-density from u through the
    Tanh bijector's stable forward log-det-Jacobian. `log_prob(a)` instead inverts with
    atanh, which is infinite once a float32 tanh(u) rounds to exactly +-1 (|u| > ~9).
    """
    # A standard Normal moved by Scale then Shift: a sample is the same loc + scale * eps,
    # and its log-density is taken from eps and log(scale) exactly. A Normal(loc, scale)
    # takes it from (u - loc) / scale, which float32 ruins once scale is below loc's
    # rounding step (an initial actor on Humanoid's raw observations: loc ~ 250 with
    # log_std clipped at -20 gives log-densities of -1e5 and a critic that diverges).
    base = tfd.Independent(
        tfd.Normal(tf.zeros_like(loc), tf.ones_like(scale)), reinterpreted_batch_ndims=1
    )
    move = tfb.Chain([tfb.Shift(loc), tfb.Scale(scale)])
    return tfd.TransformedDistribution(base, tfb.Chain([squash_bijector(low, high), move]))


def policy_params(actor, observation, log_std_bounds, training=None):
    """The actor's (mean, log_std) for `observation`, log_std clipped to `log_std_bounds`
    (also for custom actors, whose log_std may be unbounded). `training` reaches the
    actor's layers (CrossQ's batch renormalisation trains on the actor's step only)."""
    loc, log_std = actor(observation, training=training)
    return loc, tf.clip_by_value(log_std, *log_std_bounds)


def deterministic_action(loc, low=None, high=None):
    """The action used for evaluation and serving: the squashed mean."""
    return squash_bijector(low, high).forward(loc)
