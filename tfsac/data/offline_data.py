"""Recorded transitions (--offline_data): a Minari dataset, a tfsac run's replay, .npz episodes."""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import zipfile
from typing import Dict, Optional, Sequence

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.data.replay import FIELDS, TRANSITION_ARRAYS, saved_transitions
from tfsac.data.spaces import EnvSpec, space_from_json
from tfsac.errors import TfsacError
from tfsac.files import CHECKPOINT_STATE_FILE, CHECKPOINTS_DIR, CONFIG_FILE, checkpoint_steps

NPZ_FORMAT = "tfsac-episodes/1"
NPZ_META_FILE = "dataset.json"
EPISODE_FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")
# Recorded actions may sit this far outside the bounds (float rounding of a clip).
BOUNDS_SLACK = 1e-5


@dataclasses.dataclass
class Episodes:
    """A source's episodes of Minari's fields (env units) and what it says of the env."""

    kind: str  # "minari", "npz" or "run"
    env_id: Optional[str]
    action_low: Optional[np.ndarray]
    action_high: Optional[np.ndarray]
    episodes: Sequence[Dict[str, np.ndarray]]


@dataclasses.dataclass
class RecordedData:
    """Transitions in replay units, read-only; `next_index[i]` is the row that continues row
    i's episode (len: none). Its SHA-256 checksum is what a checkpoint keeps of it."""

    source: str
    kind: str
    observation: np.ndarray
    action: np.ndarray  # in [-1, 1]
    reward: np.ndarray
    next_observation: np.ndarray
    terminated: np.ndarray
    next_index: np.ndarray
    checksum: str = ""

    def __post_init__(self):
        for name in FIELDS:
            getattr(self, name).flags.writeable = False
        if not self.checksum:
            digest = hashlib.sha256()
            for name in FIELDS:
                digest.update(np.ascontiguousarray(getattr(self, name)).tobytes())
            digest.update(np.asarray(self.next_index, np.int64).tobytes())
            self.checksum = digest.hexdigest()

    def __len__(self) -> int:
        return len(self.reward)

    @property
    def nbytes(self) -> int:
        return sum(np.asarray(getattr(self, name)).nbytes for name in (*FIELDS, "next_index"))

    def reference(self) -> Dict:
        """What a checkpoint keeps of it."""
        return {"source": self.source, "transitions": len(self), "checksum": self.checksum}


def load_recorded(source: str, spec: EnvSpec) -> RecordedData:
    """`source`'s recorded transitions, checked against `spec`'s env; TfsacError in one line."""
    if os.path.isdir(source):
        if os.path.isfile(os.path.join(source, CONFIG_FILE)):
            return _from_run_dir(source, spec)
        episodes = _read_dir(source)
    elif os.path.exists(source):
        raise TfsacError(f"offline_data {source!r} is a file, not a folder of recorded data")
    # Minari ids have slashes too: a relative name whose first part is no folder here.
    elif os.sep in source and (os.path.isabs(source) or os.path.isdir(source.split(os.sep)[0])):
        raise TfsacError(f"offline_data {source!r}: no such folder")
    else:
        episodes = _minari(source, None)
    return checked(source, episodes, spec)


def _read_dir(source: str) -> Episodes:
    if os.path.isfile(os.path.join(source, NPZ_META_FILE)):
        return _from_npz(source)
    for data in (os.path.join(source, "data"), source):
        if os.path.isfile(os.path.join(data, "metadata.json")):
            return _minari(source, data)
    raise TfsacError(
        f"offline_data {source!r} holds no recorded data: no {NPZ_META_FILE} (.npz episodes), "
        f"no Minari metadata.json, no {CONFIG_FILE} (a tfsac run)"
    )


def _from_npz(source: str) -> Episodes:
    try:
        with open(os.path.join(source, NPZ_META_FILE)) as f:
            meta = json.load(f)
        if meta.get("format") != NPZ_FORMAT:
            raise ValueError(f"format {meta.get('format')!r}, not {NPZ_FORMAT!r}")
        if not isinstance(meta.get("env_id"), str):
            raise ValueError(f"env_id {meta.get('env_id')!r} is not an env id")
        low, high = (np.asarray(meta[k], np.float64) for k in ("action_low", "action_high"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise TfsacError(f"offline_data {source!r}: unreadable {NPZ_META_FILE}: {e}") from None
    episodes = []
    for path in sorted(glob.glob(os.path.join(glob.escape(source), "episode_*.npz"))):
        try:
            with np.load(path) as npz:
                episodes.append({k: npz[k] for k in EPISODE_FIELDS})
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            name, why = os.path.basename(path), str(e)
            if not zipfile.is_zipfile(path):  # numpy guessed a pickle: not one to load
                why = "not an .npz archive of arrays"
            elif "allow_pickle" in why:
                why = "it holds object arrays: save numeric arrays"
            raise TfsacError(
                f"offline_data {source!r}: corrupt episode file {name}: {why}"
            ) from None
    return Episodes("npz", meta["env_id"], low, high, episodes)


def _no_dataset(source: str, root: str) -> TfsacError:
    return TfsacError(
        f"offline_data {source!r}: no such folder, and no Minari dataset of that id in {root} "
        f"(a folder that moved: name it where it is now, also on --resume; a public dataset: "
        f"`minari download {source}`)"
    )


def _minari(source: str, data_path: Optional[str]) -> Episodes:
    """A Minari dataset by id (in Minari's datasets folder) or by its folder."""
    try:
        import minari  # the optional extra .[offline]
    except ImportError:
        raise TfsacError(
            f"offline_data {source!r}: no such folder, and minari, which would read it as a "
            "Minari dataset id, is not installed (pip install 'tfsac[offline]', or "
            '-e ".[offline]" in a checkout)'
        ) from None
    # Minari's datasets folder, as minari.storage.get_dataset_path names it (unmade).
    default = os.path.join(os.path.expanduser("~"), ".minari", "datasets")
    root = os.environ.get("MINARI_DATASETS_PATH") or default
    if data_path is None and not os.path.isdir(os.path.dirname(os.path.join(root, source))):
        raise _no_dataset(source, root)  # before minari, which makes its datasets folder
    try:
        dataset = (
            minari.load_dataset(source) if data_path is None else minari.MinariDataset(data_path)
        )
        spec, space = dataset.spec.env_spec, dataset.action_space
        episodes = [
            {k: _arrays(getattr(e, k)) for k in EPISODE_FIELDS} for e in dataset.iterate_episodes()
        ]
    except FileNotFoundError:
        raise _no_dataset(source, root) from None
    except Exception as e:  # noqa: BLE001 - h5py, pyarrow and json errors of a damaged dataset
        raise TfsacError(f"offline_data {source!r}: unreadable Minari dataset: {e}") from None
    if not hasattr(space, "low") or len(getattr(space, "shape", ()) or ()) != 1:
        raise TfsacError(f"offline_data {source!r} has action space {space}; SAC needs a Box")
    env_id = spec.id if spec is not None else None
    return Episodes("minari", env_id, space.low, space.high, episodes)


def _from_run_dir(source: str, spec: EnvSpec) -> RecordedData:
    """The replay of a run's newest checkpoint that reads (as a resume takes it), memory-mapped."""
    try:
        with open(os.path.join(source, CONFIG_FILE)) as f:
            env_id = json.load(f)["env_id"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TfsacError(f"offline_data {source!r}: unreadable {CONFIG_FILE}: {e}") from None
    _same_env(source, env_id, spec)
    folder = os.path.join(source, CHECKPOINTS_DIR)
    steps = checkpoint_steps(folder)  # newest first, as a resume would take them
    if not steps:
        raise TfsacError(f"offline_data {source!r}: a tfsac run without checkpoints")
    errors = []
    for step in steps:
        try:
            fields, ref = _checkpoint_replay(folder, step, spec)
            break
        except (OSError, ValueError, KeyError, IndexError, TypeError, EOFError) as e:
            errors.append(f"ckpt-{step}: {e}" if len(steps) > 1 else str(e))
    else:
        raise TfsacError(f"offline_data {source!r}: corrupt checkpoint replay: {errors[0]}")
    if errors:  # said only where an older checkpoint's replay is taken instead
        logging.warning(
            "offline_data %s: its newest checkpoints' replays are unreadable (%s): reading "
            "ckpt-%d's instead (a run that recorded a newer one's checksum will not resume on "
            "it)",
            source,
            "; ".join(errors),
            step,
        )
    if len(ref) == 0:
        raise TfsacError(f"offline_data {source!r} is empty: its checkpoint holds no transitions")
    # The checks recorded episodes get (a replay file edited or damaged by hand).
    if not all(np.isfinite(values).all() for values in fields.values()):
        raise TfsacError(f"offline_data {source!r}: non-finite values in its checkpoint replay")
    if np.abs(fields["action"]).max() > 1.0 + BOUNDS_SLACK:
        raise TfsacError(f"offline_data {source!r}: replay actions outside [-1, 1]")
    return RecordedData(source=source, kind="run", **fields, next_index=ref)


def _checkpoint_replay(folder: str, step: int, spec: EnvSpec):
    """(fields, next_index: len where no row continues) of checkpoint `step`'s replay."""
    extra = os.path.join(folder, f"ckpt-{step}.extra")
    with open(os.path.join(extra, CHECKPOINT_STATE_FILE)) as f:
        capacity = int(json.load(f)["replay"]["capacity"])
    arrays = {
        name: np.load(os.path.join(extra, f"{name}.npy"), mmap_mode="r")
        for name in TRANSITION_ARRAYS
    }
    fields, ref = saved_transitions(arrays, capacity, spec.obs_dim, spec.action_dim)
    return fields, np.where(ref >= capacity, len(ref), ref)


def _arrays(value):
    """A field's arrays; Dict and Tuple observations stay one array per key or entry."""
    if isinstance(value, dict):
        return {k: _arrays(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_arrays(v) for v in value)
    return np.asarray(value)


def _same_env(source: str, env_id: Optional[str], spec: EnvSpec) -> None:
    # 'my_module:MyEnv-v0' and the 'MyEnv-v0' it registers are the same env.
    if env_id is not None and env_id.split(":")[-1] != spec.env_id.split(":")[-1]:
        raise TfsacError(
            f"offline_data {source!r} was recorded on {env_id}, this run's env is {spec.env_id}"
        )


def checked(source: str, data: Episodes, spec: EnvSpec) -> RecordedData:
    """Episodes checked against the env, as RecordedData with actions in [-1, 1]."""
    _same_env(source, data.env_id, spec)
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    recorded_low, recorded_high = data.action_low, data.action_high
    if recorded_low is not None:
        if np.shape(recorded_low) != low.shape or np.shape(recorded_high) != high.shape:
            raise TfsacError(
                f"offline_data {source!r} has action bounds of shapes {np.shape(recorded_low)} "
                f"and {np.shape(recorded_high)}, the env's are {low.shape}"
            )
        if not (np.allclose(recorded_low, low) and np.allclose(recorded_high, high)):
            raise TfsacError(
                f"offline_data {source!r} has action bounds [{_text(recorded_low)}, "
                f"{_text(recorded_high)}], the env [{_text(low)}, {_text(high)}]"
            )
    space = space_from_json(spec.observation_space_json) if spec.observation_space_json else None
    episodes = [_episode_rows(source, n, e, spec, space) for n, e in enumerate(data.episodes)]
    if not sum(len(rows[2]) for rows in episodes):
        raise TfsacError(f"offline_data {source!r} is empty: no transitions")
    obs, action, reward, next_obs, ended = (np.concatenate(p) for p in zip(*episodes, strict=True))
    # A dimension of zero width is 0, as the policy's 0 maps to its one value.
    fixed = high <= low
    unit = 2.0 * (action - low) / np.where(fixed, 1.0, high - low) - 1.0
    unit[:, fixed] = np.where(action[:, fixed] == low[fixed], 0.0, np.inf)  # inf: refused
    if np.any(np.abs(unit) > 1.0 + BOUNDS_SLACK):
        raise TfsacError(
            f"offline_data {source!r} has actions outside the env's bounds [{_text(low)}, "
            f"{_text(high)}]"
        )
    rows = np.arange(len(reward))
    return RecordedData(
        source=source,
        kind=data.kind,
        observation=obs,
        action=np.clip(unit, -1.0, 1.0).astype(np.float32),
        reward=reward,
        next_observation=next_obs,
        terminated=ended[:, 0].astype(np.float32),
        next_index=np.where(ended.any(axis=1), len(reward), rows + 1),
    )


def _episode_rows(source: str, n: int, episode: Dict, spec: EnvSpec, space=None):
    """(obs, actions, rewards, next obs, [terminated, ended]) of one episode, checked."""
    where = f"offline_data {source!r}, episode {n}"
    for name in EPISODE_FIELDS:
        dtype = getattr(episode[name], "dtype", np.dtype(object))
        if not isinstance(episode[name], (dict, tuple)) and dtype.kind not in "biuf":
            raise TfsacError(f"{where}: {name} of dtype {dtype}, not numbers")
    if np.ndim(episode["rewards"]) != 1:
        raise TfsacError(
            f"{where}: rewards of shape {np.shape(episode['rewards'])}, not one per step"
        )
    steps, obs = len(episode["rewards"]), episode["observations"]
    if isinstance(obs, (dict, tuple)):  # flattened as make_env's
        if not isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
            raise TfsacError(f"{where}: Dict or Tuple observations, the env's are {space}")
        try:
            batched = gym.vector.utils.batch_space(space, steps + 1)
            obs = [gym.spaces.flatten(space, o) for o in gym.vector.utils.iterate(batched, obs)]
        except (KeyError, IndexError, ValueError, TypeError) as e:
            error = f"{where}: observations that do not fit the env's {space}: {e}"
            raise TfsacError(error) from None
    with np.errstate(over="ignore"):  # beyond float32's range: refused as non-finite
        obs = np.asarray(obs, np.float32)
    if obs.ndim != 2 or obs.shape[1] != spec.obs_dim:
        raise TfsacError(
            f"{where}: observations of shape {obs.shape[1:]}, the env's are ({spec.obs_dim},)"
        )
    action = np.asarray(episode["actions"], np.float64)
    if action.shape != (steps, spec.action_dim) or len(obs) != steps + 1:
        raise TfsacError(
            f"{where}: {steps} rewards, actions of shape {action.shape} and {len(obs)} "
            f"observations; the env's actions are ({spec.action_dim},)"
        )
    flags = [np.asarray(episode[k]).reshape(-1) for k in ("terminations", "truncations")]
    if not all(np.isin(f, (0, 1)).all() for f in flags):  # NaN or 0.5 read as True
        raise TfsacError(f"{where}: terminations and truncations must be 0 or 1 (booleans)")
    term, trunc = (f.astype(bool) for f in flags)
    if len(term) != steps or len(trunc) != steps or np.any((term | trunc)[:-1]):
        raise TfsacError(
            f"{where}: terminations and truncations must mark only the episode's last step"
        )
    with np.errstate(over="ignore"):  # float64 beyond float32's range: refused below
        reward = np.asarray(episode["rewards"], np.float32).reshape(-1)
    if not all(np.all(np.isfinite(a)) for a in (obs, action, reward)):
        raise TfsacError(f"{where}: non-finite observations, actions or rewards")
    # The last row ends the episode (whatever its flags: a recording stopped there).
    ended = np.zeros((steps, 2), bool)
    ended[:, 0] = term
    ended[-1:, 1] = True
    return obs[:-1], action, reward, obs[1:], ended


def _text(bounds) -> str:
    values = np.unique(np.asarray(bounds, np.float64))
    return f"{values[0]:g}" if len(values) == 1 else ",".join(f"{v:g}" for v in np.ravel(bounds))


def check_checkpoint_data(data: RecordedData, saved: Optional[Dict], prefix: str) -> None:
    """Refuses a resume whose offline_data is not what checkpoint `prefix` trained with."""
    if saved is None or saved["checksum"] != data.checksum:
        what = "no recorded data"
        if saved is not None:
            what = f"{saved['transitions']} recorded transitions ({saved['checksum'][:12]})"
        raise TfsacError(
            f"checkpoint {prefix} was trained with {what}; offline_data {data.source!r} now "
            f"holds {len(data)} ({data.checksum[:12]}): restore that data or start a new run "
            "directory"
        )
