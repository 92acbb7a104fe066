"""Layers beyond Keras' own (ensemble dense and layer norm, batch renormalisation, the running
observation normaliser) and the built-in actors' and critic ensembles' frames."""

from __future__ import annotations

import math

import keras
import numpy as np
import tensorflow as tf

from tfsac.data.return_normalizer import combine_moments


def member_weights(members, *weights):
    """The weights (leading axis: the ensemble's members) of `members` only, or all."""
    return weights if members is None else tuple(tf.gather(w, members) for w in weights)


def call_layer(layer, x, training=None, members=None):
    """`layer(x)`, with `members` passed to the ensemble layers that take it."""
    if getattr(layer, "takes_members", False):
        return layer(x, training=training, members=members)
    return layer(x, training=training)


def call_sequential(sequential, x, training=None, members=None):
    """`sequential(x)`, or with `members` its layers one by one through call_layer."""
    if members is None:
        return sequential(x, training=training)
    for layer in sequential.layers:
        x = call_layer(layer, x, training, members)
    return x


def block_stack(block, hidden_sizes, *args) -> keras.Sequential:
    """`block(width, *args)` per hidden size, in a Sequential named blocks."""
    layers = [block(h, *args, name=f"block_{i}") for i, h in enumerate(hidden_sizes)]
    return keras.Sequential(layers, name="blocks")


class ActorFrame(keras.Model):
    """Observation -> `normalizer`, `input_norm`, `features`, `mean` and `log_std` heads."""

    def __init__(self, action_dim: int, log_std_bounds, normalizer, **kw):
        super().__init__(**kw)
        self.normalizer = normalizer  # first: its statistics lead get_weights()
        self.action_dim, self.log_std_bounds = action_dim, tuple(log_std_bounds)

    def numpy_plan(self):
        """None: env runners act with this actor through TF."""
        return None

    def forward_replaced(self, base) -> bool:
        """Whether this actor's class replaces a step of `base`'s forward pass."""
        steps = ("call", "features", "bound_log_std")
        return any(getattr(type(self), step) is not getattr(base, step) for step in steps)

    def bound_log_std(self, log_std):
        return tf.clip_by_value(log_std, *self.log_std_bounds)

    def call(self, observations, training=None):
        x = observations if self.normalizer is None else self.normalizer(observations)
        if self.input_norm is not None:
            x = self.input_norm(x, training=training)
        x = self.features(x, training)
        return self.mean(x), self.bound_log_std(self.log_std(x))


class EnsembleCritic(keras.Model):
    """(s, a) -> `normalizer`, `input_norm` (per member), `features`, `head` -> Q [n, B] (or
    [n, B, outputs]); `members` (indices) evaluates only those."""

    def __init__(self, num_critics: int, outputs: int, normalizer, **kw):
        super().__init__(**kw)
        self.num_critics, self.outputs = num_critics, outputs
        self.normalizer = normalizer

    def call(self, observations, actions, training=None, members=None):
        if self.normalizer is not None:
            observations = self.normalizer(observations)
        x = tf.concat([observations, actions], axis=-1)
        if self.input_norm is not None:
            x = self.input_norm(tf.tile(x[None], [self.num_critics, 1, 1]), training=training)
        q = call_layer(self.head, self.features(x, training, members), members=members)
        return tf.squeeze(q, axis=-1) if self.outputs == 1 else q


class EnsembleDense(keras.layers.Layer):
    """`n` dense layers as one batched matmul, [B, in] or [n, B, in] -> [n, B, units], each
    initialised as a Keras Dense (`kernel_init`); `members` (indices) evaluates only those."""

    takes_members = True

    def __init__(
        self,
        ensemble_size: int,
        units: int,
        activation=None,
        kernel_init: str = "glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.ensemble_size = ensemble_size
        self.units = units
        self.activation = keras.activations.get(activation)
        self.kernel_init = kernel_init

    def build(self, input_shape):
        fan_in = int(input_shape[-1])
        if self.kernel_init == "glorot_uniform":
            limit = math.sqrt(6.0 / (fan_in + self.units))
            initializer = keras.initializers.RandomUniform(-limit, limit)
        else:  # truncated at 2 std, so the std is rescaled to keep the variance
            scale = 2.0 if self.kernel_init == "he_normal" else 1.0
            initializer = keras.initializers.TruncatedNormal(
                0.0, math.sqrt(scale / fan_in) / 0.8796
            )
        self.kernel = self.add_weight(
            name="kernel", shape=(self.ensemble_size, fan_in, self.units), initializer=initializer
        )
        self.bias = self.add_weight(
            name="bias", shape=(self.ensemble_size, 1, self.units), initializer="zeros"
        )

    def call(self, inputs, members=None):
        kernel, bias = member_weights(members, self.kernel, self.bias)
        if len(inputs.shape) == 2:
            n, fan_in, units = kernel.shape
            wide = tf.reshape(tf.transpose(kernel, [1, 0, 2]), [fan_in, n * units])
            out = tf.matmul(inputs, wide)
            out = tf.transpose(tf.reshape(out, [-1, n, units]), [1, 0, 2])
        else:
            out = tf.matmul(inputs, kernel)
        return self.activation(out + bias)


class BatchRenorm(keras.layers.Layer):
    """Batch renormalisation (arXiv:1702.03275) over axis -2, as CrossQ's: in training
    (x - mu_B) / sigma_B * r + d, r and d clipped, no gradient (1 and 0 for `warmup_steps`)."""

    def __init__(
        self,
        momentum: float = 0.99,
        warmup_steps: int = 100_000,
        r_max: float = 3.0,
        d_max: float = 5.0,
        epsilon: float = 1e-3,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.momentum, self.warmup_steps = momentum, warmup_steps
        self.r_max, self.d_max, self.epsilon = r_max, d_max, epsilon

    def build(self, input_shape):
        shape = (*input_shape[:-2], 1, int(input_shape[-1]))
        self.gamma = self.add_weight(name="gamma", shape=shape, initializer="ones")
        self.beta = self.add_weight(name="beta", shape=shape, initializer="zeros")
        fixed = dict(shape=shape, trainable=False)
        self.moving_mean = self.add_weight(name="moving_mean", initializer="zeros", **fixed)
        self.moving_variance = self.add_weight(name="moving_variance", initializer="ones", **fixed)
        self.steps = self.add_weight(name="steps", shape=(), initializer="zeros", trainable=False)

    def call(self, inputs, training=None):
        moving_std = tf.sqrt(self.moving_variance + self.epsilon)
        if not training:
            return self._affine(inputs, self.moving_mean, moving_std, 1.0, 0.0)
        mean, variance = tf.nn.moments(inputs, axes=[-2], keepdims=True)
        std = tf.sqrt(variance + self.epsilon)
        warm = self.steps >= self.warmup_steps
        r = tf.clip_by_value(std / moving_std, 1.0 / self.r_max, self.r_max)
        d = tf.clip_by_value((mean - self.moving_mean) / moving_std, -self.d_max, self.d_max)
        r = tf.stop_gradient(tf.where(warm, r, tf.ones_like(r)))
        d = tf.stop_gradient(tf.where(warm, d, tf.zeros_like(d)))
        m = self.momentum
        self.moving_mean.assign(m * self.moving_mean + (1.0 - m) * mean)
        self.moving_variance.assign(m * self.moving_variance + (1.0 - m) * variance)
        self.steps.assign_add(1.0)
        return self._affine(inputs, mean, std, r, d)

    def _affine(self, inputs, mean, std, r, d):
        """((x - mean) / std * r + d) * gamma + beta as x * scale + offset (one pass)."""
        scale = self.gamma * r / std
        return inputs * scale + (self.beta + self.gamma * d - mean * scale)


class EnsembleLayerNorm(keras.layers.Layer):
    """Layer normalisation of [n, B, units] with a scale and offset per member."""

    takes_members = True

    def __init__(self, ensemble_size: int, epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.ensemble_size = ensemble_size
        self.epsilon = epsilon

    def build(self, input_shape):
        shape = (self.ensemble_size, 1, int(input_shape[-1]))
        self.gamma = self.add_weight(name="gamma", shape=shape, initializer="ones")
        self.beta = self.add_weight(name="beta", shape=shape, initializer="zeros")

    def call(self, inputs, members=None):
        gamma, beta = member_weights(members, self.gamma, self.beta)
        mean, variance = tf.nn.moments(inputs, axes=[-1], keepdims=True)
        return (inputs - mean) * tf.math.rsqrt(variance + self.epsilon) * gamma + beta


class ObservationNormalizer(keras.layers.Layer):
    """(s - mean) / sqrt(var + 1e-8), clipped to [-10, 10], over every observation collected;
    new ones are folded in on the host (`update`) or in a compiled call (`merge`)."""

    epsilon = 1e-8
    # SB3's clip_obs: a feature that barely varied so far would come in at thousands of
    # standard deviations the first time it moves.
    clip = 10.0

    def build(self, input_shape):
        dim = int(input_shape[-1])
        fixed = dict(trainable=False)
        self.mean = self.add_weight(name="mean", shape=(dim,), initializer="zeros", **fixed)
        self.variance = self.add_weight(name="variance", shape=(dim,), initializer="ones", **fixed)
        self.count = self.add_weight(name="count", shape=(), initializer="zeros", **fixed)

    def call(self, observations):
        normalized = (observations - self.mean) * tf.math.rsqrt(self.variance + self.epsilon)
        return tf.clip_by_value(normalized, -self.clip, self.clip)

    @staticmethod
    def moments(observations, dim: int) -> np.ndarray:
        """A batch [B, dim] as float64 rows (B repeated, mean, variance): `merge`'s input."""
        batch = np.asarray(observations, np.float64).reshape(-1, dim)
        if not len(batch):
            return np.zeros([3, dim])
        return np.stack([np.full(dim, float(len(batch))), batch.mean(0), batch.var(0)])

    def update(self, observations: np.ndarray) -> None:
        """Folds a batch [B, dim] into the statistics, on the host."""
        self.merge(self.moments(observations, self.mean.shape[0]))

    def merge(self, moments) -> None:
        """Folds a batch's `moments` into the statistics, on the host or inside a compiled call
        (B = 0: no change)."""
        n, statistics = moments[0, 0], (self.count, self.mean, self.variance)
        old = [tf.cast(v, tf.float64) for v in statistics]
        new = combine_moments(*old, n, moments[1], moments[2])
        for variable, a, b in zip(statistics, new, old, strict=True):
            variable.assign(tf.cast(tf.where(n > 0, a, b), tf.float32))
