"""An exported version's metadata, TF-free: written, read back and checked; and samples."""

from __future__ import annotations

import json
import math
import os
from typing import Dict

import gymnasium as gym
import numpy as np

from tfsac import __version__
from tfsac.algorithm.architectures import architecture_of
from tfsac.data.spaces import EnvSpec, space_from_json
from tfsac.errors import Fault, TfsacError

METADATA_FILE = "tfsac_metadata.json"


def read_metadata(version_dir: str) -> Dict:
    """The version's tfsac_metadata.json ({} where none); a Fault where not as tfsac wrote it."""
    path = os.path.join(version_dir, METADATA_FILE)
    if not os.path.lexists(path):
        return {}
    try:
        with open(path) as f:
            metadata = json.load(f)
    except (OSError, ValueError) as e:
        raise Fault(f"cannot read {path!r}: {getattr(e, 'strerror', None) or e}") from None
    return _checked(metadata, f"cannot read {path!r}")


def saved_model_metadata(model, version_dir: str) -> Dict:
    """A SavedModel's tfsac_metadata.json, else its `metadata` signature's ({} for neither)."""
    metadata = read_metadata(version_dir)
    if metadata or "metadata" not in getattr(model, "signatures", {}):
        return metadata
    try:
        metadata = json.loads(model.signatures["metadata"]()["metadata"].numpy())
    except (KeyError, TypeError, ValueError) as e:
        raise Fault(f"{version_dir!r}: its metadata signature does not read ({e})") from None
    return _checked(metadata, f"{version_dir!r}: its metadata signature")


_NUMBER = (int, float)
# The entries that readers use, and the JSON types policy_metadata writes them as.
_ENTRY_TYPES = {
    "env_id": str,
    "env_kwargs": dict,
    "algorithm": str,
    "algorithm_kwargs": dict,
    "network": str,
    "observation_dim": int,
    "observation_space_json": dict,
    "action_low": list,
    "action_high": list,
    "eval_seed": (int, type(None)),
    "eval_episodes": int,
    "eval_return_mean": (*_NUMBER, type(None)),
    "training_steps": int,
}


def _checked(metadata, where: str) -> Dict:
    """`metadata` where its entries are as tfsac writes them, else a Fault."""
    if not isinstance(metadata, dict):
        raise Fault(f"{where}: not a JSON object")
    for key, kind in _ENTRY_TYPES.items():
        value = metadata.get(key)
        if key in metadata and (not isinstance(value, kind) or isinstance(value, bool)):
            raise Fault(f"{where}: its {key!r} is {value!r}, not what tfsac writes")
    for key in ("action_low", "action_high"):
        values = metadata.get(key, [])
        if not all(isinstance(v, _NUMBER) and math.isfinite(v) for v in values):
            raise Fault(f"{where}: its {key!r} is {values!r}, not a list of finite numbers")
    low, high = metadata.get("action_low"), metadata.get("action_high")
    if low is not None and high is not None:
        if len(low) != len(high) or not all(a <= b for a, b in zip(low, high, strict=False)):
            raise Fault(
                f"{where}: its action bounds {low} to {high} are not a box (low <= high, "
                "equal lengths)"
            )
    if "observation_space_json" in metadata:
        try:
            space_from_json(metadata["observation_space_json"])
        except (KeyError, TypeError, ValueError, AttributeError, TfsacError) as e:
            raise Fault(
                f"{where}: its 'observation_space_json' does not describe a space ({e!r})"
            ) from None
    return metadata


def policy_metadata(config, spec: EnvSpec, final_evaluation: dict) -> dict:
    """What the SavedModel says of its env, spaces, training and final evaluation."""
    extra = {}  # a goal env's keys, and its success rate
    if spec.goal_columns:
        extra = {
            "observation_keys": [list(c) for c in spec.goal_columns],
            "observation_joined": (
                "goal_default and goal_sample take the keys of observation_keys (float32 "
                "[batch, end - first] each) and concatenate them in that order along the last "
                "axis, [first, end) being each key's columns, into the flat observation that "
                "serving_default, sample, LiteRT and ONNX take"
            ),
        }
    if "success_rate" in final_evaluation:
        extra["eval_success_rate"] = final_evaluation["success_rate"]
    return {
        "tfsac_version": __version__,
        "env_id": config.env_id,
        "env_kwargs": config.env_kwargs,
        # An env_fn's envs: env_id names the registered env inside the factory's wrappers.
        **({"env_fn": spec.env_fn} if spec.env_fn else {}),
        # What trained it: its algorithm (a user's module's too) and that one's settings.
        "algorithm": config.algorithm,
        "algorithm_kwargs": config.algorithm_kwargs,
        "network": config.network,
        # Callers send raw observations either way: the graph normalises them itself.
        "normalizes_observations": architecture_of(config).normalizes(config),
        # The evaluated policy's env steps (a stopped run's or the best policy's).
        "training_steps": final_evaluation.get("step", config.total_steps),
        "observation_dim": spec.obs_dim,
        "observation_space": spec.observation_space,
        "observation_flattening": spec.observation_flattening,
        "observation_space_json": spec.observation_space_json,
        "action_space": spec.action_space,
        "action_low": list(spec.action_low),
        "action_high": list(spec.action_high),
        "eval_return_mean": final_evaluation["return_mean"],
        "eval_seed": final_evaluation["seed"],
        "eval_episodes": config.eval_episodes,
        **extra,
    }


def sample_observations(space_json, obs_dim: int, batch: int, seed: int = 0) -> np.ndarray:
    """`batch` flat observations sampled from a space's JSON (None: standard normal)."""
    if space_json is None:
        return np.random.default_rng(seed).standard_normal((batch, obs_dim), np.float32)
    space = space_from_json(space_json)
    space.seed(seed)
    rows = [gym.spaces.flatten(space, space.sample()) for _ in range(batch)]
    return np.asarray(rows, np.float32).reshape(batch, obs_dim)
