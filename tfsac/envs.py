"""Making gymnasium environments and checking that SAC can run on them."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Tuple

import gymnasium as gym
import numpy as np

from tfsac.errors import TfsacError
from tfsac.rendering import needs_flattening

# MuJoCo picks its GL backend when first imported; without a display, GLFW cannot open a
# context, so headless machines render through EGL unless the user chose otherwise.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl")


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """What the networks and the exported policy need to know about an env."""

    env_id: str
    obs_dim: int
    action_dim: int
    action_low: Tuple[float, ...]
    action_high: Tuple[float, ...]
    observation_space: str
    action_space: str
    # How the env's observation becomes the flat float32 vector the networks (and the
    # SavedModel's `observation` input) take.
    observation_flattening: str


def make_env(env_id: str, render_mode=None, env_kwargs: Optional[dict] = None) -> gym.Env:
    """`gymnasium.make(env_id, **env_kwargs)`, observations flattened to a float vector.

    `env_id` may name the module that registers it, "my_package.envs:MyEnv-v0" (gymnasium
    imports the module first). Raises TfsacError for an unknown id, a missing module, bad
    keyword arguments or a space SAC cannot handle.
    """
    kwargs = dict(env_kwargs or {})
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        env = gym.make(env_id, **kwargs)
    except gym.error.Error as e:
        raise TfsacError(f"cannot make environment {env_id!r}: {e}") from None
    except ModuleNotFoundError as e:
        raise TfsacError(f"environment {env_id!r} needs a missing module: {e}") from None
    except TypeError as e:
        raise TfsacError(f"environment {env_id!r} rejects its arguments: {e}") from None
    check_action_space(env_id, env.action_space)
    if needs_flattening(env.observation_space):
        try:
            gym.spaces.flatdim(env.observation_space)
        except (NotImplementedError, TypeError, ValueError):
            env.close()
            raise TfsacError(
                f"{env_id}: unsupported observation space {env.observation_space}"
            ) from None
        env = gym.wrappers.FlattenObservation(env)
    return env


def make_vector_env(
    env_id: str, num_envs: int, mode: str = "sync", env_kwargs: Optional[dict] = None
) -> gym.vector.VectorEnv:
    """`num_envs` copies of `make_env(env_id)` stepped together ("sync" in this process,
    "async" in one subprocess each), resetting finished copies in the same step and
    reporting their true final observation in `info["final_obs"]`."""
    if mode not in ("sync", "async"):
        raise TfsacError(f"vector mode must be 'sync' or 'async', got {mode!r}")
    probe = make_env(
        env_id, env_kwargs=env_kwargs
    )  # checks the id and the spaces once, with clear errors
    flatten = isinstance(probe, gym.wrappers.FlattenObservation)
    probe.close()
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        wrappers=[gym.wrappers.FlattenObservation] if flatten else None,
        **(env_kwargs or {}),
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
    return EnvSpec(
        env_id=env_id,
        obs_dim=int(gym.spaces.flatdim(env.observation_space)),
        action_dim=int(space.shape[0]),
        action_low=tuple(float(x) for x in space.low),
        action_high=tuple(float(x) for x in space.high),
        observation_space=str(env.unwrapped.observation_space),
        action_space=str(space),
        observation_flattening=(
            "gymnasium.spaces.flatten: Box flattened in C order, Discrete and MultiDiscrete "
            "one-hot, MultiBinary as is, Dict in sorted key order, Tuple in order"
            if isinstance(env, gym.wrappers.FlattenObservation)
            else "none: the observation is already a flat Box"
        ),
    )
