"""The contracts of build_networks that custom models (actor_fn, critic_fn) must keep,
checked when the learner is made: each a model of its own, taking [batch, width] float32
inputs, returning float32 outputs of the documented shapes. A model that breaks one is
refused in one line, before any env step (docs/guide/custom-env-and-networks.md)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfsac.errors import TfsacError, first_line


def check_models(actor, critic, target_critic) -> None:
    """Keras models, and the critic's target a model of its own (critic_fn is called twice:
    the same model twice would make the target the critic, and tau a no-op)."""
    models = (("actor", actor), ("critic", critic), ("target critic", target_critic))
    for name, model in models[: 3 if target_critic is not None else 2]:  # CrossQ has no target
        if not isinstance(model, keras.Model):
            raise TfsacError(f"the {name} must be a keras.Model, got {type(model).__name__}")
    if critic is target_critic:
        raise TfsacError(
            "critic_fn returned the same model for the critic and its target: it is called "
            "twice and must build a new model each time"
        )


def _call(name: str, model, *inputs):
    """model(*inputs), a model that does not take them one TfsacError."""
    widths = " and ".join(f"[batch, {int(x.shape[1])}]" for x in inputs)
    try:
        outputs = model(*inputs)
    except (ValueError, TypeError, tf.errors.InvalidArgumentError) as e:
        raise TfsacError(f"the {name} does not take inputs {widths}: {first_line(e)}") from None
    for output in tf.nest.flatten(outputs):
        dtype = getattr(output, "dtype", None)
        if dtype != tf.float32:
            raise TfsacError(
                f"the {name} must compute in float32 (the update's dtype), and returns "
                f"{getattr(dtype, 'name', type(output).__name__)}: leave out dtype= and "
                "mixed-precision policies"
            )
    return outputs


def check_outputs(
    actor, critics, obs_dim: int, action_dim: int, num_critics: int, per_critic: int = 1
) -> None:
    """Builds the models on a dummy batch and checks the shapes of what they return."""
    obs = tf.zeros([3, obs_dim])
    act = tf.zeros([3, action_dim])
    outputs = _call("actor", actor, obs)
    if not (
        isinstance(outputs, (tuple, list))
        and len(outputs) == 2
        and all(tuple(o.shape) == (3, action_dim) for o in outputs)
    ):
        raise TfsacError(
            f"the actor must return (mean, log_std), each [batch, {action_dim}]; got "
            f"{[tuple(o.shape) for o in tf.nest.flatten(outputs)]}"
        )
    if per_critic == 1:
        want, tail = "[n_critics >= 2, batch]", (3,)
    else:
        want, tail = f"[n_critics >= 2, batch, {per_critic}]", (3, per_critic)
    for model in critics:
        if model is None:
            continue
        shape = tuple(_call("critic", model, obs, act).shape)
        if shape[1:] != tail or shape[0] < 2:
            raise TfsacError(f"the critic must return Q values {want}; got {shape}")
        if shape[0] != num_critics:
            raise TfsacError(
                f"the critic returns {shape[0]} Q values per row and num_critics is "
                f"{num_critics}: set num_critics={shape[0]} (target_subset draws from them, "
                "and the run's config.json records it)"
            )


def check_members(critic, obs_dim: int, action_dim: int, size: int) -> None:
    """A target over a random subset evaluates only those critics: `members=` must give
    the same values as the whole ensemble's, gathered."""
    rng = np.random.default_rng(0)  # not TF's generators: the run's random numbers stay put
    obs, act = (tf.constant(rng.normal(size=(3, d)), tf.float32) for d in (obs_dim, action_dim))
    members = tf.range(size - 1, -1, -1)
    try:
        some = critic(obs, act, members=members)
    except TypeError:
        some = None
    if some is None or not np.allclose(
        some.numpy(), tf.gather(critic(obs, act), members).numpy(), rtol=1e-5, atol=1e-5
    ):
        raise TfsacError(
            "with target_subset the critic must take members= (indices) and return only "
            "those critics' values, as tfsac.algorithm.networks.Critic does"
        )
