"""Soft Actor-Critic: the training state and one gradient step.

`SAC.update(batch)` is the whole algorithm of Haarnoja et al. 2018 ("Soft Actor-Critic
Algorithms and Applications", arXiv:1812.05905), read top to bottom: the TD target, the
critic step, the actor and temperature steps (every `policy_delay` critic steps), the Polyak
step (every `target_update_interval`). The variants are objects chosen once, here:

- the temperature (TEMPERATURES in temperature.py, by `use_log_alpha`): fixed, learned in
  log-alpha (the default) or learned in alpha itself;
- the critic target (CRITIC_TARGETS in critic_targets.py, by `variant` and `algorithm`): soft
  clipped double-Q
  from target critics (v2, the default), the target V network of the original SAC (v1,
  arXiv:1801.01290), which also trains V, or TQC's truncated pool of quantile atoms
  (arXiv:2005.04269). It also names the critic's and the actor's losses.

Each variant owns what it adds (variables, networks, optimizers) and names it for the
checkpoint (`checkpoint_objects`), so a new one is a class and a registry entry.

Compilation (XLA, packed batches, several steps per call) is tfsac.algorithm.learner's business.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import keras
import tensorflow as tf

from tfsac.algorithm.critic_targets import CRITIC_TARGETS, Batch, critic_target_name
from tfsac.algorithm.distributions import policy_params, tanh_normal
from tfsac.algorithm.networks import build_networks
from tfsac.algorithm.simba import ObservationNormalizer
from tfsac.algorithm.steps import apply_gradients, polyak_update
from tfsac.algorithm.temperature import TEMPERATURES
from tfsac.config import SACConfig


class SAC:
    """The networks, their optimizers, the temperature and one gradient step.

    Actions live in [-1, 1]^d here; the map onto an env's bounds happens at the env
    boundary and in the exported policy, so the entropy target does not depend on the
    action units.
    """

    metric_names = ("critic_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q_mean")

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: SACConfig,
        actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
        critic_fn: Optional[Callable[[int, int], keras.Model]] = None,
    ):
        self.config = config
        # SimBa's running observation statistics, shared by its actor and critics.
        self.obs_normalizer = (
            ObservationNormalizer(name="obs_normalizer") if config.network == "simba" else None
        )
        # Built first and in this order: their initial weights come from the global seed.
        self.actor, self.critic, self.target_critic = build_networks(
            obs_dim, action_dim, config, actor_fn, critic_fn, self.obs_normalizer
        )
        self.actor_optimizer = self._optimizer("actor")
        self.critic_optimizer = self._optimizer("critic")
        self.critic_target = CRITIC_TARGETS[critic_target_name(config)](self, obs_dim)
        self.metric_names = SAC.metric_names + self.critic_target.metric_names
        initial_alpha = config.alpha if config.alpha is not None else config.initial_alpha
        self.temperature = TEMPERATURES[config.use_log_alpha](config, initial_alpha)
        self.target_entropy = float(
            -action_dim if config.target_entropy is None else config.target_entropy
        )
        # The actor step's metrics, reported again on the steps that skip it (policy_delay).
        self._last_actor_metrics = [tf.Variable(0.0, trainable=False) for _ in range(3)]
        self.update_rng = tf.random.Generator.from_seed(config.seed)
        # Optimizer slots exist before the first trace (and before any checkpoint).
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer.build(self.critic.trainable_variables)
        self.temperature.build()

    def _optimizer(self, part: str) -> keras.optimizers.Optimizer:
        """Adam (AdamW with `weight_decay`), with the config's beta_1 and gradient clip."""
        cfg = self.config
        kwargs = dict(beta_1=cfg.adam_beta1, global_clipnorm=cfg.max_grad_norm, name=f"{part}_adam")
        if cfg.weight_decay:
            return keras.optimizers.AdamW(cfg.rate(part), weight_decay=cfg.weight_decay, **kwargs)
        return keras.optimizers.Adam(cfg.rate(part), **kwargs)

    # --------------------------------------------------------------------- state
    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        """Every object a checkpoint holds, by the names checkpoints have always used."""
        objects = {
            "actor": self.actor,
            "critic": self.critic,
            "target_critic": self.target_critic,  # None in v1
            "actor_optimizer": self.actor_optimizer,
            "critic_optimizer": self.critic_optimizer,
            **self.temperature.checkpoint_objects(),
            **self.critic_target.checkpoint_objects(),
            "update_rng": self.update_rng,
            "obs_normalizer": self.obs_normalizer,  # SimBa's (also inside the networks)
        }
        return {name: obj for name, obj in objects.items() if obj is not None}

    def observe(self, observations) -> None:
        """Folds collected observations into SimBa's normaliser (a no-op otherwise)."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(observations)

    def trainable_state(self) -> List[tf.Variable]:
        """Every variable an update writes (parameters, targets, the temperature)."""
        models = (self.actor, self.critic, self.target_critic)  # no target critic in v1
        return [
            *(v for model in models if model is not None for v in model.trainable_variables),
            *self.critic_target.trainable_variables(),
            self.temperature.variable,
        ]

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        """Each part's optimizer: actor, critic, alpha (and value for v1)."""
        return {
            "actor": self.actor_optimizer,
            "critic": self.critic_optimizer,
            **self.temperature.optimizers(),
            **self.critic_target.optimizers(),
        }

    # ------------------------------------------------------------------- policy
    def sample_with_log_prob(self, observation, seed, training=None):
        """a ~ pi(.|s) (reparameterised) and log pi(a|s), through the Tanh bijector."""
        bounds = (self.config.log_std_min, self.config.log_std_max)
        loc, log_std = policy_params(self.actor, observation, bounds, training)
        return tanh_normal(loc, tf.exp(log_std)).experimental_sample_and_log_prob(seed=seed)

    # ------------------------------------------------------------------- update
    def update(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One SAC gradient step on `batch`; returns its metrics (scalar tensors)."""
        cfg = self.config
        obs = batch["observation"]
        alpha = self.temperature.alpha()
        seeds = tf.cast(self.update_rng.make_seeds(self.critic_target.seeds_needed), tf.int32)
        reward = cfg.reward_scale * batch["reward"]

        # Critic step (Eq. 5) on the TD target (Eqs. 2-3; v1: Eq. 8 of arXiv:1801.01290;
        # CrossQ: the critics' own values at (s', a'), from the same joint batch as Q(s, a)),
        # then v1's V step against the updated critics.
        variables = self.critic.trainable_variables
        with tf.GradientTape() as tape:
            q, target = self.critic_target.values_and_target(batch, reward, alpha, seeds[:, 0])
            critic_loss = self.critic_target.critic_loss(q, target)
        apply_gradients(self.critic_optimizer, tape, critic_loss, variables)
        extra = self.critic_target.after_critic_step(obs, alpha, seeds)

        # Actor and temperature every `policy_delay` critic steps, targets every
        # `target_update_interval` (counted by the critic optimizer's step counter).
        critic_steps = self.critic_optimizer.iterations
        actor_loss, alpha_loss, entropy = self._every(
            cfg.policy_delay,
            critic_steps,
            lambda: self._actor_and_temperature_step(obs, alpha, seeds[:, 1]),
            lambda: tuple(tf.identity(v) for v in self._last_actor_metrics),
        )
        if self.critic_target.target is not None:  # CrossQ has no target networks
            self._every(
                cfg.target_update_interval,
                critic_steps,
                self._polyak_step,
                lambda: tf.constant(False),
            )
        return {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha": alpha,
            "alpha_loss": alpha_loss,
            "entropy": entropy,
            "q_mean": tf.reduce_mean(q),
            **extra,
        }

    @staticmethod
    def _every(interval: int, count, step, skip):
        """`step()` when `count` is a multiple of `interval`, else `skip()`. An interval of
        1 adds no conditional to the graph."""
        if interval == 1:
            return step()
        return tf.cond(count % interval == 0, step, skip)

    def _actor_and_temperature_step(self, obs, alpha, seed):
        """The actor step (Eq. 7, reparameterised as Eq. 11) against the critics just
        updated, then the temperature step (Eq. 18) on the same sampled actions. Returns the
        actor loss, the alpha loss and the policy entropy estimate."""
        variables = self.actor.trainable_variables
        with tf.GradientTape() as tape:
            action, log_prob = self.sample_with_log_prob(obs, seed, training=True)
            q_pi = self.critic_target.actor_q(obs, action)
            actor_loss = self.critic_target.actor_loss(log_prob, q_pi, alpha)
        apply_gradients(self.actor_optimizer, tape, actor_loss, variables)
        alpha_loss = self.temperature.step(log_prob, self.target_entropy)
        metrics = (actor_loss, alpha_loss, -tf.reduce_mean(log_prob))
        if self.config.policy_delay > 1:
            for variable, value in zip(self._last_actor_metrics, metrics, strict=True):
                variable.assign(value)
        return metrics

    def _polyak_step(self):
        """Polyak-averages the parameters (not dropout's RNG state) into the targets."""
        target = self.critic_target
        polyak_update(
            target.target.trainable_variables, target.online.trainable_variables, self.config.tau
        )
        return tf.constant(True)
