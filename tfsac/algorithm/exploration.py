"""How the learner acts while training: a fresh draw from the TanhNormal policy per env
step, or gSDE's state-dependent noise, held fixed between resets (arXiv:2005.05719)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfsac.algorithm.distributions import policy_params, tanh_normal


class GaussianExploration:
    """Actions from `actor`'s TanhNormal policy, a fresh draw per env step; with
    `exploration_zeta`, FlashSAC's `RepeatedNoise` of `noise_shape` (envs, action dims)."""

    def __init__(self, actor: keras.Model, config, rng: tf.random.Generator, noise_shape=None):
        self.actor, self.rng = actor, rng
        self.log_std_bounds = (config.log_std_min, config.log_std_max)
        self.repeat = None
        if config.exploration_zeta:
            zeta = (config.exploration_zeta, config.exploration_zeta_max)
            self.repeat = RepeatedNoise(*noise_shape, *zeta, rng)

    def sample(self, observation):
        loc, log_std = policy_params(self.actor, observation, self.log_std_bounds)
        if self.repeat is not None:
            return tf.tanh(loc + tf.exp(log_std) * self.repeat.noise(tf.shape(loc)))
        seed = tf.cast(self.rng.make_seeds(1)[:, 0], tf.int32)
        return tanh_normal(loc, tf.exp(log_std)).sample(seed=seed)


def truncated_zeta_cdf(mu: float, largest: int) -> np.ndarray:
    """The CDF of P(n) proportional to n^-mu over n = 1..largest."""
    pmf = np.arange(1, largest + 1, dtype=np.float64) ** -mu
    return np.cumsum(pmf / pmf.sum()).astype(np.float32)


class RepeatedNoise(tf.Module):
    """FlashSAC's exploration (arXiv:2604.04539): normal noise, one row per env, held for
    n ~ zeta(mu) env steps truncated at `largest`, then drawn anew; a checkpoint holds it."""

    def __init__(self, rows: int, action_dim: int, mu: float, largest: int, rng):
        super().__init__(name="repeated_noise")
        self.rng = rng
        self.cdf = tf.constant(truncated_zeta_cdf(mu, largest))
        self.eps = tf.Variable(tf.zeros([rows, action_dim]), trainable=False, name="eps")
        self.held = tf.Variable(0, trainable=False, name="held")  # steps the draw has served
        self.span = tf.Variable(0, trainable=False, name="span")  # steps it serves

    def noise(self, shape):
        """eps for a [rows, action_dim] batch (other shapes: a fresh draw each call)."""
        return tf.cond(
            tf.equal(shape[0], self.eps.shape[0]), self._held_noise, lambda: self.rng.normal(shape)
        )

    def _held_noise(self):
        def redraw():
            self.eps.assign(self.rng.normal(self.eps.shape))
            count = tf.reduce_sum(tf.cast(self.cdf <= self.rng.uniform([]), tf.int32))
            self.span.assign(tf.minimum(count + 1, self.cdf.shape[0]))
            self.held.assign(0)
            return tf.constant(True)

        drawn = tf.cond(self.held >= self.span, redraw, lambda: tf.constant(False))
        with tf.control_dependencies([drawn]):
            with tf.control_dependencies([self.held.assign_add(1)]):
                return tf.identity(self.eps)


class GSDEExploration:
    """gSDE (arXiv:2005.05719): tanh(mean(s) + z(s) @ E), z(s) the actor's last hidden
    features and E ~ N(0, exp(log_std)^2) one matrix per env copy, held until `reset`."""

    def __init__(self, sac, rng: tf.random.Generator, num_envs: int):
        self.sac, self.rng, self.num_envs = sac, rng, num_envs
        self.log_std_bounds = (sac.config.log_std_min, sac.config.log_std_max)
        self.noise = tf.Variable(
            tf.zeros([num_envs, *sac.actor.log_std.shape]), trainable=False, name="exploration"
        )

    def sample(self, observation):
        loc, features = self.sac.actor.mean_and_features(observation)
        rows = tf.range(tf.shape(observation)[0]) % self.num_envs  # row i acts for env i
        noise = tf.einsum("bf,bfa->ba", features, tf.gather(self.noise, rows))
        # Scaled to the std the losses clip (log_std_min/max): the distribution the actor trains.
        log_std = self.sac.actor.noise_log_std(features)
        noise *= tf.exp(tf.clip_by_value(log_std, *self.log_std_bounds) - log_std)
        return tf.tanh(loc + noise)

    def reset(self):
        sigma = tf.exp(self.sac.actor.log_std)
        self.noise.assign(sigma * self.rng.normal(self.noise.shape))
        return tf.constant(True)
