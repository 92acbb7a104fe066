"""The SAC learner: networks, optimizers, log-alpha and one compiled update step."""

from __future__ import annotations

import math
from typing import Callable, Dict, Mapping, Optional

import keras
import numpy as np
import tensorflow as tf

from tfsac import losses
from tfsac.config import SACConfig
from tfsac.distributions import deterministic_action, tanh_normal
from tfsac.networks import build_networks, build_value_networks
from tfsac.replay import pack_batch, transition_layout

METRIC_NAMES = ("critic_loss", "actor_loss", "alpha", "alpha_loss", "entropy", "q_mean")
# What `SACLearner.graph_step` runs after an env step of a graph-driven loop.
NO_ACTION, RESET, ACT, RESET_AND_ACT, UPDATE_AND_ACT = range(5)


def polyak_update(target_variables, source_variables, tau: float):
    """target <- tau * source + (1 - tau) * target, variable by variable."""
    for target, source in zip(target_variables, source_variables, strict=True):
        target.assign(tau * source + (1.0 - tau) * target)


class SACLearner:
    """Holds the actor, the critics, their targets, the optimizers and log-alpha.

    `update(batches)` runs `gradient_steps` SAC updates in one compiled call over
    pre-sampled batches of shape [gradient_steps, batch, ...] and returns the last step's
    metrics as a dict of scalar tensors. Actions live in [-1, 1]^d here; the map onto
    the env's bounds happens at the env boundary and in the exported policy, so the
    entropy target does not depend on the action units.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: SACConfig,
        actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
        critic_fn: Optional[Callable[[int, int], keras.Model]] = None,
    ):
        """`actor_fn`/`critic_fn` build your own Keras models (see networks.build_networks
        for their contracts and docs/custom_networks.md for an example)."""
        self.config = config
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.actor, self.critic, self.target_critic = build_networks(
            obs_dim, action_dim, config, actor_fn, critic_fn
        )
        clip = config.max_grad_norm
        self.actor_optimizer = keras.optimizers.Adam(
            config.rate("actor"), global_clipnorm=clip, name="actor_adam"
        )
        self.critic_optimizer = keras.optimizers.Adam(
            config.rate("critic"), global_clipnorm=clip, name="critic_adam"
        )
        self.alpha_optimizer = keras.optimizers.Adam(config.rate("alpha"), name="alpha_adam")
        # SAC v1's state-value network and its target (None for the default variant).
        self.value = self.target_value = self.value_optimizer = None
        if config.variant == "v1":
            self.value, self.target_value = build_value_networks(obs_dim, config)
            self.value_optimizer = keras.optimizers.Adam(
                config.rate("value"), global_clipnorm=clip, name="value_adam"
            )
            self.value_optimizer.build(self.value.trainable_variables)
        self.metric_names = METRIC_NAMES + (("value_loss",) if self.value is not None else ())
        initial_alpha = config.alpha if config.alpha is not None else config.initial_alpha
        self.log_alpha = tf.Variable(
            math.log(initial_alpha),
            dtype=tf.float32,
            trainable=config.learned_alpha,
            name="log_alpha",
        )
        # prt_rl's use_log_entropy=False: Adam steps on alpha itself (kept >= 1e-8) instead
        # of on log-alpha.
        self.alpha_value = (
            None
            if config.use_log_alpha
            else tf.Variable(
                initial_alpha, dtype=tf.float32, trainable=config.learned_alpha, name="alpha"
            )
        )
        self.target_entropy = float(
            -action_dim if config.target_entropy is None else config.target_entropy
        )
        # Polyak-averaged pairs: the parameters only (dropout's RNG state is not averaged).
        averaged = (
            (self.critic, self.target_critic)
            if self.value is None
            else (self.value, self.target_value)
        )
        self._online_params = averaged[0].trainable_variables
        self._target_params = averaged[1].trainable_variables
        self._last_actor_metrics = [tf.Variable(0.0, trainable=False) for _ in range(3)]
        # Separate streams so that acting (and evaluation) never shifts update noise.
        self.update_rng = tf.random.Generator.from_seed(config.seed)
        self.act_rng = tf.random.Generator.from_seed(config.seed + 1)
        # gSDE's exploration matrices, one per env copy, resampled by reset_noise().
        self.exploration = None
        if config.use_sde:
            self.exploration = tf.Variable(
                tf.zeros([config.num_envs, *self.actor.log_std.shape]),
                trainable=False,
                name="exploration",
            )
        # Optimizer slots exist before the first trace (and before any checkpoint).
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer.build(self.critic.trainable_variables)
        self.alpha_optimizer.build([self._temperature])

        obs_spec = tf.TensorSpec([None, obs_dim], tf.float32)
        # One packed tensor per batch ([gradient_steps, batch, row], rows laid out as
        # replay.transition_layout), split inside the graph: each tensor handed to a
        # compiled call costs Python time, a sizeable part of a one-update call on 2 cores.
        # Concrete functions are called directly, skipping tf.function's structure matching.
        self._layout = transition_layout(obs_dim, action_dim)
        width = sum(w for _, w in self._layout)
        batch_specs = [tf.TensorSpec([None, None, width], tf.float32)]
        jit = config.jit_compile
        self._update = tf.function(self._update_fn, input_signature=batch_specs, jit_compile=jit)
        self._update_act = tf.function(
            self._update_act_fn, input_signature=[*batch_specs, obs_spec], jit_compile=jit
        )
        self._act_sample = tf.function(self._sample_fn, input_signature=[obs_spec], jit_compile=jit)
        self._act_mode = tf.function(self._mode_fn, input_signature=[obs_spec], jit_compile=jit)
        self._reset_noise = tf.function(self._reset_noise_fn, input_signature=[])
        self._concrete = {}  # traced lazily: a learner that never updates never compiles
        if config.use_sde:
            self.reset_noise()

    def _call(self, fn, *arrays):
        concrete = self._concrete.get(fn)
        if concrete is None:
            concrete = self._concrete[fn] = fn.get_concrete_function()
        return concrete(*[tf.convert_to_tensor(a, tf.float32) for a in arrays])

    def _optimizers(self):
        parts = (
            ("actor", self.actor_optimizer),
            ("critic", self.critic_optimizer),
            ("alpha", self.alpha_optimizer),
            ("value", self.value_optimizer),
        )
        return [(part, optimizer) for part, optimizer in parts if optimizer is not None]

    def learning_rates(self, factor: float) -> np.ndarray:
        """Every optimizer's configured rate times `factor` (float32, as the optimizers
        hold them), in the order `graph_step` takes them."""
        return np.array([self.config.rate(p) * factor for p, _ in self._optimizers()], np.float32)

    def set_learning_rate_factor(self, factor: float) -> None:
        """Sets every optimizer's rate to its configured rate times `factor` (the values of
        `learning_rates`, which the graph loop assigns itself)."""
        rates = self.learning_rates(factor)
        for (_, optimizer), rate in zip(self._optimizers(), rates, strict=True):
            optimizer.learning_rate = float(rate)

    # ------------------------------------------------------------------ acting
    def _policy_params(self, observation):
        """The actor's (mean, log_std), log_std clipped to the config's bounds."""
        loc, log_std = self.actor(observation)
        cfg = self.config
        return loc, tf.clip_by_value(log_std, cfg.log_std_min, cfg.log_std_max)

    def _sample_fn(self, observation):
        if self.exploration is not None:
            # gSDE: tanh(mean(s) + z(s) @ E), with row i of the batch using env i's E.
            loc, features = self.actor.mean_and_features(observation)
            rows = tf.range(tf.shape(observation)[0]) % self.config.num_envs
            noise = tf.einsum("bf,bfa->ba", features, tf.gather(self.exploration, rows))
            return tf.tanh(loc + noise)
        loc, log_std = self._policy_params(observation)
        seed = tf.cast(self.act_rng.make_seeds(1)[:, 0], tf.int32)
        return tanh_normal(loc, tf.exp(log_std)).sample(seed=seed)

    def _reset_noise_fn(self):
        sigma = tf.exp(self.actor.log_std)
        self.exploration.assign(sigma * self.act_rng.normal(self.exploration.shape))
        return tf.constant(True)

    def reset_noise(self) -> None:
        """Draws new gSDE exploration matrices E ~ N(0, exp(log_std)^2) (use_sde only)."""
        if self.exploration is not None:
            self._call(self._reset_noise)

    def _mode_fn(self, observation):
        loc, _ = self.actor(observation)
        return deterministic_action(loc)

    def act(self, observation: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions in [-1, 1]^d for a batch of flat observations [B, obs_dim]."""
        return self._call(
            self._act_mode if deterministic else self._act_sample, observation
        ).numpy()

    # ---------------------------------------------------------------- learning
    @property
    def _temperature(self):
        """The variable the alpha loss optimises: log-alpha, or alpha itself."""
        return self.log_alpha if self.alpha_value is None else self.alpha_value

    @property
    def alpha(self):
        return tf.exp(self.log_alpha) if self.alpha_value is None else self.alpha_value + 0.0

    def _gradient_step(self, batch: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
        cfg = self.config
        obs, action = batch["observation"], batch["action"]
        alpha = self.alpha
        seeds = tf.cast(self.update_rng.make_seeds(2 if self.value is None else 3), tf.int32)
        reward = cfg.reward_scale * batch["reward"]

        if self.value is None:
            # Critic (Eq. 5) against the clipped double-Q soft target (Eqs. 2-3).
            next_loc, next_log_std = self._policy_params(batch["next_observation"])
            next_action, next_log_prob = tanh_normal(
                next_loc, tf.exp(next_log_std)
            ).experimental_sample_and_log_prob(seed=seeds[:, 0])
            next_q = self.target_critic(batch["next_observation"], next_action, training=True)
            target = losses.soft_td_target(
                reward, batch["terminated"], next_q, next_log_prob, alpha, cfg.gamma
            )
        else:
            # SAC v1: the target comes from the target V network (arXiv:1801.01290, Eq. 8).
            next_v = self.target_value(batch["next_observation"])
            target = losses.v1_q_target(reward, batch["terminated"], next_v, cfg.gamma)
        critic_vars = self.critic.trainable_variables
        with tf.GradientTape() as tape:
            q = self.critic(obs, action, training=True)
            c_loss = losses.critic_loss(q, target)
        self.critic_optimizer.apply_gradients(
            zip(tape.gradient(c_loss, critic_vars), critic_vars, strict=True)
        )
        extra = (
            {} if self.value is None else {"value_loss": self._value_step(obs, alpha, seeds[:, 2])}
        )

        # Actor and temperature every `policy_delay` critic updates (the critic optimizer's
        # counter was just incremented), targets every `target_update_interval`. With both
        # at 1 no conditional enters the graph.
        updates = self.critic_optimizer.iterations
        if cfg.policy_delay == 1:
            a_loss, t_loss, entropy = self._actor_alpha_step(obs, alpha, seeds[:, 1])
        else:
            a_loss, t_loss, entropy = tf.cond(
                updates % cfg.policy_delay == 0,
                lambda: self._actor_alpha_step(obs, alpha, seeds[:, 1]),
                lambda: tuple(tf.identity(v) for v in self._last_actor_metrics),
            )
        if cfg.target_update_interval == 1:
            polyak_update(self._target_params, self._online_params, cfg.tau)
        else:

            def update_targets():
                polyak_update(self._target_params, self._online_params, cfg.tau)
                return tf.constant(True)

            tf.cond(
                updates % cfg.target_update_interval == 0,
                update_targets,
                lambda: tf.constant(False),
            )
        return {
            "critic_loss": c_loss,
            "actor_loss": a_loss,
            "alpha": alpha,
            "alpha_loss": t_loss,
            "entropy": entropy,
            "q_mean": tf.reduce_mean(q),
            **extra,
        }

    def _value_step(self, obs, alpha, seed):
        """SAC v1's V network (arXiv:1801.01290, Eq. 5) against the critics just updated."""
        loc, log_std = self._policy_params(obs)
        action, log_prob = tanh_normal(loc, tf.exp(log_std)).experimental_sample_and_log_prob(
            seed=seed
        )
        q_pi = self.critic(obs, action, training=True)
        value_vars = self.value.trainable_variables
        with tf.GradientTape() as tape:
            v_loss = losses.value_loss(self.value(obs), q_pi, log_prob, alpha)
        self.value_optimizer.apply_gradients(
            zip(tape.gradient(v_loss, value_vars), value_vars, strict=True)
        )
        return v_loss

    def trainable_state(self):
        """Every variable an update writes (parameters, targets, log-alpha)."""
        models = (self.actor, self.critic, self.target_critic, self.value, self.target_value)
        return [
            *(v for m in models if m is not None for v in m.trainable_variables),
            self._temperature,
        ]

    def _actor_alpha_step(self, obs, alpha, seed):
        """Actor (Eq. 7) against the critics just updated, then the temperature (Eq. 18).
        Returns the actor loss, the alpha loss and the policy entropy estimate."""
        actor_vars = self.actor.trainable_variables
        with tf.GradientTape() as tape:
            loc, log_std = self._policy_params(obs)
            pi_action, log_prob = tanh_normal(
                loc, tf.exp(log_std)
            ).experimental_sample_and_log_prob(seed=seed)
            q_pi = self.critic(obs, pi_action, training=True)
            a_loss = losses.actor_loss(log_prob, q_pi, alpha)
        self.actor_optimizer.apply_gradients(
            zip(tape.gradient(a_loss, actor_vars), actor_vars, strict=True)
        )
        temperature = self._temperature
        loss_fn = losses.alpha_loss if self.alpha_value is None else losses.alpha_loss_direct
        with tf.GradientTape() as tape:
            t_loss = loss_fn(temperature, log_prob, self.target_entropy)
        if self.config.learned_alpha:
            grad = tape.gradient(t_loss, temperature)
            self.alpha_optimizer.apply_gradients([(grad, temperature)])
            if self.alpha_value is not None:
                self.alpha_value.assign(tf.maximum(self.alpha_value, 1e-8))
        metrics = (a_loss, t_loss, -tf.reduce_mean(log_prob))
        if self.config.policy_delay > 1:  # reported on the steps that skip the actor
            for variable, value in zip(self._last_actor_metrics, metrics, strict=True):
                variable.assign(value)
        return metrics

    def _update_fn(self, packed):
        names, widths = zip(*self._layout, strict=True)
        columns = tf.split(packed, widths, axis=-1)
        batches = {
            name: tf.squeeze(c, -1) if name in ("reward", "terminated") else c
            for name, c in zip(names, columns, strict=True)
        }
        metrics = {name: tf.zeros([]) for name in self.metric_names}
        for i in tf.range(tf.shape(batches["reward"])[0]):
            metrics = self._gradient_step({k: v[i] for k, v in batches.items()})
        # One flag, checked by the loop after every call: a NaN/Inf in any loss or any
        # parameter stops training before such a state can be checkpointed.
        finite = tf.reduce_all(
            [
                tf.reduce_all(tf.math.is_finite(x))
                for x in [*metrics.values(), *self.trainable_state()]
            ]
        )
        return tf.stack([metrics[k] for k in self.metric_names]), finite

    def _update_act_fn(self, packed, observation):
        values, finite = self._update_fn(packed)
        if self.exploration is not None:
            # The loop updates between collection phases, and each phase starts with new
            # gSDE noise (drawn from the updated log-std).
            with tf.control_dependencies([values]):
                self._reset_noise_fn()
        return values, finite, self._sample_fn(observation)

    def metrics_dict(self, values, finite) -> Dict[str, float]:
        """The compiled update's outputs (a metric vector and the finite flag) as floats."""
        return {
            **dict(zip(self.metric_names, values.numpy().tolist(), strict=True)),
            "finite": bool(finite),
        }

    @staticmethod
    def _packed(batches) -> np.ndarray:
        return batches if isinstance(batches, np.ndarray) else pack_batch(batches)

    def update(self, batches) -> Dict[str, float]:
        """Runs one SAC update per leading index of `batches` in one compiled call; returns
        the last step's metrics as floats, plus `finite` (True when every loss and every
        parameter is finite). `batches` is a dict of [gradient_steps, batch, ...] arrays
        (as `ReplayBuffer.sample` returns) or, fastest, packed rows
        [gradient_steps, batch, width] (`ReplayBuffer.sample_packed`)."""
        return self.metrics_dict(*self._call(self._update, self._packed(batches)))

    def update_and_act(self, batches, observation: np.ndarray):
        """`update(batches)`, then `act(observation)` with the updated actor, in one
        compiled call: the same result as the two calls, with one dispatch per env step."""
        values, finite, action = self._call(self._update_act, self._packed(batches), observation)
        return self.metrics_dict(values, finite), action.numpy()

    def graph_step(self, mode, packed, observation, rates, values, action):
        """Inside a graph that drives the env loop (`Trainer` with `config.graph_loop`): the
        compiled calls `mode` asks for, as the eager methods run them. NO_ACTION passes
        `values` and `action` through; RESET draws new gSDE noise (`reset_noise`); ACT
        samples actions for `observation`; RESET_AND_ACT does both; UPDATE_AND_ACT sets the
        optimizers' `rates` (`learning_rates`) and runs `update_and_act(packed,
        observation)`. Returns (metric values, finite, action)."""
        ok = tf.constant(True)
        sample = self._act_sample

        def reset(then_act):
            if self.exploration is None:  # never asked for: gSDE only
                return values, ok, action
            self._reset_noise()  # ordered before the sample: both touch `exploration`
            return values, ok, sample(observation) if then_act else action

        def update_and_act():
            for (_, optimizer), rate in zip(self._optimizers(), tf.unstack(rates), strict=True):
                optimizer.learning_rate.assign(rate)
            return self._update_act(packed, observation)

        branches = [
            lambda: (values, ok, action),
            lambda: reset(then_act=False),
            lambda: (values, ok, sample(observation)),
            lambda: reset(then_act=True),
            update_and_act,
        ]
        values, finite, new_action = tf.switch_case(mode, branches)
        return values, finite, tf.ensure_shape(new_action, action.shape)

    def nonfinite_quantities(self, metrics: Mapping[str, float]) -> list:
        """Names of the metrics and variables that hold a NaN or Inf."""
        names = [k for k, v in metrics.items() if k != "finite" and not np.isfinite(float(v))]
        names += [
            getattr(v, "path", v.name)
            for v in self.trainable_state()
            if not np.all(np.isfinite(v.numpy()))
        ]
        return names
