"""Recording a policy's episodes as a dataset `--offline_data` reads (Minari or .npz), renamed
into place from a hidden folder (never a partial one), and checking its output first."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import warnings
from typing import Callable, Dict, List, Optional
from unittest import mock

import numpy as np

from tfsac.data.envs import make_env, unit_to_bounds
from tfsac.data.offline_data import EPISODE_FIELDS, NPZ_FORMAT, NPZ_META_FILE
from tfsac.errors import Fault, TfsacError
from tfsac.files import check_writable

Policy = Callable[[np.ndarray], np.ndarray]  # a batch of observations -> env-unit actions


FORMATS = ("minari", "npz")
# Minari's '[namespace/]name-v<version>': no '.', '..' or absolute path leaves the output folder.
MINARI_ID = re.compile(r"(?:[\w-][\w/-]*[\w-]/)?[\w-]+-v\d+")


def check_output(
    output: str, fmt: str, dataset_id: Optional[str], episodes: Optional[list] = None
) -> str:
    """The dataset folder a recording would make, checked first (format, id, a free folder)."""
    if fmt not in FORMATS:
        raise TfsacError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if episodes is not None and not episodes:
        raise TfsacError("no episodes to write")
    if fmt == "minari":
        if not dataset_id:
            raise TfsacError("a Minari dataset needs a dataset id (e.g. halfcheetah/medium-v0)")
        if "//" in dataset_id or not MINARI_ID.fullmatch(dataset_id):
            raise TfsacError(
                "dataset_id must be Minari's '[namespace/]name-v<version>' of letters, digits, "
                f"'_' and '-' (e.g. halfcheetah/medium-v0), got {dataset_id!r}"
            )
        try:
            import minari  # noqa: F401 - the optional extra .[offline]
        except ImportError:
            raise TfsacError(
                "a Minari dataset needs minari (pip install 'tfsac[offline]', or -e "
                '".[offline]" in a checkout), or use npz'
            ) from None
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


def record_episodes(
    env_id: str,
    episodes: int,
    policy: Optional[Policy] = None,
    noise: float = 0.0,
    seed: int = 0,
    env_kwargs: Optional[dict] = None,
    transitions: int = 0,
) -> List[Dict[str, np.ndarray]]:
    """`episodes` episodes (`transitions` > 0: up to that many transitions) of `policy` (None:
    uniform) with Gaussian noise of std `noise` in [-1, 1] units, in Minari's fields."""
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
                    act = policy(np.asarray(obs, np.float32)[None])[0]
                    unit = 2.0 * (act - low) / (high - low) - 1.0
                    unit = np.clip(unit + noise * rng.standard_normal(unit.shape), -1.0, 1.0)
                    action = unit_to_bounds(unit, low, high)
                obs, reward, terminated, truncated, _ = env.step(action)
                values = (obs, action, reward, terminated, truncated)
                for key, value in zip(EPISODE_FIELDS, values, strict=True):
                    steps[key].append(value)
                done = terminated or truncated
            recorded.append({k: np.asarray(v) for k, v in steps.items()})
            total, n = total + len(steps["rewards"]), n + 1
    finally:
        env.close()
    return recorded


def write_dataset(
    episodes: List[Dict[str, np.ndarray]],
    env_id: str,
    output: str,
    fmt: str = "minari",
    dataset_id: Optional[str] = None,
    description: str = "",
    env_kwargs: Optional[dict] = None,
) -> str:
    """Writes `episodes` of `env_id` under `output`; returns what --offline_data takes: the
    .npz folder `output` itself, or the Minari dataset's folder output/<dataset_id>."""
    target = check_output(output, fmt, dataset_id, episodes)
    env = make_env(env_id, env_kwargs=env_kwargs)  # its spaces, as training makes them
    env.close()
    parent = os.path.dirname(os.path.abspath(target))
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=".tfsac-collect-", dir=parent)
    except OSError as e:
        raise Fault(f"cannot write the dataset to {target!r}: {e.strerror or e}") from None
    try:
        if fmt == "npz":
            for n, episode in enumerate(episodes):
                np.savez(os.path.join(tmp, f"episode_{n:06d}.npz"), **episode)
            meta = {
                "format": NPZ_FORMAT,
                "env_id": env_id,
                "env_kwargs": env_kwargs or {},
                "action_low": env.action_space.low.tolist(),
                "action_high": env.action_space.high.tolist(),
                "observation_shape": list(episodes[0]["observations"].shape[1:]),
            }
            with open(os.path.join(tmp, NPZ_META_FILE), "w") as f:
                json.dump(meta, f, indent=2)
            written = tmp
        else:
            _write_minari(episodes, env, tmp, dataset_id, description)
            written = os.path.join(tmp, dataset_id)
        if os.path.isdir(target):
            os.rmdir(target)  # empty (checked above)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(written, 0o777 & ~umask)  # mkdtemp's folder is the owner's alone
        os.replace(written, target)
    except OSError as e:
        raise Fault(f"cannot write the dataset to {target!r}: {e.strerror or e}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _write_minari(episodes, env, root: str, dataset_id: str, description: str) -> None:
    import minari  # the optional extra .[offline] (check_output found it)
    from minari.data_collector import EpisodeBuffer

    buffers = [
        EpisodeBuffer(id=n, **{k: e[k] for k in EPISODE_FIELDS}) for n, e in enumerate(episodes)
    ]
    # The spec under the registered id: Minari cannot import 'module:Id-v0' itself.
    spec = env.spec
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
            observation_space=env.observation_space,
            action_space=env.action_space,
            algorithm_name="tfsac scripts/collect.py",
            description=description or f"{len(episodes)} episodes recorded by tfsac",
            data_format="hdf5",
        )


def _minari_root(root: str):
    """Minari writes under $MINARI_DATASETS_PATH: pointed at `root` while it writes."""
    return mock.patch.dict(os.environ, MINARI_DATASETS_PATH=root)
