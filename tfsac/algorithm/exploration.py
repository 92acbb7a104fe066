"""How the learner acts while training: a fresh draw from the TanhNormal policy per env
step, or gSDE's state-dependent noise, held fixed between resets (arXiv:2005.05719)."""

from __future__ import annotations

import keras
import tensorflow as tf

from tfsac.algorithm.distributions import policy_params, tanh_normal


class GaussianExploration:
    """Actions sampled from the TanhNormal policy of `actor`, a fresh draw per env step
    (the learner's acting, and env runners' with their own copy of the actor)."""

    def __init__(self, actor: keras.Model, config, rng: tf.random.Generator):
        self.actor, self.rng = actor, rng
        self.log_std_bounds = (config.log_std_min, config.log_std_max)

    def sample(self, observation):
        loc, log_std = policy_params(self.actor, observation, self.log_std_bounds)
        seed = tf.cast(self.rng.make_seeds(1)[:, 0], tf.int32)
        return tanh_normal(loc, tf.exp(log_std)).sample(seed=seed)

    def reset(self):
        return tf.constant(True)


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
        # Scaled to the std the losses clip (log_std_min/max), so that the actions come from
        # the distribution the actor trains as its own (1 where no clip applies).
        log_std = self.sac.actor.noise_log_std(features)
        noise *= tf.exp(tf.clip_by_value(log_std, *self.log_std_bounds) - log_std)
        return tf.tanh(loc + noise)

    def reset(self):
        sigma = tf.exp(self.sac.actor.log_std)
        self.noise.assign(sigma * self.rng.normal(self.noise.shape))
        return tf.constant(True)
