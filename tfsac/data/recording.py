"""Recording episodes of a policy (or of uniform random actions) and writing them as a
dataset that `--offline_data` reads: a Minari dataset, or a folder of .npz episodes
(tfsac/data/offline_data.py describes the layout). scripts/collect.py is its front end.

Writes only into the folder the user names, through a hidden temporary folder renamed into
place at the end: a failed or killed recording leaves no dataset behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import tempfile
import warnings
from typing import Callable, Dict, List, Optional

import numpy as np

from tfsac.data.envs import make_env, unit_to_bounds
from tfsac.data.recorded_data import EPISODE_FIELDS, NPZ_FORMAT, NPZ_META_FILE
from tfsac.errors import TfsacError
from tfsac.files import check_writable

Policy = Callable[[np.ndarray], np.ndarray]  # a batch of observations -> env-unit actions
FORMATS = ("minari", "npz")


def record_episodes(
    env_id: str,
    episodes: int,
    policy: Optional[Policy] = None,
    noise: float = 0.0,
    seed: int = 0,
    env_kwargs: Optional[dict] = None,
    transitions: int = 0,
) -> List[Dict[str, np.ndarray]]:
    """`episodes` episodes of `policy` (None: uniform random actions) with Gaussian noise
    of std `noise` added in [-1, 1] action units (then clipped), in Minari's fields with
    actions in the env's units. With `transitions` > 0, whole episodes until at least that
    many transitions instead (D4RL-style sizes where episodes end early, as Hopper's do)."""
    env = make_env(env_id, env_kwargs=env_kwargs)
    low, high = env.action_space.low, env.action_space.high
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    recorded, total, n = [], 0, 0
    try:
        while (total < transitions) if transitions > 0 else (n < episodes):
            obs, _ = env.reset(seed=seed + n)
            steps = {k: [] for k in EPISODE_FIELDS}
            steps["observations"].append(obs)
            done = False
            while not done:
                if policy is None:
                    action = env.action_space.sample()
                else:
                    unit = (
                        2.0 * (policy(np.asarray(obs, np.float32)[None])[0] - low) / (high - low)
                        - 1.0
                    )
                    unit = np.clip(unit + noise * rng.standard_normal(unit.shape), -1.0, 1.0)
                    action = unit_to_bounds(unit, low, high)
                obs, reward, terminated, truncated, _ = env.step(action)
                for key, value in zip(
                    EPISODE_FIELDS, (obs, action, reward, terminated, truncated), strict=True
                ):
                    steps[key].append(value)
                done = terminated or truncated
            recorded.append({k: np.asarray(v) for k, v in steps.items()})
            total, n = total + len(steps["rewards"]), n + 1
    finally:
        env.close()
    return recorded


def check_policy_fits(metadata: Dict, env_id: str, env_kwargs: Optional[dict] = None) -> None:
    """TfsacError where a SavedModel's metadata (observation size, action bounds) does not
    fit the env it would record on; TF-free, before the policy loads."""
    env = make_env(env_id, env_kwargs=env_kwargs)
    try:
        obs_dim = int(np.prod(env.observation_space.shape or (0,)))
        low, high = env.action_space.low, env.action_space.high
    finally:
        env.close()
    if "observation_dim" in metadata and metadata["observation_dim"] != obs_dim:
        raise TfsacError(
            f"the SavedModel takes observations of {metadata['observation_dim']} values, "
            f"{env_id} gives {obs_dim}"
        )
    bounds = (metadata.get("action_low"), metadata.get("action_high"))
    if None not in bounds and not (
        np.shape(bounds[0]) == low.shape
        and np.allclose(bounds[0], low)
        and np.allclose(bounds[1], high)
    ):
        raise TfsacError(f"the SavedModel's action bounds {bounds} are not {env_id}'s")


def check_dataset_id(dataset_id: str) -> None:
    """Minari's '[namespace/]name-v<version>' (its namespace at least two characters):
    letters, digits, '_', '-' and the namespace's '/', so no '.' or '..' and nothing
    absolute: the dataset's folder stays inside the output folder."""
    if "//" in dataset_id or not re.fullmatch(r"(?:[\w-][\w/-]*[\w-]/)?[\w-]+-v\d+", dataset_id):
        raise TfsacError(
            "dataset_id must be Minari's '[namespace/]name-v<version>' of letters, digits, "
            f"'_' and '-' (e.g. halfcheetah/medium-v0), got {dataset_id!r}"
        )


def check_output(output: str, fmt: str, dataset_id: Optional[str]) -> str:
    """The dataset folder `write_dataset` would make; TfsacError (before any recording)
    where the format is unknown, the id missing or the folder taken or not writable."""
    if fmt not in FORMATS:
        raise TfsacError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt == "minari":
        if not dataset_id:
            raise TfsacError("a Minari dataset needs a dataset id (e.g. halfcheetah/medium-v0)")
        check_dataset_id(dataset_id)
    target = output if fmt == "npz" else os.path.join(output, dataset_id)
    parts = [] if fmt == "npz" else dataset_id.split("/")[:-1]
    for n in range(1, len(parts) + 1):  # 'a/b-v0/c-v1' would go inside the dataset 'a/b-v0'
        folder = os.path.join(output, *parts[:n])
        if os.path.isfile(os.path.join(folder, "data", "metadata.json")):
            raise TfsacError(f"{folder!r} is a Minari dataset: a dataset id cannot go inside it")
    if os.path.lexists(target) and (not os.path.isdir(target) or os.listdir(target)):
        raise TfsacError(f"{target!r} already exists; choose another output or dataset id")
    if os.path.islink(target):  # the dataset replaces the folder: a link's would be lost
        raise TfsacError(f"{target!r} is a symbolic link: name the folder itself, or a new one")
    check_writable(target)  # a folder in the way is a file, not writable, ...: one line
    return target


def write_dataset(
    episodes: List[Dict[str, np.ndarray]],
    env_id: str,
    output: str,
    fmt: str = "minari",
    dataset_id: Optional[str] = None,
    description: str = "",
    env_kwargs: Optional[dict] = None,
) -> str:
    """Writes `episodes` of `env_id` (made with `env_kwargs`) under `output`; returns what
    --offline_data takes: the .npz folder `output` itself, or the Minari dataset's folder
    output/<dataset_id>. The metadata names the env and its spaces as recorded."""
    if not episodes:
        raise TfsacError("no episodes to write")
    target = check_output(output, fmt, dataset_id)
    parent = os.path.dirname(os.path.abspath(target))
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tfsac-collect-", dir=parent)
    except OSError as e:
        raise TfsacError(f"cannot write the dataset to {target!r}: {e.strerror or e}") from None
    try:
        if fmt == "npz":
            _write_npz(episodes, env_id, tmp, env_kwargs)
            written = tmp
        else:
            _write_minari(episodes, env_id, tmp, dataset_id, description, env_kwargs)
            written = os.path.join(tmp, dataset_id)
        if os.path.isdir(target):
            os.rmdir(target)  # empty (checked above)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(written, 0o777 & ~umask)  # mkdtemp's folder is the owner's alone
        os.replace(written, target)
    except OSError as e:
        raise TfsacError(f"cannot write the dataset to {target!r}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_npz(episodes, env_id: str, folder: str, env_kwargs: Optional[dict]) -> None:
    env = make_env(env_id, env_kwargs=env_kwargs)
    space = env.action_space
    env.close()
    meta = {
        "format": NPZ_FORMAT,
        "env_id": env_id,
        "env_kwargs": env_kwargs or {},
        "action_low": space.low.tolist(),
        "action_high": space.high.tolist(),
        "observation_shape": list(episodes[0]["observations"].shape[1:]) if episodes else [],
    }
    for n, episode in enumerate(episodes):
        np.savez(os.path.join(folder, f"episode_{n:06d}.npz"), **episode)
    with open(os.path.join(folder, NPZ_META_FILE), "w") as f:
        json.dump(meta, f, indent=2)


def _write_minari(
    episodes, env_id: str, root: str, dataset_id: str, description: str, env_kwargs
) -> None:
    try:
        import minari  # the optional extra .[offline]
        from minari.data_collector import EpisodeBuffer
    except ImportError:
        raise TfsacError(
            "a Minari dataset needs minari (pip install 'tfsac[offline]', or -e "
            '".[offline]" in a checkout), or use npz'
        ) from None
    buffers = [
        EpisodeBuffer(
            id=n,
            observations=e["observations"],
            actions=e["actions"],
            rewards=e["rewards"],
            terminations=e["terminations"],
            truncations=e["truncations"],
        )
        for n, e in enumerate(episodes)
    ]
    # The spaces of the recording: observations flattened as make_env gives them (a Dict
    # env's too), under the registered id (Minari cannot import 'module:Id-v0' itself), with
    # the keyword arguments in its spec.
    env = make_env(env_id, env_kwargs=env_kwargs)
    try:
        spec, obs_space, action_space = env.spec, env.observation_space, env.action_space
    finally:
        env.close()
    if callable(spec.entry_point):  # a class registered in code: Minari stores specs as JSON
        cls = spec.entry_point
        spec = dataclasses.replace(spec, entry_point=f"{cls.__module__}:{cls.__qualname__}")
    with _minari_root(root), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # its advice on authors and permalinks
        minari.create_dataset_from_buffers(
            dataset_id,
            buffers,
            env=spec,
            eval_env=spec,
            observation_space=obs_space,
            action_space=action_space,
            algorithm_name="tfsac scripts/collect.py",
            description=description or f"{len(episodes)} episodes recorded by tfsac",
            data_format="hdf5",
        )


@contextlib.contextmanager
def _minari_root(root: str):
    """Minari writes under $MINARI_DATASETS_PATH: pointed at `root` while it writes."""
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = root
    try:
        yield
    finally:
        if old is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = old
