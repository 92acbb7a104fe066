"""Soft Actor-Critic (arXiv:1812.05905): the training state, its optimizers and one gradient
step; the critic rule is the variant's (variants/); the temperature alpha, learned in log-alpha
(the default) or alpha, or fixed (TEMPERATURES, by `use_log_alpha`)."""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional

import keras
import numpy as np
import tensorflow as tf

from tfsac.algorithm import losses
from tfsac.algorithm.architectures import architecture_of
from tfsac.algorithm.distributions import deterministic_action, policy_params, tanh_normal
from tfsac.algorithm.network_checks import (
    check_metric_dicts,
    check_sizes,
    check_variant_optimizers,
    checked_loss,
    checked_metrics,
    seeds_error,
)
from tfsac.algorithm.networks import build_networks
from tfsac.algorithm.resolve import is_resolved, options_read, resolve
from tfsac.algorithm.variants import variant_of
from tfsac.algorithm.variants.base import UPDATE_METRICS
from tfsac.config import SACConfig

# observation, action, reward, next_observation, terminated, discount (transition_layout)
Batch = Dict[str, tf.Tensor]


def polyak_update(target_variables, source_variables, tau: float):
    """target <- tau * source + (1 - tau) * target, variable by variable."""
    for target, source in zip(target_variables, source_variables, strict=True):
        target.assign(tau * source + (1.0 - tau) * target)


def apply_gradients(optimizer, tape, loss, variables) -> None:
    """One optimizer step on `loss`'s gradient with respect to `variables`."""
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))


def base_rates(sac) -> Dict[str, float]:
    """Each optimizer's rate before --lr_schedule: the config's for SAC's parts and a part
    whose rate option the variant reads, else its optimizer's (one on a Keras schedule: none)."""
    taken = {"actor", "critic", *sac.temperature.optimizers()}
    reads = options_read(type(sac.variant))
    rates = {}
    for part, optimizer in sac.optimizers().items():
        if part in taken or f"{part}_learning_rate" in reads:
            rates[part] = sac.config.rate(part)
        elif not isinstance(
            getattr(optimizer, "_learning_rate", None),
            keras.optimizers.schedules.LearningRateSchedule,
        ):
            rates[part] = float(optimizer.learning_rate.numpy())
    return rates


class Temperature:
    """Alpha learned in log-alpha (Eq. 18) or held fixed, still as exp(log_alpha) (the same
    float32 value); `variable` is what the alpha loss optimises."""

    def __init__(self, config: SACConfig, initial_alpha: float):
        self.learned = config.learned_alpha
        self.log_alpha = tf.Variable(
            math.log(initial_alpha), dtype=tf.float32, trainable=self.learned, name="log_alpha"
        )
        self.variable = self.log_alpha
        self.optimizer = keras.optimizers.Adam(config.rate("alpha"), name="alpha_adam")

    def build(self) -> None:
        """Creates the optimizer's slots (before the first trace and any checkpoint)."""
        self.optimizer.build([self.variable])

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {"alpha_optimizer": self.optimizer, "log_alpha": self.log_alpha}

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        return {"alpha": self.optimizer}

    def alpha(self) -> tf.Tensor:
        return tf.exp(self.log_alpha)

    def loss(self, log_prob, target_entropy) -> tf.Tensor:
        return losses.alpha_loss(self.variable, log_prob, target_entropy)

    def step(self, log_prob, target_entropy) -> tf.Tensor:
        """One Adam step on the alpha loss when alpha is learned; returns the loss."""
        with tf.GradientTape() as tape:
            loss = self.loss(log_prob, target_entropy)
        if self.learned:
            self.optimizer.apply_gradients([(tape.gradient(loss, self.variable), self.variable)])
            self.after_step()
        return loss

    def after_step(self) -> None:
        pass


class DirectAlphaTemperature(Temperature):
    """Alpha learned in alpha itself (Eq. 18 as written), kept >= 1e-8 after each step."""

    def __init__(self, config: SACConfig, initial_alpha: float):
        super().__init__(config, initial_alpha)
        self.alpha_value = tf.Variable(
            initial_alpha, dtype=tf.float32, trainable=self.learned, name="alpha"
        )
        self.variable = self.alpha_value

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        return {**super().checkpoint_objects(), "alpha": self.alpha_value}

    def alpha(self) -> tf.Tensor:
        return self.alpha_value + 0.0  # a tensor, not the variable the step changes

    def after_step(self) -> None:
        self.alpha_value.assign(tf.maximum(self.alpha_value, 1e-8))


TEMPERATURES = {True: Temperature, False: DirectAlphaTemperature}  # by use_log_alpha


class SAC:
    """The networks, their optimizers, the temperature and one gradient step; actions in [-1, 1]."""

    metric_names = UPDATE_METRICS

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: Optional[SACConfig] = None,
        actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
        critic_fn: Optional[Callable[[int, int], keras.Model]] = None,
    ):
        check_sizes(obs_dim, action_dim)
        config = SACConfig() if config is None else config
        self.config = config = config if is_resolved(config) else resolve(config)
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.obs_normalizer = architecture_of(config).normalizer(config)
        # Built first and in this order: their initial weights come from the global seed.
        self.actor, self.critic, self.target_critic = build_networks(
            obs_dim, action_dim, config, actor_fn, critic_fn, self.obs_normalizer
        )
        self.actor_optimizer = self.make_optimizer("actor")
        self.critic_optimizer = self.make_optimizer("critic")
        self.variant = variant_of(config)(self, obs_dim)
        own = (*self.variant.metric_names, *self.variant.actor_metric_names)
        self.metric_names = SAC.metric_names + own
        initial_alpha = config.alpha if config.alpha is not None else config.initial_alpha
        self.temperature = TEMPERATURES[config.use_log_alpha](config, initial_alpha)
        self.target_entropy = target_entropy(config, action_dim)
        # The actor step's metrics, reported again on the steps that skip it (policy_delay).
        count = 3 + len(self.variant.actor_metric_names)
        self._last_actor_metrics = [tf.Variable(0.0, trainable=False) for _ in range(count)]
        self.update_rng = tf.random.Generator.from_seed(config.seed)
        # What the update divides rewards by (normalize_rewards); None without.
        self.reward_divisor = None
        if config.normalize_rewards:
            self.reward_divisor = tf.Variable(1.0, trainable=False, name="reward_divisor")
        # Optimizer slots exist before the first trace (and before any checkpoint).
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer.build(self.critic.trainable_variables)
        self.temperature.build()
        check_variant_optimizers(self)
        self.base_rates = base_rates(self)

    def make_optimizer(self, part: str) -> keras.optimizers.Optimizer:
        """Adam (AdamW with `weight_decay`) at the config's rate, beta_1 and clip for `part`
        (actor, critic, alpha, value)."""
        cfg = self.config
        kwargs = dict(beta_1=cfg.adam_beta1, global_clipnorm=cfg.max_grad_norm, name=f"{part}_adam")
        if cfg.weight_decay:
            return keras.optimizers.AdamW(cfg.rate(part), weight_decay=cfg.weight_decay, **kwargs)
        return keras.optimizers.Adam(cfg.rate(part), **kwargs)

    # --------------------------------------------------------------------- state
    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        """Every object a checkpoint holds, by name."""
        objects = {
            "actor": self.actor,
            "critic": self.critic,
            "target_critic": self.target_critic,  # None without target critics
            "actor_optimizer": self.actor_optimizer,
            "critic_optimizer": self.critic_optimizer,
            **self.temperature.checkpoint_objects(),
            **self.variant.checkpoint_objects(),
            "update_rng": self.update_rng,
            "obs_normalizer": self.obs_normalizer,  # also inside the networks
            "reward_divisor": self.reward_divisor,
        }
        return {name: obj for name, obj in objects.items() if obj is not None}

    def observe(self, observations) -> None:
        """Folds collected observations into the observation normaliser (where there is one)."""
        if self.obs_normalizer is not None:
            self.obs_normalizer.update(observations)

    def trainable_state(self) -> List[tf.Variable]:
        """Every variable an update writes."""
        models = (self.actor, self.critic, self.target_critic)
        return [
            *(v for model in models if model is not None for v in model.variables),
            *self.variant.trainable_variables(),
            self.temperature.variable,
        ]

    def optimizers(self) -> Dict[str, keras.optimizers.Optimizer]:
        """Each part's optimizer, by its learning-rate part."""
        return {
            "actor": self.actor_optimizer,
            "critic": self.critic_optimizer,
            **self.temperature.optimizers(),
            **self.variant.optimizers(),
        }

    # ------------------------------------------------------------------- policy
    def _policy(self, observation, training):
        bounds = (self.config.log_std_min, self.config.log_std_max)
        loc, log_std = policy_params(self.actor, observation, bounds, training)
        return tanh_normal(loc, tf.exp(log_std))

    def sample_with_log_prob(self, observation, seed, training=None):
        """a ~ pi(.|s) (reparameterised) and log pi(a|s), through the Tanh bijector."""
        return self._policy(observation, training).experimental_sample_and_log_prob(seed=seed)

    def log_prob(self, observation, action, training=None):
        """log pi(a|s) of actions in [-1, 1], moved inside first (atanh is infinite at +-1)."""
        edge = 1.0 - float(np.finfo(np.float32).epsneg)
        action = tf.clip_by_value(action, -edge, edge)
        return self._policy(observation, training).log_prob(action)

    def mean_action(self, observation, training=None):
        """tanh of the policy's mean: the deterministic action in [-1, 1]."""
        loc, _ = self.actor(observation, training=training)
        return deterministic_action(loc)

    # ------------------------------------------------------------------- update
    def update(self, batch: Batch) -> Dict[str, tf.Tensor]:
        """One SAC gradient step on `batch`; returns its metrics (scalar tensors)."""
        try:
            return self._step(batch)
        except ValueError as e:  # when traced: a slice of `seeds` past seeds_needed?
            if "out of bounds" not in str(e):
                raise
            raise seeds_error(self.variant, e) from None

    def _step(self, batch: Batch) -> Dict[str, tf.Tensor]:
        cfg = self.config
        obs = batch["observation"]
        alpha = self.temperature.alpha()
        seeds = tf.cast(self.update_rng.make_seeds(self.variant.seeds_needed), tf.int32)
        reward = cfg.reward_scale * batch["reward"]
        if self.reward_divisor is not None:
            reward = reward / self.reward_divisor

        # Critic step (Eq. 5), then the variant's own step (v1's V).
        variables = self.critic.trainable_variables
        with tf.GradientTape() as tape:
            critic_loss, q, extra = self.variant.critic_objective(batch, reward, alpha, seeds)
            critic_loss = checked_loss(self.variant, "critic_objective", critic_loss)
        apply_gradients(self.critic_optimizer, tape, critic_loss, variables)
        after = self.variant.after_critic_step(obs, alpha, seeds) or {}
        check_metric_dicts(self.variant, extra, after)
        methods = "critic_objective and after_critic_step"
        extra = checked_metrics(self.variant, methods, {**extra, **after}, "metric_names")

        critic_steps = self.critic_optimizer.iterations
        actor_loss, alpha_loss, entropy, *actor_extra = self._every(
            cfg.policy_delay,
            critic_steps,
            lambda: self._actor_and_temperature_step(batch, alpha, seeds),
            lambda: tuple(tf.identity(v) for v in self._last_actor_metrics),
        )
        if self.variant.polyak_pairs():
            self._every(cfg.target_update_interval, critic_steps, self._polyak_step)
        return {
            "critic_loss": critic_loss,
            "actor_loss": actor_loss,
            "alpha": alpha,
            "alpha_loss": alpha_loss,
            "entropy": entropy,
            "q_mean": tf.reduce_mean(q),
            **extra,
            **dict(zip(self.variant.actor_metric_names, actor_extra, strict=True)),
        }

    @staticmethod
    def _every(interval: int, count, step, skip=lambda: tf.constant(False)):
        """`step()` when `count` is a multiple of `interval`, else `skip()`."""
        if interval == 1:
            return step()
        return tf.cond(count % interval == 0, step, skip)

    def _actor_and_temperature_step(self, batch, alpha, seeds):
        """The actor step (Eqs. 7, 11), then the temperature's (Eq. 18) on the same actions."""
        obs = batch["observation"]
        variables = self.actor.trainable_variables
        with tf.GradientTape() as tape:
            action, log_prob = self.sample_with_log_prob(obs, seeds[:, 1], training=True)
            actor_loss, extra = self.variant.actor_objective(batch, action, log_prob, alpha, seeds)
            actor_loss = checked_loss(self.variant, "actor_objective", actor_loss)
        extra = checked_metrics(self.variant, "actor_objective", extra, "actor_metric_names")
        apply_gradients(self.actor_optimizer, tape, actor_loss, variables)
        alpha_loss = self.temperature.step(log_prob, self.target_entropy)
        own = [extra[name] for name in self.variant.actor_metric_names]
        metrics = (actor_loss, alpha_loss, -tf.reduce_mean(log_prob), *own)
        if self.config.policy_delay > 1:
            for variable, value in zip(self._last_actor_metrics, metrics, strict=True):
                variable.assign(value)
        return metrics

    def hold_actor_metrics(self, metrics: Dict[str, float]) -> None:
        """Sets the actor metrics that steps skipping the actor report to a checkpoint's."""
        names = ("actor_loss", "alpha_loss", "entropy", *self.variant.actor_metric_names)
        for variable, name in zip(self._last_actor_metrics, names, strict=True):
            variable.assign(metrics.get(name, 0.0))

    def _polyak_step(self):
        """Polyak-averages the parameters into the targets and copies their other float
        state (batch-norm statistics, as SB3); shared and integer variables stay."""
        for target, online in self.variant.polyak_pairs():
            polyak_update(target.trainable_variables, online.trainable_variables, self.config.tau)
            pairs = zip(target.non_trainable_variables, online.non_trainable_variables, strict=True)
            for mine, theirs in pairs:
                if mine is not theirs and tf.as_dtype(mine.dtype).is_floating:
                    mine.assign(theirs)
        return tf.constant(True)


def target_entropy(config: SACConfig, action_dim: int) -> float:
    """`target_entropy`, or dim(A) / 2 log(2 pi e target_std^2) (FlashSAC), else -dim(A)."""
    if config.target_std:
        return 0.5 * action_dim * math.log(2.0 * math.pi * math.e * config.target_std**2)
    return float(-action_dim if config.target_entropy is None else config.target_entropy)
