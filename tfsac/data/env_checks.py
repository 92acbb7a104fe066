"""Checks of the env a user names (making it, its spaces, its API), before anything is written."""

from __future__ import annotations

import numbers
import os
import sys
from typing import Callable, Dict, Optional

import gymnasium as gym
import numpy as np

from tfsac.data.spaces import (
    VECTORISED,
    GoalColumns,
    batched_rewards,
    column,
    space_from_json,
    unsupported_part,
)
from tfsac.errors import TfsacError, first_line

OLD_GYM = " (the old gym API's 4: split done into terminated and truncated)"
# How a run names an env that an env_fn made without a gymnasium id: no script can make it.
CUSTOM_ENV = "custom:"
# The first words of gymnasium-robotics' env ids (FetchReach-v4, AntMaze_UMaze-v5, ...).
ROBOTICS_PREFIXES = ("Fetch", "Hand", "AntMaze", "PointMaze", "Adroit", "FrankaKitchen")
# Modules of envs that a tfsac extra installs: a missing one's message names the extra.
EXTRAS = {"gymnasium_robotics": "robotics", "Box2D": "box2d"}


def check_env_id(env_id: str) -> None:
    """Refuses an id gymnasium has not registered (not 'module:Id-v0' ones: make_env's)."""
    if ":" not in env_id:
        made(env_id, None, lambda: gym.spec(env_id))


def check_makeable(env_id: str, render_mode) -> None:
    """Refuses an env_fn's name, which no id makes, and a window on a Linux machine without
    a display (pygame and MuJoCo's viewer end the process at the first frame)."""
    if env_id.startswith(CUSTOM_ENV):
        raise TfsacError(
            f"the run was trained on an env made by an env_fn ({env_id[len(CUSTOM_ENV) :]}), "
            "which has no gymnasium id to make it by: in Python pass the same env_fn= (train, "
            "resume) or evaluate with tfsac.run.evaluation.run_episodes(env_fn(), policy, "
            "episodes); from scripts, --env=<module>:<id> of an env registered as "
            "gymnasium.register(<id>, entry_point=...) (docs/guide/custom-env-and-networks.md)"
        )
    headless = sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    )
    if render_mode == "human" and headless:
        raise TfsacError(
            f"{env_id} with render_mode='human' opens a window, and this machine has no "
            "display (neither DISPLAY nor WAYLAND_DISPLAY is set): leave render_mode out "
            "(videos: --video_every, or scripts/evaluate.py --video_dir)"
        )


def made(env_id: str, module: Optional[str], make: Callable[[], gym.Env]) -> gym.Env:
    """`make()`, its errors (an unknown id, a missing module, rejected arguments) in one line."""
    try:
        return make()
    except gym.error.Error as e:
        hint = ""  # gymnasium-robotics' envs are registered once their module is imported
        if env_id.startswith(ROBOTICS_PREFIXES):
            hint = (
                " (gymnasium-robotics' envs are named with their module: "
                f"--env=gymnasium_robotics:{env_id}, with pip install -e '.[robotics]')"
            )
        raise TfsacError(f"cannot make environment {env_id!r}: {e}{hint}") from None
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


def factory_env(env_fn, name: str) -> gym.Env:
    """`env_fn()`, refused where env_fn is an env itself, fails, or makes no gymnasium.Env."""
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
    return env


def check_spaces(env: gym.Env, name: str) -> None:
    """Refuses (and closes) an env without bounded flat Box actions or flattenable observations."""
    space = env.action_space
    if not isinstance(space, gym.spaces.Box):
        why = f" has action space {space}; SAC needs continuous actions (a gymnasium Box)"
    elif not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        why = f" has an unbounded action space {space}; SAC needs finite bounds"
    elif len(space.shape) != 1:
        why = f" has action shape {space.shape}; SAC here needs a flat vector"
    elif part := unsupported_part(env.observation_space):
        why = (
            f": unsupported observation space: {part} (tfsac takes Box, Discrete, "
            "MultiDiscrete, MultiBinary, and Dict or Tuple of them)"
        )
    else:
        return
    env.close()
    raise TfsacError(name + why)


def _returned(name: str, env: gym.Env, call_text: str, call, fields: str) -> tuple:
    """What `call` returned, refused unless the tuple of `fields` with a well-shaped observation."""
    try:
        out = call()
    except TfsacError:
        raise
    except Exception as e:  # noqa: BLE001 - a user's env may raise anything
        # gymnasium's TimeLimit unpacks an env's step: the old 4-tuple fails inside it.
        hint = OLD_GYM if "(expected 5, got 4)" in str(e) else ""
        raise TfsacError(
            f"{name}: {call_text} raised {type(e).__name__}: {first_line(e)}{hint}"
        ) from None
    what, size = call_text.split("(")[0] + "()", fields.count(",") + 1
    if not (isinstance(out, tuple) and len(out) == size):
        raise TfsacError(
            f"{name}: {what} must return {fields}, as gymnasium's API does; it returned "
            f"{type(out).__name__}"
            + (f" of {len(out)}" if isinstance(out, tuple) else "")
            + (OLD_GYM if (isinstance(out, tuple) and size == 5 and len(out) == 4) else "")
        )
    space = env.observation_space  # the flat Box tfsac's wrapper gives, or the env's own
    if isinstance(space, gym.spaces.Box) and np.shape(out[0]) != space.shape:
        raise TfsacError(
            f"{name}: {what} gave an observation of shape {np.shape(out[0])}, and its "
            f"observation_space says {space.shape}"
        )
    return out


def check_env_api(env: gym.Env, name: str) -> None:
    """One reset and one step of `env`; refuses the first break of the gymnasium API."""
    _returned(name, env, "reset(seed=0)", lambda: env.reset(seed=0), "(observation, info)")
    action = env.action_space.sample()
    fields = "(observation, reward, terminated, truncated, info)"
    reward = _returned(name, env, "step(action)", lambda: env.step(action), fields)[1]
    if not (np.ndim(reward) == 0 and isinstance(np.asarray(reward).item(), numbers.Real)):
        raise TfsacError(f"{name}: step() gave a reward of {reward!r:.40}, not one number")


def reward_function(env: gym.Env, columns: Optional[GoalColumns], name: str) -> Callable:
    """A goal env's `compute_reward`, the outermost wrapper's (one changing the reward)."""
    try:
        compute = env.get_wrapper_attr("compute_reward")
    except AttributeError:
        compute = None
    if columns is None or not callable(compute):
        raise TfsacError(
            f"her needs a goal-conditioned env (a Dict observation of flat Boxes with "
            f"achieved_goal and desired_goal of one width, and compute_reward), and {name} "
            f"has observation space {env.unwrapped.observation_space}"
            + ("" if callable(compute) else " and no compute_reward")
        )
    return compute


def check_batched_reward(compute: Callable, columns: GoalColumns, name: str) -> None:
    """Refuses a `compute` that does not take a batch of goals, tried on a batch whose size is
    not the goal's width (which a reward summed over the wrong axis gives)."""
    goals = column(columns, "achieved_goal")
    width = goals.stop - goals.start
    n = max(3, width + 1)
    batch = np.zeros((n, width), np.float32)
    try:
        batched_rewards(compute, batch, batch + 0.5)  # apart: a distance's log stays finite
    except TfsacError as e:
        raise TfsacError(f"{name}'s {e}") from None
    except Exception as e:  # noqa: BLE001 - the env's code: what it raised, in one line
        raise TfsacError(
            f"{name}'s compute_reward raised {type(e).__name__} for a batch of {n} goals: "
            f"{e}; {VECTORISED}".replace("\n", " ")
        ) from None


def check_env_fits(env_id: str, spec, info: Dict) -> None:
    """Refuses an env whose observations or action bounds are not the policy's (`info`)."""
    if "observation_dim" not in info:  # nothing to compare with
        return
    if spec.obs_dim != info["observation_dim"]:
        raise TfsacError(
            f"{env_id} has {spec.obs_dim}-dimensional observations; the policy takes "
            f"{info['observation_dim']}"
        )
    trained_on, env_space = info.get("observation_space_json"), spec.observation_space_json
    if trained_on and env_space and _layout(trained_on) != _layout(env_space):
        raise TfsacError(
            f"{env_id}'s observations ({spec.observation_space}) flatten differently from "
            f"those the policy was trained on ({space_from_json(trained_on)})"
        )
    low, high = info.get("action_low"), info.get("action_high")
    if low is not None and high is not None:
        if len(low) != spec.action_dim or not (
            np.allclose(low, spec.action_low) and np.allclose(high, spec.action_high)
        ):
            raise TfsacError(
                f"{env_id}'s actions (bounds {list(spec.action_low)} to "
                f"{list(spec.action_high)}) are not the policy's ({low} to {high})"
            )


def _layout(space_json: Dict):
    """A space's JSON without a Box's bounds or any dtype: what decides how it flattens."""
    kind = space_json.get("type")
    if kind == "Box":
        return kind, tuple(space_json["shape"])
    if kind == "Dict":
        return kind, {k: _layout(v) for k, v in space_json["spaces"].items()}
    if kind == "Tuple":
        return kind, [_layout(v) for v in space_json["spaces"]]
    return {k: v for k, v in space_json.items() if k != "dtype"}
