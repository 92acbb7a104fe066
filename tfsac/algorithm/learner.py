"""The compiled learner: K of `SAC`'s gradient steps per XLA call on packed batches, and
acting (from its own random stream, so evaluation never shifts the update's noise)."""

from __future__ import annotations

from functools import partial
from typing import Callable, Dict, Mapping, Optional

import keras
import numpy as np
import tensorflow as tf

from tfsac.algorithm.exploration import GaussianExploration, GSDEExploration
from tfsac.algorithm.network_checks import checked_observations, packed_batches
from tfsac.algorithm.sac import SAC
from tfsac.config import SACConfig
from tfsac.data.replay import SCALAR_FIELDS, packed_width, transition_layout


class SACLearner:
    """Compiled `SAC.update`s (`update`) and actions in [-1, 1]^d (`act`) on `sac`'s state."""

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        config: SACConfig,
        actor_fn: Optional[Callable[[int, int], keras.Model]] = None,
        critic_fn: Optional[Callable[[int, int], keras.Model]] = None,
    ):
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.sac = SAC(obs_dim, action_dim, config, actor_fn, critic_fn)
        self.config = config = self.sac.config  # resolved: the variant's defaults filled in
        self.metric_names = self.sac.metric_names
        self.act_rng = tf.random.Generator.from_seed(config.seed + 1)
        if config.use_sde:
            self.exploration = GSDEExploration(self.sac, self.act_rng, config.num_envs)
            self._reset_noise = tf.function(self.exploration.reset, input_signature=[])
        else:
            shape = (config.num_envs, action_dim)
            self.exploration = GaussianExploration(self.sac.actor, config, self.act_rng, shape)
        self._layout = transition_layout(obs_dim, action_dim)
        self._row_width = packed_width(obs_dim, action_dim)
        batches = tf.TensorSpec([None, None, self._row_width], tf.float32)  # [steps, batch, row]
        obs = tf.TensorSpec([None, obs_dim], tf.float32)
        # With an observation normaliser, update calls also take new observations' moments.
        self._normalizer = self.sac.obs_normalizer
        moments = [tf.TensorSpec([3, obs_dim], tf.float64)] if self._normalizer else []
        jit = partial(tf.function, jit_compile=config.jit_compile)
        self._update = jit(self._update_fn, input_signature=[batches, *moments])
        self._update_act = jit(self._update_act_fn, input_signature=[batches, obs, *moments])
        self._sample = jit(self.exploration.sample, input_signature=[obs])
        self._mode = jit(self.sac.mean_action, input_signature=[obs])
        # Concrete functions, called directly (tf.function's argument matching is slow).
        self._concrete = {}
        if config.use_sde:
            self.reset_noise()

    actor = property(lambda self: self.sac.actor)
    critic = property(lambda self: self.sac.critic)
    target_critic = property(lambda self: self.sac.target_critic)
    update_rng = property(lambda self: self.sac.update_rng)
    alpha = property(lambda self: self.sac.temperature.alpha())

    def checkpoint_objects(self) -> Dict[str, tf.Module]:
        """The SAC state plus acting's random stream and exploration noise."""
        objects = dict(self.sac.checkpoint_objects(), act_rng=self.act_rng)
        if isinstance(self.exploration, GSDEExploration):
            objects["exploration"] = self.exploration.noise
        elif self.exploration.repeat is not None:  # exploration_zeta's noise under way
            objects["exploration"] = self.exploration.repeat
        return objects

    def learned_objects(self, temperature: bool = True) -> Dict[str, tf.Module]:
        """The checkpoint objects that `init_from` carries into a new run: no optimizers,
        random streams, reward statistics or noise (a learned temperature with `temperature`)."""
        course = ("reward_divisor", "exploration")
        optimizers = {id(o) for o in self.sac.optimizers().values()}  # a variant's too
        learned = {
            name: obj
            for name, obj in self.checkpoint_objects().items()
            if name not in course
            and id(obj) not in optimizers
            and not isinstance(obj, keras.optimizers.Optimizer)  # a variant's undeclared one
            and not isinstance(obj, tf.random.Generator)  # update_rng, act_rng, a variant's
        }
        if not (temperature and self.sac.temperature.learned):  # a fixed alpha: a setting
            for name in self.sac.temperature.checkpoint_objects():
                learned.pop(name, None)
        return learned

    @property
    def update_count(self) -> int:
        """Gradient steps taken, over every session of a resumed run."""
        return int(self.sac.critic_optimizer.iterations.numpy())

    def observe(self, observations: np.ndarray) -> None:
        """Folds collected observations into the observation normaliser (where there is one)."""
        self.sac.observe(observations)

    def set_reward_divisor(self, divisor: float) -> None:
        """What the update divides rewards by (normalize_rewards only)."""
        self.sac.reward_divisor.assign(np.float32(divisor))

    def trace_counts(self) -> Dict[str, int]:
        """How often the update and the sampling policy were traced (XLA compilations)."""
        return {
            "update": self._update.experimental_get_tracing_count(),
            "act": self._sample.experimental_get_tracing_count(),
        }

    def trace_update(self, acting: bool) -> None:
        """Traces the update (`acting`: the one that also acts) now, refusing a broken one early."""
        self._traced(self._update_act if acting else self._update)

    def _traced(self, fn):
        """`fn`'s concrete function and its arguments' dtypes."""
        if fn not in self._concrete:
            dtypes = [spec.dtype for spec in fn.input_signature]
            self._concrete[fn] = fn.get_concrete_function(), dtypes
        return self._concrete[fn]

    def _run(self, fn, *arrays):
        concrete, dtypes = self._traced(fn)
        return concrete(*[tf.convert_to_tensor(a, d) for a, d in zip(arrays, dtypes, strict=True)])

    def set_learning_rate_factor(self, factor: float) -> None:
        """Sets every optimizer's rate to its base rate times `factor`."""
        optimizers = self.sac.optimizers()
        for part, rate in self.sac.base_rates.items():
            optimizers[part].learning_rate = float(np.float32(rate * factor))

    # -------------------------------------------------------------------- acting
    def act(self, observation: np.ndarray, deterministic: bool = False) -> np.ndarray:
        """Actions in [-1, 1]^d for a batch of flat observations [B, obs_dim]."""
        observation = checked_observations(observation, self.obs_dim)
        if not len(observation):  # no rows: no actions (the traced sampler needs one)
            return np.zeros((0, self.action_dim), np.float32)
        return self._run(self._mode if deterministic else self._sample, observation).numpy()

    def reset_noise(self) -> None:
        """Draws new gSDE exploration matrices (a no-op without gSDE)."""
        if isinstance(self.exploration, GSDEExploration):
            self._run(self._reset_noise)

    # ------------------------------------------------------------------ updating
    # `moments` is empty without a normaliser (an unused parameter would slow every call).
    def _update_fn(self, packed, *moments):
        if moments:
            self._normalizer.merge(moments[0])
        names, widths = zip(*self._layout, strict=True)
        columns = tf.split(packed, widths, axis=-1)
        batches = {
            name: tf.squeeze(c, -1) if name in SCALAR_FIELDS else c
            for name, c in zip(names, columns, strict=True)
        }
        metrics = {name: tf.zeros([]) for name in self.metric_names}
        for i in tf.range(tf.shape(batches["reward"])[0]):
            metrics = self.sac.update({k: v[i] for k, v in batches.items()})
        # The critics are left out (costly): a non-finite critic makes the next loss so.
        checked = [*metrics.values(), *self.sac.actor.variables]
        finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(x)) for x in checked])
        return tf.stack([metrics[k] for k in self.metric_names]), finite

    def _update_act_fn(self, packed, observation, *moments):
        values, finite = self._update_fn(packed, *moments)
        if isinstance(self.exploration, GSDEExploration):
            with tf.control_dependencies([values]):
                self.exploration.reset()
        return values, finite, self.exploration.sample(observation)

    def _metrics(self, values, finite) -> Dict[str, float]:
        metrics = dict(zip(self.metric_names, values.numpy().tolist(), strict=True))
        return {**metrics, "finite": bool(finite)}

    def _moments(self, observed) -> list:
        if self._normalizer is None:
            return []
        return [self._normalizer.moments([] if observed is None else observed, self.obs_dim)]

    def update(self, batches, observed: Optional[np.ndarray] = None) -> Dict[str, float]:
        """One SAC step per leading index of `batches` (fields or packed rows) after observing
        `observed`; the last step's metrics and `finite` (losses and actor finite)."""
        packed = packed_batches(batches, self.config.gamma, self._row_width)
        return self._metrics(*self._run(self._update, packed, *self._moments(observed)))

    def update_and_act(self, batches, observation: np.ndarray, observed=None):
        """`update(batches, observed)`, then `act(observation)`, in one compiled call."""
        packed = packed_batches(batches, self.config.gamma, self._row_width)
        moments = self._moments(observed)
        observation = checked_observations(observation, self.obs_dim)
        values, finite, action = self._run(self._update_act, packed, observation, *moments)
        return self._metrics(values, finite), action.numpy()

    def nonfinite_quantities(self, metrics: Optional[Mapping[str, float]] = None) -> list:
        """Names of the metrics and variables that hold a NaN or Inf."""
        metrics = metrics or {}
        names = [k for k, v in metrics.items() if k != "finite" and not np.isfinite(float(v))]
        variables = {id(v): v for v in [*self.sac.trainable_state(), *self.actor.variables]}
        bad = [v for v in variables.values() if not np.all(np.isfinite(v.numpy()))]
        names += [getattr(v, "path", v.name) for v in bad]
        return names
