"""An env's API as the collector calls it, tried once at a run's start: `reset` returns
(observation, info), `step` returns (observation, reward, terminated, truncated, info),
observations of the declared space and a number for a reward. A custom env that breaks
the gymnasium API (the old gym's 4-tuple step, say) is then one line before anything is
written, not a traceback from inside the collector after the run directory exists."""

from __future__ import annotations

import numbers
from typing import Dict, Optional

import gymnasium as gym
import numpy as np

from tfsac.data.spaces import space_from_json
from tfsac.errors import TfsacError, first_line

OLD_GYM = " (the old gym API's 4: split done into terminated and truncated)"


def _called(name: str, what: str, call):
    try:
        return call()
    except TfsacError:
        raise
    except Exception as e:  # noqa: BLE001 - a user's env may raise anything
        # gymnasium's TimeLimit unpacks an env's step: the old 4-tuple fails inside it.
        hint = OLD_GYM if "(expected 5, got 4)" in str(e) else ""
        raise TfsacError(
            f"{name}: {what} raised {type(e).__name__}: {first_line(e)}{hint}"
        ) from None


def _check_observation(name: str, env: gym.Env, observation, where: str) -> None:
    space = env.observation_space  # the flat Box tfsac's wrapper gives, or the env's own
    if isinstance(space, gym.spaces.Box) and np.shape(observation) != space.shape:
        raise TfsacError(
            f"{name}: {where} gave an observation of shape {np.shape(observation)}, and its "
            f"observation_space says {space.shape}"
        )


def check_env_api(env: gym.Env, name: str) -> None:
    """One reset (seed 0) and one step with a sampled action, on `env` (the run's
    evaluation env: each evaluation resets it with a seed of its own); TfsacError naming
    the first break of the gymnasium API."""
    out = _called(name, "reset(seed=0)", lambda: env.reset(seed=0))
    if not (isinstance(out, tuple) and len(out) == 2):
        raise TfsacError(
            f"{name}: reset() must return (observation, info), as gymnasium's API does; it "
            f"returned {type(out).__name__}" + (f" of {len(out)}" if isinstance(out, tuple) else "")
        )
    _check_observation(name, env, out[0], "reset()")
    action = env.action_space.sample()
    out = _called(name, "step(action)", lambda: env.step(action))
    if not (isinstance(out, tuple) and len(out) == 5):
        raise TfsacError(
            f"{name}: step() must return (observation, reward, terminated, truncated, info), "
            f"as gymnasium's API does; it returned {type(out).__name__}"
            + (f" of {len(out)}" if isinstance(out, tuple) else "")
            + (OLD_GYM if (isinstance(out, tuple) and len(out) == 4) else "")
        )
    _check_observation(name, env, out[0], "step()")
    reward = out[1]
    if not (np.ndim(reward) == 0 and isinstance(np.asarray(reward).item(), numbers.Real)):
        raise TfsacError(f"{name}: step() gave a reward of {reward!r:.40}, not one number")


# The env a user names to evaluate a saved policy on.
def check_env_fits(env_id: str, env_kwargs: Optional[Dict], info: Dict) -> None:
    """TfsacError where `env_id`'s observations or action bounds are not those of the
    policy that `info` (a policy's metadata) describes (scripts/evaluate.py's --env)."""
    from tfsac.data.envs import env_spec, make_env  # envs.py imports this module

    if "observation_dim" not in info:  # nothing to compare with
        return
    env = make_env(env_id, env_kwargs=env_kwargs)
    spec = env_spec(env_id, env)
    env.close()
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
    """A space's description (tfsac.data.spaces.space_to_json) without a Box's bounds or
    any dtype: what decides how its observations flatten into the policy's columns."""
    kind = space_json.get("type")
    if kind == "Box":
        return kind, tuple(space_json["shape"])
    if kind in ("Dict", "Tuple"):
        spaces = space_json["spaces"]
        if kind == "Dict":
            return kind, {k: _layout(v) for k, v in spaces.items()}
        return kind, [_layout(v) for v in spaces]
    return {k: v for k, v in space_json.items() if k != "dtype"}
