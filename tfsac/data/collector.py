"""Env interaction: N env copies stepped with any policy's actions (no learner: runs anywhere)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any, Dict, List, Optional

import cloudpickle  # gymnasium's own dependency (it pickles env factories with it)
import gymnasium as gym
import numpy as np
from absl import logging
from gymnasium.utils import EzPickle

from tfsac.data.envs import EnvFn, make_vector_env, unit_to_bounds
from tfsac.data.spaces import EnvSpec


@dataclasses.dataclass
class Transitions:
    """One env step of every copy, actions in [-1, 1]^d (the learner's units)."""

    observation: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    next_observation: np.ndarray
    terminated: np.ndarray
    # (return, length) of each episode that ended in this step.
    finished_episodes: List[tuple]
    # Each copy's discounted return so far: what reward normalisation takes the spread of.
    discounted_return: Optional[np.ndarray] = None
    # Whether each row ended its episode (terminated or truncated); None: not known.
    ended: Optional[np.ndarray] = None

    def first_nonfinite(self) -> Optional[str]:
        """'reward (<value>)' or 'observation' for a NaN or Inf the env returned, else None."""
        bad = ~np.isfinite(self.reward)
        if bad.any():
            return f"reward ({self.reward[bad][0]})"
        if not np.all(np.isfinite(self.next_observation)):
            return "observation"
        return None

    def as_tuple(self):  # ReplayBuffer.add's arguments
        return self.observation, self.action, self.reward, self.next_observation, self.terminated


class Collector:
    """Steps `num_envs` copies of `env_fn`'s env with actions in [-1, 1]^d (None: seeded
    uniform warm-up ones), keeping an episode's true final observation for a truncation."""

    def __init__(
        self, env_fn: EnvFn, spec: EnvSpec, num_envs: int, mode: str, seed: int, gamma: float = 0.99
    ):
        self.env = make_vector_env(env_fn, num_envs, mode)
        self.spec = spec
        self.num_envs = num_envs
        self.gamma = gamma
        self.warmup_rng = np.random.default_rng(seed)
        self._low = np.asarray(spec.action_low, np.float32)
        self._high = np.asarray(spec.action_high, np.float32)
        self.observation: Optional[np.ndarray] = None
        self._returns = np.zeros(num_envs)
        self._discounted = np.zeros(num_envs)
        self._lengths = np.zeros(num_envs, np.int64)
        self._saved: tuple = ({}, None)  # a checkpoint's state and snapshot, for start()

    def reset(self, seed: int) -> np.ndarray:
        """Starts new episodes in every copy (copy i seeded with seed + i)."""
        obs, _ = self.env.reset(seed=seed)
        self.observation = np.asarray(obs, np.float32)
        self._returns[:] = 0.0
        self._discounted[:] = 0.0
        self._lengths[:] = 0
        return self.observation

    def step(self, unit_action: Optional[np.ndarray]) -> Transitions:
        if unit_action is None:
            shape = (self.num_envs, self.spec.action_dim)
            unit_action = self.warmup_rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        action = unit_to_bounds(unit_action, self._low, self._high)
        new_obs, reward, terminated, truncated, info = self.env.step(action)
        new_obs = np.asarray(new_obs, np.float32)
        self._returns += reward
        self._discounted = self.gamma * self._discounted + reward
        discounted = self._discounted.copy()
        self._lengths += 1
        next_obs, finished = new_obs, []
        done = np.logical_or(terminated, truncated)
        if done.any():
            next_obs = new_obs.copy()
            for i in np.flatnonzero(done):
                next_obs[i] = info["final_obs"][i]
                finished.append((float(self._returns[i]), int(self._lengths[i])))
                self._returns[i], self._discounted[i], self._lengths[i] = 0.0, 0.0, 0
        transitions = Transitions(
            self.observation, unit_action, reward, next_obs, terminated, finished, discounted, done
        )
        self.observation = new_obs
        return transitions

    def state(self) -> Dict[str, Any]:
        return {
            "action_rng": self.warmup_rng.bit_generator.state,
            "episode_returns": self._returns.tolist(),
            "episode_discounted_returns": self._discounted.tolist(),
            "episode_lengths": self._lengths.tolist(),
        }

    def load_state(self, state: Dict[str, Any], snapshot: Optional[bytes] = None) -> None:
        """Takes a checkpoint's `state()` and `snapshot()`, for `start`."""
        self.warmup_rng.bit_generator.state = state["action_rng"]
        self._saved = (state, snapshot)

    def snapshot(self) -> Optional[bytes]:
        """The env copies mid-episode and the observation, pickled for a resume (or None)."""
        if not isinstance(self.env, gym.vector.SyncVectorEnv) or self.observation is None:
            return None
        # EzPickle envs (MuJoCo, Box2D) pickle their arguments only: new envs, unpickled.
        if any(isinstance(env.unwrapped, EzPickle) for env in self.env.envs):
            return None
        try:
            return cloudpickle.dumps((self.env.envs, self.observation))
        except Exception:  # noqa: BLE001 - an env may hold anything: then new episodes
            return None

    def start(self, seed: int) -> bool:
        """Continues the snapshot's episodes, else starts new ones (seeded `seed`); True if so."""
        state, snapshot = self._saved
        self._saved = ({}, None)
        if snapshot is not None and "episode_returns" in state:
            try:
                # Unpickling runs code: a run directory is trusted as code is (README).
                envs, observation = pickle.loads(snapshot)
            except Exception as e:  # noqa: BLE001 - made by another gymnasium or simulator
                logging.warning("the checkpoint's env state does not load here (%r)", e)
                envs = None
            if envs is not None and len(envs) == self.num_envs:
                for env in self.env.envs:
                    env.close()
                self.env.envs = envs
                self.observation = observation
                self._returns[:] = state["episode_returns"]
                # Older checkpoints lack it: new sums then.
                self._discounted[:] = state.get("episode_discounted_returns", 0.0)
                self._lengths[:] = state["episode_lengths"]
                return True
        self.reset(seed=seed)
        return False

    def close(self) -> None:
        self.env.close()
