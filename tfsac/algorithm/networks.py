"""The MLP models (actor, critic ensemble, gSDE's actor, v1's V), SimBa's (Lee et al. 2025,
arXiv:2410.09754) and a config's builders."""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, Optional, Sequence

import keras
import tensorflow as tf

from tfsac.algorithm.architectures import MLP, architecture_of
from tfsac.algorithm.layers import (
    ActorFrame,
    BatchRenorm,
    EnsembleCritic,
    EnsembleDense,
    EnsembleLayerNorm,
    ObservationNormalizer,
    block_stack,
    call_layer,
    call_sequential,
)
from tfsac.algorithm.network_checks import (
    check_custom_actor,
    check_members,
    check_models,
    check_outputs,
)
from tfsac.algorithm.variants import variant_of


def _kernel_init(batch_norm: Optional[Dict]) -> str:
    """CrossQ's (batch-normalised) MLPs start LeCun normal, the others Keras' Glorot."""
    return "lecun_normal" if batch_norm else "glorot_uniform"


def relu_trunk(hidden_sizes: Sequence[int], batch_norm=None, dense=None, dropout=0.0, norm=None):
    """Dense -> ReLU per hidden size (DroQ's Dense -> Dropout -> `norm` -> ReLU with either),
    each then BatchRenorm(**batch_norm) where given; `dense` defaults to Keras' Dense."""
    dense = dense or partial(keras.layers.Dense, kernel_initializer=_kernel_init(batch_norm))
    layers = []
    for i, h in enumerate(hidden_sizes):
        if not norm and not dropout:
            layers.append(dense(h, activation="relu", name=f"hidden_{i}"))
        else:
            layers.append(dense(h, name=f"hidden_{i}"))
            if dropout:
                layers.append(keras.layers.Dropout(dropout, name=f"dropout_{i}"))
            if norm:
                layers.append(norm(name=f"layer_norm_{i}"))
            layers.append(keras.layers.ReLU(name=f"relu_{i}"))
        if batch_norm:
            layers.append(BatchRenorm(**batch_norm, name=f"batch_norm_{i}"))
    # A Sequential: tf.train.Checkpoint does not see Keras 3 layers in a list attribute.
    return keras.Sequential(layers, name="trunk")


class Critic(EnsembleCritic):
    """`num_critics` Q(s, a) MLPs: Q [n, B] (or [n, B, outputs]); `layer_norm`/`dropout`:
    DroQ's Dense -> Dropout -> LayerNorm -> ReLU (arXiv:2110.02034); `batch_norm`: CrossQ's."""

    def __init__(
        self,
        num_critics: int = 2,
        hidden_sizes: Sequence[int] = (256, 256),
        layer_norm: bool = False,
        dropout: float = 0.0,
        outputs: int = 1,
        batch_norm: Optional[Dict] = None,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        dense = partial(EnsembleDense, num_critics, kernel_init=_kernel_init(batch_norm))
        norm = partial(EnsembleLayerNorm, num_critics) if layer_norm else None
        self.trunk = relu_trunk(hidden_sizes, batch_norm, dense, dropout, norm)
        self.head = dense(outputs, name="q")

    def features(self, x, training, members):
        return call_sequential(self.trunk, x, training, members)


class Actor(ActorFrame):
    """The MLP actor: observation -> (mean, log_std), log_std clipped; CrossQ's `batch_norm`."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes: Sequence[int] = (256, 256),
        log_std_min: float = -20.0,
        log_std_max: float = 2.0,
        batch_norm: Optional[Dict] = None,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(action_dim, (log_std_min, log_std_max), normalizer, **kw)
        self.depth = len(hidden_sizes)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        self.trunk = relu_trunk(hidden_sizes, batch_norm)
        dense = partial(keras.layers.Dense, kernel_initializer=_kernel_init(batch_norm))
        self.mean = dense(action_dim, name="mean")
        self.log_std = dense(action_dim, name="log_std")

    def numpy_plan(self) -> list:
        """Its layers as tfsac.scale.numpy_actor runs them, in `get_weights()` order; None
        for a subclass with a forward pass of its own."""
        if self.forward_replaced(Actor):
            return None
        normalize = ["normalize"] if self.normalizer is not None else []
        renorm = ["batch_renorm"] if self.input_norm is not None else []
        hidden = [kind for _ in range(self.depth) for kind in ["dense_relu", *renorm]]
        return [*normalize, *renorm, *hidden]

    def features(self, x, training):
        return self.trunk(x, training=training)


class GSDEActor(keras.Model):
    """gSDE's actor (arXiv:2005.05719): noise z(s) @ E, E ~ N(0, exp(log_std)^2) drawn by the
    learner; `call` returns the per-state Gaussian's (mean, log_std)."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes: Sequence[int] = (256, 256),
        log_std_init: float = -3.0,
        clip_mean: float = 2.0,
        **kw,
    ):
        super().__init__(**kw)
        self.action_dim = action_dim
        self.clip_mean = clip_mean
        self.trunk = relu_trunk(hidden_sizes)
        self.mean = keras.layers.Dense(action_dim, name="mean")
        self.log_std = self.add_weight(
            name="log_std",
            shape=(hidden_sizes[-1], action_dim),
            initializer=keras.initializers.Constant(log_std_init),
        )

    def mean_and_features(self, observations):
        """(mean [B, action_dim], features z(s) [B, features])."""
        features = self.trunk(observations)
        mean = tf.clip_by_value(self.mean(features), -self.clip_mean, self.clip_mean)
        return mean, features

    def noise_log_std(self, features):
        """log std of eps(s) = z(s) @ E for each state: 0.5 log(z(s)^2 @ sigma^2)."""
        variance = tf.matmul(tf.square(tf.stop_gradient(features)), tf.exp(2.0 * self.log_std))
        # The epsilon keeps the std positive where every feature is 0 (dead ReLUs).
        return 0.5 * tf.math.log(variance + 1e-6)

    def call(self, observations):
        mean, features = self.mean_and_features(observations)
        return mean, self.noise_log_std(features)


class ValueNetwork(keras.Model):
    """SAC v1's state-value network V(s) (arXiv:1801.01290): [B]."""

    def __init__(
        self,
        hidden_sizes: Sequence[int] = (256, 256),
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(**kw)
        self.normalizer = normalizer
        self.trunk = relu_trunk(hidden_sizes)
        self.head = keras.layers.Dense(1, name="v")

    def call(self, observations):
        if self.normalizer is not None:
            observations = self.normalizer(observations)
        return tf.squeeze(self.head(self.trunk(observations)), axis=-1)


def _norm(batch_norm: Optional[Dict], ensemble: int, name: str):
    if batch_norm:
        return BatchRenorm(**batch_norm, name=name)
    if ensemble:
        return EnsembleLayerNorm(ensemble, name=name)
    return keras.layers.LayerNormalization(epsilon=1e-5, name=name)


class ResidualBlock(keras.layers.Layer):
    """x + Dense(ReLU(Dense(Norm(x), 4 width)), width), He-initialised; [n, B, width] with
    `ensemble` = n, else [B, width]."""

    def __init__(self, width: int, ensemble: int = 0, batch_norm=None, **kwargs):
        super().__init__(**kwargs)
        self.norm = _norm(batch_norm, ensemble, "norm")
        if ensemble:
            dense = partial(EnsembleDense, ensemble, kernel_init="he_normal")
        else:
            dense = partial(keras.layers.Dense, kernel_initializer=keras.initializers.HeNormal())
        self.expand = dense(4 * width, "relu", name="expand")
        self.project = dense(width, name="project")

    takes_members = True  # passed on to an ensemble's layers

    def call(self, x, training=None, members=None):
        h = call_layer(self.expand, call_layer(self.norm, x, training, members), None, members)
        return x + call_layer(self.project, h, None, members)


# SimBa: the shared observation normaliser (on by default; SBX's SimbaPolicy has none), a
# linear embedding, residual blocks and a last Norm before the heads; Norm is layer norm, or
# with CrossQ batch renorm (as SBX's SimBa CrossQ).
class SimbaActor(ActorFrame):
    """Observation -> (mean, log_std), log_std clipped: the embedding, one residual block per
    hidden size, a last Norm, the heads."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes,
        normalizer: Optional[ObservationNormalizer],
        log_std_bounds=(-20.0, 2.0),
        batch_norm: Optional[Dict] = None,
        **kw,
    ):
        super().__init__(action_dim, log_std_bounds, normalizer, **kw)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        self.embed = keras.layers.Dense(hidden_sizes[0], name="embed")
        self.blocks = block_stack(ResidualBlock, hidden_sizes, 0, batch_norm)
        self.out_norm = _norm(batch_norm, 0, "out_norm")
        self.mean = keras.layers.Dense(action_dim, name="mean")
        self.log_std = keras.layers.Dense(action_dim, name="log_std")

    def numpy_plan(self) -> list:
        """As networks.Actor.numpy_plan."""
        if self.forward_replaced(SimbaActor):
            return None
        normalize = ["normalize"] if self.normalizer is not None else []
        renorm = ["batch_renorm"] if self.input_norm is not None else []
        norm = "batch_renorm" if renorm else "layer_norm"
        blocks = [f"block:{norm}"] * len(self.blocks.layers)
        return [*normalize, *renorm, "dense", *blocks, norm]

    def features(self, x, training):
        return self.out_norm(self.blocks(self.embed(x), training=training), training=training)


class SimbaCritic(EnsembleCritic):
    """The critic ensemble with SimBa members: Q values [n, B] (or [n, B, outputs])."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes,
        normalizer: Optional[ObservationNormalizer],
        outputs: int = 1,
        batch_norm: Optional[Dict] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.input_norm = BatchRenorm(**batch_norm, name="input_norm") if batch_norm else None
        self.embed = EnsembleDense(num_critics, hidden_sizes[0], name="embed")
        self.blocks = block_stack(ResidualBlock, hidden_sizes, num_critics, batch_norm)
        self.out_norm = _norm(batch_norm, num_critics, "out_norm")
        self.head = EnsembleDense(num_critics, outputs, name="q")

    def features(self, x, training, members):
        x = call_sequential(self.blocks, self.embed(x, members=members), training, members)
        return call_layer(self.out_norm, x, training, members)


def build_actor(
    obs_dim: int,
    action_dim: int,
    config,
    actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
    normalizer=None,
) -> keras.Model:
    """The actor alone (as env runners hold it): gSDE's, `actor_fn`'s or the architecture's."""
    if config.use_sde:
        return GSDEActor(action_dim, config.hidden_sizes, config.log_std_init, name="actor")
    if actor_fn is not None:
        return actor_fn(obs_dim, action_dim)
    architecture = architecture_of(config)
    normalizer = normalizer or architecture.normalizer(config)
    batch_norm = variant_of(config).batch_norm(config)
    return architecture.build_actor(action_dim, config, batch_norm, normalizer)


def build_networks(
    obs_dim: int,
    action_dim: int,
    config,
    actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
    critic_fn: Optional[Callable[[int, int], keras.Model]] = None,
    normalizer=None,
) -> tuple[keras.Model, keras.Model, keras.Model]:
    """The actor, the critics and their target (a copy, or None), sharing `normalizer`;
    `actor_fn(obs_dim, action_dim)` gives [B, obs_dim] -> (mean, log_std), `critic_fn`
    (obs, action, training=) -> Q [n_critics >= 2, B]."""
    architecture, variant = architecture_of(config), variant_of(config)
    normalizer = normalizer or architecture.normalizer(config)
    check_custom_actor(config, actor_fn, architecture is MLP, normalizer is not None)
    actor = build_actor(obs_dim, action_dim, config, actor_fn, normalizer)
    outputs, batch_norm = variant.critic_outputs(config), variant.batch_norm(config)
    make_target = critic_fn
    if critic_fn is None:

        def critic_fn(obs_dim, action_dim, name="critic"):
            return architecture.build_critic(config, name, outputs, batch_norm, normalizer)

        make_target = partial(critic_fn, name="target_critic")
    critic = critic_fn(obs_dim, action_dim)
    target_critic = make_target(obs_dim, action_dim) if variant.has_target_critic else None
    check_models(actor, critic, target_critic)
    check_outputs(actor, (critic, target_critic), obs_dim, action_dim, config.num_critics, outputs)
    if target_critic is not None and 0 < config.target_subset < config.num_critics:
        check_members(target_critic, obs_dim, action_dim, config.target_subset)
    if target_critic is not None:
        for target, source in zip(
            target_critic.trainable_variables, critic.trainable_variables, strict=True
        ):
            target.assign(source)
    return actor, critic, target_critic
