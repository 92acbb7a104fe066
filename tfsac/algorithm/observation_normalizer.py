"""A running mean/std normaliser of observations (SimBa's RSNorm, SB3's VecNormalize) as a
Keras layer, the actor's and critics' first: it travels with the actor's weights."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfsac.data.return_normalizer import combine_moments


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
        n, batch_mean, batch_var = self.moments(observations, self.mean.shape[0])
        if not n[0]:
            return
        old = (np.float64(v.numpy()) for v in (self.count, self.mean, self.variance))
        new = combine_moments(*old, n[0], batch_mean, batch_var)
        self._assign(*(np.float32(x) for x in new))

    def merge(self, moments: tf.Tensor) -> None:
        """`update` inside a compiled call, from the batch's `moments` (B = 0: no change)."""
        n = moments[0, 0]
        old = [tf.cast(v, tf.float64) for v in (self.count, self.mean, self.variance)]
        new = combine_moments(*old, n, moments[1], moments[2])
        self._assign(
            *(tf.cast(tf.where(n > 0, a, b), tf.float32) for a, b in zip(new, old, strict=True))
        )

    def _assign(self, count, mean, variance):
        self.count.assign(count)
        self.mean.assign(mean)
        self.variance.assign(variance)
