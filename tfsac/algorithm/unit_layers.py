"""FlashSAC's (arXiv:2604.04539) and XQC's weight-normalised layers, their norms restored
after every optimizer step (a variable's `constraint`); each takes [B, d] or [n, B, d]."""

from __future__ import annotations

import math
from typing import Sequence

import keras
import tensorflow as tf


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
    """Batch normalisation over axis -2 (moving variance unbiased); its scale and offset
    (`affine`'s rows 0 and 1) together keep the norm sqrt(d) per member."""

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
    """FlashSAC's block x + ReLU(BN(W2 ReLU(BN(W1 x)))), W1 widening by `expansion`."""

    def __init__(self, width: int, ensemble: int = 0, expansion: int = 4, **kwargs):
        super().__init__(**kwargs)
        self.expand = UnitDense(expansion * width, ensemble, name="expand")
        self.expand_norm = UnitBatchNorm(name="expand_norm")
        self.project = UnitDense(width, ensemble, name="project")
        self.project_norm = UnitBatchNorm(name="project_norm")

    def call(self, x, training=None):
        h = tf.nn.relu(self.expand_norm(self.expand(x), training=training))
        return x + tf.nn.relu(self.project_norm(self.project(h), training=training))
