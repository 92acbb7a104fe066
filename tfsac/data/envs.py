"""Making gymnasium environments as SAC takes them (their checks: tfsac.data.env_checks)."""

from __future__ import annotations

import functools
import os
import re
import time
import warnings
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.data.env_checks import check_makeable, check_spaces, factory_env, made
from tfsac.data.spaces import EnvSpec, goal_columns, space_to_json
from tfsac.logs import mujoco_warnings_logged
from tfsac.user_modules import find_in_current_directory, split

# MuJoCo picks its GL backend at import; without a display GLFW has no context: EGL then.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl")


def needs_flattening(space: gym.Space) -> bool:
    """Whether observations must go through gymnasium.spaces.flatten for the networks."""
    return not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1)


def unit_to_bounds(unit_action, low, high):
    """Maps actions in [-1, 1] onto [low, high] (numpy), clipped against rounding."""
    low = np.asarray(low, np.float32)
    high = np.asarray(high, np.float32)
    action = low + (np.asarray(unit_action, np.float32) + 1.0) * 0.5 * (high - low)
    return np.minimum(np.maximum(action, low), high)  # np.clip's dispatch costs more than this


def make_env(env_id: str, render_mode=None, env_kwargs: Optional[dict] = None) -> gym.Env:
    """`gymnasium.make(env_id, **env_kwargs)`, observations flattened to a float vector;
    `env_id` may name the module that registers it ("my_package.envs:MyEnv-v0")."""
    kwargs = dict(env_kwargs or {})
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    check_makeable(env_id, kwargs.get("render_mode"))
    module = split(env_id)[0]
    if module is not None:  # gymnasium imports it; where to look is tfsac's rule
        find_in_current_directory(module)
    mujoco_warnings_logged()
    with warnings.catch_warnings(record=True) as caught:
        env = made(env_id, module, lambda: gym.make(env_id, **kwargs))
    for warning in caught:
        _say_once(str(warning.message))
    return _checked(env, env_id)


_SAID = set()
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def _say_once(message: str) -> None:
    """A warning of making an env as one plain line, once per process."""
    text = _TERMINAL_COLOURS.sub("", message).removeprefix("WARN: ").strip()
    if text not in _SAID:
        _SAID.add(text)
        logging.warning("%s", text)


def _checked(env: gym.Env, name: str) -> gym.Env:
    check_spaces(env, name)
    return Flattened(env) if needs_flattening(env.observation_space) else env


class Flattened(gym.wrappers.FlattenObservation):
    """tfsac's own flattening, told apart from a user's."""


def unflattened(env: gym.Env) -> gym.Env:
    """`env` inside any flattening (tfsac's or the user's give the same vector)."""
    env = env.env if isinstance(env, Flattened) else env
    return env.env if isinstance(env, gym.wrappers.FlattenObservation) else env


EnvFn = Callable[[], gym.Env]


def factory_name(env_fn: EnvFn) -> str:
    """`module.qualname` of an env factory (of a functools.partial's function)."""
    fn = env_fn.func if isinstance(env_fn, functools.partial) else env_fn
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else name


def env_factory(env_id: str, env_kwargs: Optional[dict] = None) -> EnvFn:
    """A picklable factory of `make_env(env_id, env_kwargs=env_kwargs)`."""
    return functools.partial(make_env, env_id, env_kwargs=dict(env_kwargs or {}))


class StepDelay(gym.Wrapper):
    """Sleeps `seconds` in every step: a stand-in for a slow simulator in benchmarks."""

    def __init__(self, env: gym.Env, seconds: float):
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def _delayed_env(env_fn: EnvFn, seconds: float) -> gym.Env:
    return StepDelay(env_fn(), seconds)


def delayed_env_factory(env_fn: EnvFn, seconds: float) -> EnvFn:
    """A picklable factory of `env_fn`'s env slowed by `seconds` per step (StepDelay)."""
    return functools.partial(_delayed_env, env_fn, seconds)


def checked_env(env_fn: EnvFn, name: str = "the env factory's env") -> gym.Env:
    """`env_fn()`, checked as `make_env` checks an id's env and flattened where needed."""
    return _checked(factory_env(env_fn, name), name)


class LeanSyncVectorEnv(gym.vector.SyncVectorEnv):
    """SyncVectorEnv keeping only the `final_obs` info (merging infos cost more than physics)."""

    def step(self, actions):
        final_obs = None
        for i, env in enumerate(self.envs):
            obs, self._rewards[i], terminated, truncated, _ = env.step(actions[i])
            self._terminations[i], self._truncations[i] = terminated, truncated
            if terminated or truncated:
                if final_obs is None:
                    final_obs = np.full(self.num_envs, None, dtype=object)
                final_obs[i] = obs
                obs, _ = env.reset()
            self._env_obs[i] = obs
        info = {} if final_obs is None else {"final_obs": final_obs}
        flags = self._terminations.copy(), self._truncations.copy()
        return np.stack(self._env_obs), self._rewards.copy(), *flags, info


def make_vector_env(env_fn: EnvFn, num_envs: int, mode: str = "sync") -> gym.vector.VectorEnv:
    """`num_envs` copies of `checked_env(env_fn)` stepped together ("async": a subprocess
    each, and `env_fn` must pickle), the true final observation in `info["final_obs"]`."""
    vector_env = {"sync": LeanSyncVectorEnv, "async": gym.vector.AsyncVectorEnv}[mode]
    return vector_env(
        [functools.partial(checked_env, env_fn)] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def env_spec(env_id: str, env: gym.Env) -> EnvSpec:
    space = env.action_space
    flattened = isinstance(env, Flattened)
    # As the env with its wrappers gives them: an observation wrapper changes `unwrapped`'s.
    raw = (env.env if flattened else env).observation_space
    return EnvSpec(
        env_id=env_id,
        obs_dim=int(gym.spaces.flatdim(env.observation_space)),
        action_dim=int(space.shape[0]),
        action_low=tuple(float(x) for x in space.low),
        action_high=tuple(float(x) for x in space.high),
        observation_space=str(raw),
        action_space=str(space),
        observation_space_json=space_to_json(raw),
        observation_flattening=(
            "gymnasium.spaces.flatten: Box flattened in C order, Discrete and MultiDiscrete "
            "one-hot, MultiBinary as is, Dict in sorted key order, Tuple in order"
            if flattened
            else "none: the observation is already a flat Box"
        ),
        # A goal env's Dict, where it is flattened (by tfsac, or by the user).
        goal_columns=goal_columns(unflattened(env).observation_space),
    )


def remade_env_spec(env_id: str, env_kwargs: Optional[dict] = None) -> EnvSpec:
    """The spec of the env `env_id` names, made for it and closed."""
    env = make_env(env_id, env_kwargs=env_kwargs)
    try:
        return env_spec(env_id, env)
    finally:
        env.close()
