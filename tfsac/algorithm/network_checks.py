"""The contracts of what a user hands the algorithm (custom models, a variant's optimizers,
losses, metrics and checkpoint objects, sizes, observations, batches), each refused in a line."""

from __future__ import annotations

import numbers
from typing import Dict, List

import keras
import numpy as np
import tensorflow as tf

from tfsac.data.replay import FIELDS, pack_batch
from tfsac.errors import TfsacError, first_line


def check_custom_actor(config, actor_fn, architecture_is_mlp: bool, normalizes: bool) -> None:
    """An actor_fn replaces the built-in actor: not with gSDE, another network or a normaliser."""
    if actor_fn is None:
        return
    if config.use_sde:
        raise TfsacError("use_sde needs the built-in actor (a custom actor_fn was given)")
    if not architecture_is_mlp:
        raise TfsacError(
            f"network {config.network} builds its own actor and critics: leave network at "
            "mlp with a custom actor_fn"
        )
    if normalizes:
        raise TfsacError(
            "normalize_observations needs the built-in actor (a custom actor_fn was given): "
            "put the normaliser into your model or leave the option off"
        )


def check_models(actor, critic, target_critic) -> None:
    """Keras models, the critic's target a model of its own (else tau would be a no-op)."""
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
    """model(*inputs), or a TfsacError where it does not take them."""
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
    """Builds the models on a dummy batch and checks their outputs' shapes."""
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
    for model in (m for m in critics if m is not None):  # CrossQ has no target critic
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
    """`members=` (target_subset's) must give the whole ensemble's values, gathered."""
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


def check_sizes(obs_dim, action_dim) -> None:
    """Positive integers (SB3's SAC("MlpPolicy", env) would fail deep in Keras)."""
    sizes = (obs_dim, action_dim)
    if all(isinstance(n, numbers.Integral) and not isinstance(n, bool) and n > 0 for n in sizes):
        return
    raise TfsacError(
        f"SAC(obs_dim, action_dim, config) takes the sizes of the observation and action "
        f"vectors, got {obs_dim!r} and {action_dim!r}: it is the training state and its "
        "update. To train on an env (SB3's SAC('MlpPolicy', env).learn(n)): "
        "tfsac.train(tfsac.SACConfig(env_id=..., total_steps=n)), or train(config, "
        "env_fn=make_env) for your env (docs/guide/coming-from.md)"
    )


def check_variant_optimizers(sac) -> None:
    """A variant's optimizers under names of their own, and built (else a checkpoint could
    not restore their slots)."""
    variant, own = sac.variant, sac.variant.optimizers()
    clash = sorted({"actor", "critic", *sac.temperature.optimizers()} & set(own))
    if clash:
        raise TfsacError(
            f"algorithm {variant.name}: its optimizers() names {clash[0]!r}, SAC's own "
            "optimizer: give the variant's a name of its own"
        )
    unbuilt = [part for part, optimizer in own.items() if not optimizer.built]
    if unbuilt:
        raise TfsacError(
            f"algorithm {variant.name}: its optimizer {unbuilt[0]!r} is not built: call its "
            "build(<the variables it trains>) in __init__"
        )


def seeds_error(variant, error: ValueError) -> TfsacError:
    """What a variant's update that reads seeds past `seeds_needed` raises when traced."""
    return TfsacError(
        f"algorithm {variant.name}: its update raised {first_line(error)}: if it "
        f"reads seeds past seeds[:, {variant.seeds_needed - 1}], declare a larger "
        f"seeds_needed (now {variant.seeds_needed})"
    )


def checked_loss(variant, method: str, loss) -> tf.Tensor:
    """The loss `method` returned, as a float32 scalar."""
    loss = tf.cast(loss, tf.float32)
    if loss.shape.rank != 0:
        raise TfsacError(
            f"algorithm {variant.name}: {method}'s loss has shape {loss.shape}: a loss is a "
            "scalar (tf.reduce_mean it)"
        )
    return loss


def checked_metrics(variant, method: str, metrics, names: str) -> Dict[str, tf.Tensor]:
    """`metrics` as float32 scalars, named as the variant's `names` declares."""
    declared = getattr(variant, names)
    if not isinstance(metrics, dict) or sorted(metrics) != sorted(declared):
        got = sorted(metrics) if isinstance(metrics, dict) else type(metrics).__name__
        raise TfsacError(
            f"algorithm {variant.name}: {method} returns metrics {got}, its {names} "
            f"declare {sorted(declared)}"
        )
    values = {name: tf.cast(value, tf.float32) for name, value in metrics.items()}
    if shaped := sorted(name for name, value in values.items() if value.shape.rank != 0):
        raise TfsacError(
            f"algorithm {variant.name}: {method}'s metric {shaped[0]!r} has shape "
            f"{values[shaped[0]].shape}: a metric is a scalar (tf.reduce_mean it)"
        )
    return values


def check_metric_dicts(variant, extra, after) -> None:
    """critic_objective's and after_critic_step's metrics: dicts, each name from one."""
    if not isinstance(extra, dict) or not isinstance(after, dict) or set(extra) & set(after):
        raise TfsacError(
            f"algorithm {variant.name}: critic_objective and after_critic_step "
            "return dicts of metrics, each name from one of them"
        )


# SACLearner's inputs, checked in Python: TensorFlow's errors name a layer or a split.
def checked_observations(observation, obs_dim: int) -> np.ndarray:
    """`observation` as [B, obs_dim]."""
    observation = np.asarray(observation)
    if observation.ndim != 2 or observation.shape[1] != obs_dim:
        raise TfsacError(
            f"observations must be a batch [B, {obs_dim}], got shape "
            f"{observation.shape} (one observation is obs[None])"
        )
    return observation


def packed_batches(batches, gamma: float, width: int) -> np.ndarray:
    """Packed rows [steps, batch, width], as given or packed from fields."""
    if not isinstance(batches, np.ndarray):
        try:
            batches = pack_batch(batches, gamma)
        except KeyError as e:
            raise TfsacError(
                f"batches lack the field {e}: a dict of {', '.join(FIELDS)} "
                "(discount optional), each [steps, batch, ...]"
            ) from None
        except ValueError as e:
            raise TfsacError(f"batches of fields whose shapes do not fit: {e}") from None
    if batches.ndim != 3 or batches.shape[2] != width or 0 in batches.shape:
        raise TfsacError(
            f"batches must be packed rows [steps >= 1, batch >= 1, {width}] (or fields of "
            f"[steps, batch, ...]), got shape {batches.shape}"
        )
    return batches


def check_saved(learner, what: str) -> None:
    """Every variable the update writes in a checkpoint object (else a resume resets it)."""
    unsaved = unsaved_variables(learner)
    if unsaved:
        raise TfsacError(
            f"{what}: no checkpoint object holds {', '.join(unsaved[:3])}"
            f"{' ...' if len(unsaved) > 3 else ''} (variables the update writes): list "
            "the variant's networks and optimizers in its checkpoint_objects"
        )


def unsaved_variables(learner) -> List[str]:
    """The paths of variables an update writes that no checkpoint object of `learner` holds."""
    # A checkpoint saves its graph of the objects (lists, dicts, Keras variables in a
    # tf.Module), and a model's own variables (dropout seed states, outside the graph).
    objects = learner.checkpoint_objects()
    root = tf.train.Checkpoint(**objects)  # the view holds it weakly
    found = tf.train.TrackableView(root).descendants()
    held = {id(v) for v in found if isinstance(v, (tf.Variable, keras.Variable))}
    held |= {id(v) for obj in objects.values() for v in getattr(obj, "variables", ())}
    written = [
        *learner.sac.trainable_state(),
        *(v for o in learner.sac.optimizers().values() for v in o.variables),
    ]
    return [getattr(v, "path", v.name) for v in written if id(v) not in held]
