"""Making gymnasium environments and checking that SAC can run on them."""

from __future__ import annotations

import functools
import os
import re
import sys
import time
import warnings
from typing import Callable, Optional

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.data.goals import goal_columns
from tfsac.data.spaces import EnvSpec, read_env_spec, space_to_json, unsupported_part
from tfsac.errors import TfsacError
from tfsac.files import ENV_SPEC_FILE
from tfsac.logs import mujoco_warnings_logged
from tfsac.user_modules import find_in_current_directory, split

# MuJoCo picks its GL backend when first imported; without a display, GLFW cannot open a
# context, so headless machines render through EGL unless the user chose otherwise.
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


# How a run names an env that an env_fn made without a gymnasium id: no script can make it.
CUSTOM_ENV = "custom:"


# The first words of gymnasium-robotics' env ids (FetchReach-v4, AntMaze_UMaze-v5, ...).
ROBOTICS_PREFIXES = ("Fetch", "Hand", "AntMaze", "PointMaze", "Adroit", "FrankaKitchen")

# Modules of envs that a tfsac extra installs: a missing one's message names the extra.
EXTRAS = {"gymnasium_robotics": "robotics", "Box2D": "box2d"}


def check_env_id(env_id: str) -> None:
    """Raises TfsacError, as make_env would, for an id gymnasium has not registered; ids
    that name a module to import first ('module:Id-v0') are left to make_env. Cheap: it
    makes no env (for a script to check before loading TensorFlow)."""
    if ":" in env_id:
        return
    try:
        gym.spec(env_id)
    except gym.error.Error as e:
        raise TfsacError(f"cannot make environment {env_id!r}: {e}{_id_hint(env_id)}") from None


def _id_hint(env_id: str) -> str:
    """What an unknown id may have meant: gymnasium-robotics' envs are registered only once
    their module is imported."""
    if not env_id.startswith(ROBOTICS_PREFIXES):
        return ""
    return (
        " (gymnasium-robotics' envs are named with their module: "
        f"--env=gymnasium_robotics:{env_id}, with pip install -e '.[robotics]')"
    )


def _check_display(env_id: str, render_mode) -> None:
    """TfsacError for a window on a Linux machine without a display: pygame and MuJoCo's
    viewer end the process with a segmentation fault at the first frame."""
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if render_mode == "human" and headless:
        raise TfsacError(
            f"{env_id} with render_mode='human' opens a window, and this machine has no "
            "display (neither DISPLAY nor WAYLAND_DISPLAY is set): leave render_mode out "
            "(videos: --video_every, or scripts/evaluate.py --video_dir)"
        )


def make_env(env_id: str, render_mode=None, env_kwargs: Optional[dict] = None) -> gym.Env:
    """`gymnasium.make(env_id, **env_kwargs)`, observations flattened to a float vector.

    `env_id` may name the module that registers it, "my_package.envs:MyEnv-v0" (gymnasium
    imports the module first). Raises TfsacError for an unknown id, a missing module, bad
    keyword arguments or a space SAC cannot handle.
    """
    if env_id.startswith(CUSTOM_ENV):
        name = env_id[len(CUSTOM_ENV) :]
        raise TfsacError(
            f"the run was trained on an env made by an env_fn ({name}), which has no "
            f"gymnasium id to make it by: in Python pass the same env_fn= (train, resume) or "
            "evaluate with tfsac.run.evaluation.run_episodes(env_fn(), policy, episodes); "
            f"from scripts, --env=<module>:<id> of an env registered as "
            f"gymnasium.register(<id>, entry_point=...) (docs/guide/custom-env-and-networks.md)"
        )
    kwargs = dict(env_kwargs or {})
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    _check_display(env_id, kwargs.get("render_mode"))
    module = split(env_id)[0]
    if module is not None:  # gymnasium imports it; where to look is tfsac's rule
        find_in_current_directory(module)
    mujoco_warnings_logged()
    try:
        with warnings.catch_warnings(record=True) as caught:
            env = gym.make(env_id, **kwargs)
    except gym.error.Error as e:
        raise TfsacError(f"cannot make environment {env_id!r}: {e}{_id_hint(env_id)}") from None
    except ModuleNotFoundError as e:
        # gymnasium re-raises the import's error with its own text: the name is the cause's.
        name = e.name or getattr(e.__cause__, "name", None) or ""
        hint = EXTRAS.get(name.split(".")[0])
        install = f" (pip install 'tfsac[{hint}]', or -e \".[{hint}]\" in a checkout)"
        if not hint and module is not None and name.split(".")[0] == module.split(".")[0]:
            install = " (run from the folder that holds it, or put that folder on PYTHONPATH)"
        elif not hint:
            install = ""
        raise TfsacError(
            f"environment {env_id!r} needs a missing module: {name or e}{install}"
        ) from None
    except TypeError as e:
        raise TfsacError(f"environment {env_id!r} rejects its arguments: {e}") from None
    except Exception as e:  # noqa: BLE001 - an env's own checks (a ValueError from TimeLimit)
        raise TfsacError(f"cannot make environment {env_id!r}: {type(e).__name__}: {e}") from None
    for warning in caught:
        _say_once(str(warning.message))
    return _checked(env, env_id)


_SAID = set()
_TERMINAL_COLOURS = re.compile(r"\x1b\[[0-9;]*m")


def _say_once(message: str) -> None:
    """A warning of making an env ("Pendulum-v0 is out of date", ...) as one warning line,
    once per process (not Python's two lines with gymnasium's colour codes per env copy)."""
    text = _TERMINAL_COLOURS.sub("", message).removeprefix("WARN: ").strip()
    if text not in _SAID:
        _SAID.add(text)
        logging.warning("%s", text)


def _checked(env: gym.Env, name: str) -> gym.Env:
    check_action_space(name, env.action_space)
    if part := unsupported_part(env.observation_space):
        env.close()
        raise TfsacError(
            f"{name}: unsupported observation space: {part} (tfsac takes Box, Discrete, "
            "MultiDiscrete, MultiBinary, and Dict or Tuple of them)"
        )
    return Flattened(env) if needs_flattening(env.observation_space) else env


class Flattened(gym.wrappers.FlattenObservation):
    """tfsac's own flattening of an env's observations, told apart from a user's wrappers:
    what is inside it (the user's env, wrappers included) is the space a Policy takes."""


def users_env(env: gym.Env) -> gym.Env:
    """`env` without tfsac's own flattening: as the user's factory made it."""
    return env.env if isinstance(env, Flattened) else env


def unflattened(env: gym.Env) -> gym.Env:
    """`env` inside any flattening of its observations, tfsac's or the user's
    FlattenObservation: both give the same vector, of this env's space."""
    env = users_env(env)
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
    """`env_fn()`, checked as `make_env` checks an id's env (continuous bounded actions,
    observations SAC can flatten) and flattened where needed."""
    if isinstance(env_fn, gym.Env):  # SB3 takes an env; copies and runners need a factory
        raise TfsacError(
            f"env_fn takes a factory that makes the env (each env copy, evaluation and env "
            f"runner makes its own), got a {type(env_fn).__name__} env: pass the function "
            "that makes it, e.g. env_fn=lambda: gym.make(...)"
        )
    try:
        env = env_fn()
    except TfsacError:
        raise
    except Exception as e:  # noqa: BLE001 - a user's factory may raise anything
        raise TfsacError(f"cannot make {name}: {type(e).__name__}: {e}") from None
    if not isinstance(env, gym.Env):
        raise TfsacError(f"{name} is a {type(env).__name__}, not a gymnasium.Env")
    return _checked(env, name)


def _flat_env_fn(env_fn: EnvFn) -> gym.Env:
    return checked_env(env_fn)


class LeanSyncVectorEnv(gym.vector.SyncVectorEnv):
    """gymnasium's SyncVectorEnv in its same-step autoreset mode, with a `step` that keeps
    only what the collector reads: the batched results and `info["final_obs"]` (an object
    array, None where a copy did not finish). The envs' own step infos are dropped; merging
    them into arrays cost more per step than HalfCheetah's physics (docs/performance.md,
    "Env runners")."""

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
        observations = np.stack(self._env_obs)
        info = {} if final_obs is None else {"final_obs": final_obs}
        return (
            observations,
            self._rewards.copy(),
            self._terminations.copy(),
            self._truncations.copy(),
            info,
        )


def make_vector_env(env_fn: EnvFn, num_envs: int, mode: str = "sync") -> gym.vector.VectorEnv:
    """`num_envs` copies of `checked_env(env_fn)` stepped together ("sync" in this process,
    "async" in one subprocess each: `env_fn` must then pickle), resetting finished copies
    in the same step and reporting their true final observation in `info["final_obs"]`."""
    vector_env = {"sync": LeanSyncVectorEnv, "async": gym.vector.AsyncVectorEnv}.get(mode)
    if vector_env is None:
        raise TfsacError(f"vector mode must be 'sync' or 'async', got {mode!r}")
    return vector_env(
        [functools.partial(_flat_env_fn, env_fn)] * num_envs,
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
    )


def check_action_space(env_id: str, space: gym.Space) -> None:
    if not isinstance(space, gym.spaces.Box):
        raise TfsacError(
            f"{env_id} has action space {space}; SAC needs continuous actions (a gymnasium Box)"
        )
    if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise TfsacError(f"{env_id} has an unbounded action space {space}; SAC needs finite bounds")
    if len(space.shape) != 1:
        raise TfsacError(f"{env_id} has action shape {space.shape}; SAC here needs a flat vector")


def env_spec(env_id: str, env: gym.Env) -> EnvSpec:
    space = env.action_space
    flattened = isinstance(env, Flattened)
    # The observations as the env (wrappers included) gives them: not `unwrapped`'s, which
    # an observation wrapper (frame stacking, a transform) changes.
    raw = users_env(env).observation_space
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


def run_env_spec(run_dir: str, env_id: str, env_kwargs: Optional[dict] = None) -> EnvSpec:
    """The env a run's networks saw: its env_spec.json, or for a run of an earlier tfsac
    that wrote none, its env (`env_id`, `env_kwargs`) made again. TfsacError where that
    cannot be (an env_fn's env, which no id makes)."""
    spec = read_env_spec(run_dir)
    if spec is not None:
        return spec
    if env_id.startswith(CUSTOM_ENV):
        raise TfsacError(
            f"{run_dir!r} trained on an env made by an env_fn "
            f"({env_id[len(CUSTOM_ENV) :]}) and has no {ENV_SPEC_FILE} (an earlier "
            "tfsac wrote none): use the run's SavedModel export instead (scripts: "
            "--saved_model=<version folder>; Python: tfsac.Policy.load(<version folder>))"
        )
    return remade_env_spec(env_id, env_kwargs)


def remade_env_spec(env_id: str, env_kwargs: Optional[dict] = None) -> EnvSpec:
    """The spec of the env `env_id` names, made for it and closed."""
    env = make_env(env_id, env_kwargs=env_kwargs)
    try:
        return env_spec(env_id, env)
    finally:
        env.close()
