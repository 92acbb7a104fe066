"""FlashSAC's (arXiv:2604.04539) and XQC's (ICLR 2026) networks of unit-norm layers (their
variables' constraints restore the norms after each step), on [B, d] or [n, B, d]."""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import keras
import tensorflow as tf

from tfsac.algorithm.layers import ActorFrame, BatchRenorm, EnsembleCritic, block_stack


class FixedNorm(keras.constraints.Constraint):
    """Scales every slice over `axes` to the norm `norm` (a weight kept on a sphere)."""

    def __init__(self, axes: Sequence[int], norm: float = 1.0):
        self.axes, self.norm = tuple(axes), float(norm)

    def __call__(self, w):
        length = tf.sqrt(tf.reduce_sum(tf.square(w), axis=self.axes, keepdims=True))
        return w * (self.norm / tf.maximum(length, 1e-8))


class UnitDense(keras.layers.Layer):
    """x @ W (+ a free b): each unit's weight vector of unit norm, orthogonal at the start."""

    def __init__(self, units: int, ensemble: int = 0, use_bias: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.units, self.ensemble, self.use_bias = units, ensemble, use_bias

    def build(self, input_shape):
        fan_in = int(input_shape[-1])
        unit = FixedNorm([-2])
        members = self.ensemble or 1

        def initializer(shape, dtype=None):
            draws = [keras.initializers.Orthogonal()((fan_in, self.units)) for _ in range(members)]
            w = tf.stack(draws) if self.ensemble else draws[0]
            return unit(tf.cast(w, dtype or "float32"))

        lead = (self.ensemble,) if self.ensemble else ()
        self.kernel = self.add_weight(
            name="kernel",
            shape=(*lead, fan_in, self.units),
            initializer=initializer,
            constraint=unit,
        )
        self.bias = None
        if self.use_bias:
            shape = (*lead, 1, self.units) if self.ensemble else (self.units,)
            self.bias = self.add_weight(name="bias", shape=shape, initializer="zeros")

    def call(self, x):
        out = tf.matmul(x, self.kernel)
        return out if self.bias is None else out + self.bias


def _affine_shape(input_shape, rows: int):
    """A per-unit parameter's shape: one row per member, broadcast over the batch."""
    return (*input_shape[:-2], rows, int(input_shape[-1]))


class UnitBatchNorm(keras.layers.Layer):
    """Batch norm over axis -2 (moving variance unbiased), its scale and offset (`affine`'s
    rows) of norm sqrt(d) together per member."""

    def __init__(self, momentum: float = 0.99, epsilon: float = 1e-5, **kwargs):
        super().__init__(**kwargs)
        self.momentum, self.epsilon = momentum, epsilon

    def build(self, input_shape):
        d = int(input_shape[-1])
        shape = _affine_shape(input_shape, 2)

        def initializer(shape, dtype=None):  # scale 1, offset 0: norm sqrt(d) already
            return tf.concat([tf.ones(shape[:-2] + (1, d)), tf.zeros(shape[:-2] + (1, d))], -2)

        self.affine = self.add_weight(
            name="affine",
            shape=shape,
            initializer=initializer,
            constraint=FixedNorm([-2, -1], math.sqrt(d)),
        )
        fixed = dict(shape=_affine_shape(input_shape, 1), trainable=False)
        self.moving_mean = self.add_weight(name="moving_mean", initializer="zeros", **fixed)
        self.moving_variance = self.add_weight(name="moving_variance", initializer="ones", **fixed)

    def call(self, x, training=None):
        if training:
            mean, variance = tf.nn.moments(x, axes=[-2], keepdims=True)
            n = tf.cast(tf.shape(x)[-2], x.dtype)
            m = self.momentum
            self.moving_mean.assign(m * self.moving_mean + (1.0 - m) * mean)
            unbiased = variance * n / tf.maximum(n - 1.0, 1.0)
            self.moving_variance.assign(m * self.moving_variance + (1.0 - m) * unbiased)
        else:
            mean, variance = self.moving_mean, self.moving_variance
        scale, offset = tf.split(self.affine, 2, axis=-2)
        scale = scale * tf.math.rsqrt(variance + self.epsilon)
        return x * scale + (offset - mean * scale)


class UnitRMSNorm(keras.layers.Layer):
    """x / sqrt(mean(x^2) + eps) * scale, the scale of norm sqrt(d) per member."""

    def __init__(self, epsilon: float = 1e-6, **kwargs):
        super().__init__(**kwargs)
        self.epsilon = epsilon

    def build(self, input_shape):
        d = int(input_shape[-1])
        self.scale = self.add_weight(
            name="scale",
            shape=_affine_shape(input_shape, 1),
            initializer="ones",
            constraint=FixedNorm([-1], math.sqrt(d)),
        )

    def call(self, x):
        mean_square = tf.reduce_mean(tf.square(x), axis=-1, keepdims=True)
        return x * tf.math.rsqrt(mean_square + self.epsilon) * self.scale


class InvertedResidualBlock(keras.layers.Layer):
    """FlashSAC's block (flash_rl/agents/flashSAC/network.py) x + ReLU(BN(W2 ReLU(BN(W1 x)))),
    W1 widening by `expansion`."""

    def __init__(self, width: int, ensemble: int = 0, expansion: int = 4, **kwargs):
        super().__init__(**kwargs)
        self.expand = UnitDense(expansion * width, ensemble, name="expand")
        self.expand_norm = UnitBatchNorm(name="expand_norm")
        self.project = UnitDense(width, ensemble, name="project")
        self.project_norm = UnitBatchNorm(name="project_norm")

    def call(self, x, training=None):
        h = tf.nn.relu(self.expand_norm(self.expand(x), training=training))
        return x + tf.nn.relu(self.project_norm(self.project(h), training=training))


class UnitActor(ActorFrame):
    """Observation -> (mean, log_std): the subclass's `add_body` layers, unit-norm heads with
    biases; log_std clipped to [-10, 2] by default (the authors')."""

    def __init__(
        self,
        action_dim: int,
        hidden_sizes: Sequence[int],
        log_std_bounds: Tuple[float, float] = (-10.0, 2.0),
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(action_dim, log_std_bounds, normalizer, **kw)
        self.add_body(hidden_sizes, 0)
        self.mean = UnitDense(action_dim, use_bias=True, name="mean")
        self.log_std = UnitDense(action_dim, use_bias=True, name="log_std")

    def features(self, x, training):
        return self.body(x, training)


class UnitCritic(EnsembleCritic):
    """The critic ensemble of the subclass's `add_body` members (EnsembleCritic's frame)."""

    def __init__(
        self,
        num_critics: int,
        hidden_sizes: Sequence[int],
        outputs: int = 1,
        normalizer: Optional[keras.layers.Layer] = None,
        **kw,
    ):
        super().__init__(num_critics, outputs, normalizer, **kw)
        self.add_body(hidden_sizes, num_critics)
        self.head = UnitDense(outputs, num_critics, use_bias=True, name="q")

    def features(self, x, training, members):
        return self.body(x, training)


class FlashBody:
    """FlashSAC's layers: BN, a unit embedding, one block per hidden size, RMSNorm."""

    def add_body(self, hidden_sizes: Sequence[int], ensemble: int) -> None:
        self.input_norm = UnitBatchNorm(name="input_norm")
        self.embed = UnitDense(hidden_sizes[0], ensemble, name="embed")
        self.blocks = block_stack(InvertedResidualBlock, hidden_sizes, ensemble)
        self.out_norm = UnitRMSNorm(name="out_norm")

    def body(self, x, training):
        return self.out_norm(self.blocks(self.embed(x), training=training))


class FlashActor(FlashBody, UnitActor):
    """FlashSAC's actor: log_std squashed by tanh into its bounds."""

    def bound_log_std(self, log_std):
        low, high = self.log_std_bounds
        return low + (high - low) * 0.5 * (1.0 + tf.tanh(log_std))


class FlashCritic(FlashBody, UnitCritic):
    """The critic ensemble of FlashSAC members."""


# XQC's (the authors' xqc/networks/mlp.py): plain batch norm (momentum 0.99, epsilon 1e-3,
# biased variance), i.e. a BatchRenorm whose warm-up never ends: its float32 step count
# stops at 2^24.
NEVER = 2**25


def batch_norm(name: str) -> BatchRenorm:
    return BatchRenorm(momentum=0.99, warmup_steps=NEVER, epsilon=1e-3, name=name)


class XQCBody:
    """XQC's layers: batch norm, then a bias-free UnitDense -> batch norm -> ReLU per hidden
    size (the authors' orthogonal start, scaled to unit norm, is UnitDense's)."""

    def add_body(self, hidden_sizes: Sequence[int], ensemble: int) -> None:
        self.input_norm = batch_norm("input_norm")
        layers = []
        for i, h in enumerate(hidden_sizes):
            layers += [
                UnitDense(h, ensemble, name=f"hidden_{i}"),
                batch_norm(f"batch_norm_{i}"),
                keras.layers.ReLU(name=f"relu_{i}"),
            ]
        self.trunk = keras.Sequential(layers, name="trunk")

    def body(self, x, training):
        return self.trunk(x, training=training)


class XQCActor(XQCBody, UnitActor):
    """XQC's actor: log_std clipped to the authors' [-10, 2]."""


class XQCCritic(XQCBody, UnitCritic):
    """The ensemble of XQC critics."""
