"""A run directory's format: file names, JSON written atomically and read back, folder checks."""

from __future__ import annotations

import errno
import json
import numbers
import os
import re
import tempfile
from typing import Dict, List, Optional

from tfsac.config import SACConfig
from tfsac.errors import TfsacError
from tfsac.paths import PLAIN_NAME, name_problem

CONFIG_FILE = "config.json"
# The env as the networks and exports saw it (data.spaces.EnvSpec): loads a run without its env.
ENV_SPEC_FILE = "env_spec.json"
PROGRESS_FILE = "progress.csv"
SUMMARY_FILE = "summary.json"
TENSORBOARD_DIR = "tensorboard"
CHECKPOINTS_DIR = "checkpoints"
CHECKPOINT_STATE_FILE = "state.json"  # in a checkpoint's sidecar folder: the loop's state
VIDEOS_DIR = "videos"
PROGRESS_FIELDS = ("step", "episodes", "episode_return", "episode_length", "env_steps_per_s")


def check_writable(directory: str) -> None:
    """TfsacError unless `directory` can be created and written to (made folders are removed)."""
    if os.path.lexists(directory) and not os.path.isdir(directory):  # makedirs: "File exists"
        raise TfsacError(f"cannot write to {directory!r}: it exists and is not a folder")
    # Walked as written, not normalised: 'new/../x' makes 'new' too.
    missing = []
    path = directory.rstrip(os.sep + (os.altsep or "")) or directory
    while path and not os.path.lexists(path) and os.path.dirname(path) != path:
        if os.path.basename(path) not in (os.curdir, os.pardir):
            missing.append(path)
        path = os.path.dirname(path)
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".tfsac-write-check-"):
            pass
    except OSError as e:
        raise TfsacError(f"cannot write to {directory!r}: {e.strerror or e}") from None
    finally:
        for path in missing:
            try:
                os.rmdir(path)
            except OSError:  # not created after all, or no longer empty
                pass


def check_outside_exports(path: str, what: str, model_dir: Optional[str] = None) -> None:
    """TfsacError where folder `path` (`what` names it) is or lies inside an exported model
    (a SavedModel, a served version folder, or `model_dir`): TF Serving would serve it."""
    target = folder = os.path.realpath(path)
    model = os.path.realpath(model_dir) if model_dir else None
    while True:
        if where := _export_at(folder, model):
            relation = "is" if folder == target else "is inside"
            raise TfsacError(
                f"{what} {path!r} {relation} {where}, which TF Serving serves: choose a {what} "
                "outside exported models"
            )
        if os.path.dirname(folder) == folder:
            return
        folder = os.path.dirname(folder)


def _export_at(folder: str, model: Optional[str]) -> Optional[str]:
    """What exported model the absolute `folder` is, said; None where it is none."""
    parent = os.path.dirname(folder)
    if os.path.isfile(os.path.join(folder, "saved_model.pb")):
        return f"the SavedModel {_shown(folder)!r}"
    if _VERSION_NAME.fullmatch(os.path.basename(folder)) and model_versions(parent, True):
        return f"version folder {_shown(folder)!r} of the model folder {_shown(parent)!r}"
    if folder == model:
        return f"the model folder {_shown(folder)!r} the run exports to"
    return None


def _shown(folder: str) -> str:
    """An absolute folder as the user named it: relative where it is under the current one."""
    relative = os.path.relpath(folder)
    return folder if relative.startswith(os.pardir) else relative


def default_model_name(env_id: str) -> str:
    """'HalfCheetah-v5' -> 'halfcheetah_v5' (a name TF Serving accepts in URLs)."""
    return re.sub(r"[^a-z0-9]+", "_", env_id.lower()).strip("_") or "policy"


_VERSION_NAME = re.compile(r"[0-9]+")
_INDEX_NAME = re.compile(r"ckpt-([0-9]+)\.index")


def model_versions(model_dir: str, servable: bool = False) -> List[str]:
    """The version folders (int64 digits, '007' is 7) in TF Serving's model folder, by version;
    with `servable` only those holding a saved_model.pb."""
    try:
        names = [n for n in os.listdir(model_dir) if _VERSION_NAME.fullmatch(n)]
    except OSError:
        return []
    names = [
        n
        for n in names
        if int(n) < 2**63
        and os.path.isdir(os.path.join(model_dir, n))
        and (not servable or os.path.isfile(os.path.join(model_dir, n, "saved_model.pb")))
    ]
    return sorted(names, key=int)


def checkpoint_steps(checkpoints_dir: str) -> List[int]:
    """The env steps of the checkpoints with an index file (TF's last), newest first."""
    try:
        names = os.listdir(checkpoints_dir)
    except OSError:
        return []
    return sorted((int(m.group(1)) for m in map(_INDEX_NAME.fullmatch, names) if m), reverse=True)


def run_config(run_dir: str, need_checkpoint: bool = False, step: Optional[int] = None):
    """The SACConfig of the run in `run_dir`; TfsacError where it holds none, or with
    `need_checkpoint` where it has no checkpoint (of env step `step`, where named)."""
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Integral)):
        raise TfsacError(f"step must be a whole number (an env step), got {step!r}")
    try:
        with open(os.path.join(run_dir, CONFIG_FILE)) as f:
            config = SACConfig.from_dict(json.load(f))
    except (OSError, ValueError, TypeError, TfsacError) as e:
        if os.path.isfile(os.path.join(run_dir, "saved_model.pb")):
            raise TfsacError(
                f"{run_dir!r} is an exported SavedModel, not a run directory: name it with "
                "--saved_model (or Policy.load)"
            ) from None
        raise TfsacError(f"{run_dir!r} is not a tfsac run directory: {e}") from None
    folder = os.path.join(run_dir, CHECKPOINTS_DIR)
    steps = checkpoint_steps(folder)
    if need_checkpoint and not steps:
        raise TfsacError(f"no checkpoint that restores in {folder!r}")
    if need_checkpoint and step is not None and step not in steps:
        kept = ", ".join(map(str, steps))
        raise TfsacError(f"no checkpoint of step {step} in {folder!r} (steps: {kept})")
    return config


def read_json(path: str, default=None):
    """The JSON in `path`, `default` where there is no such file; TfsacError if unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as e:
        raise TfsacError(f"cannot read {path}: {e}") from None


# Where the system has it (not on Windows): opening a symbolic link fails (ELOOP).
NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)


def new_file(path: str, mode: str = "w"):
    """`path` opened as a new file: whatever was there (a link too) removed, never followed."""
    if os.path.lexists(path):
        os.remove(path)
    # O_EXCL: created here, even where something appeared since (it does not follow links).
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), mode)


def open_in_place(path: str, mode: str = "a"):
    """`path` opened to append ('a') or rewrite ('w') in place; TfsacError at a symbolic link."""
    how = os.O_APPEND if mode == "a" else os.O_TRUNC
    fd = open_no_follow(path, os.O_WRONLY | os.O_CREAT | how)
    return os.fdopen(fd, mode, newline="")


def open_no_follow(path: str, flags: int) -> int:
    """os.open(path, flags), never through a symbolic link: TfsacError there."""
    try:
        if not NO_FOLLOW and os.path.islink(path):  # no O_NOFOLLOW (Windows): asked first
            raise OSError(errno.ELOOP, "a symbolic link")
        return os.open(path, flags | NO_FOLLOW, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TfsacError(
                f"{path} is a symbolic link: tfsac writes only inside the folders you name, "
                "never through a link; remove the link to continue"
            ) from None
        raise


def write_atomic(path: str, text: str) -> None:
    """Writes `text` to `path` through a temporary file, so readers never see half a file."""
    tmp = f"{path}.tmp"
    with new_file(tmp) as f:
        f.write(text)
    os.replace(tmp, path)


def write_json(path: str, data: Dict) -> None:
    """Writes JSON atomically (`write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=2))


class RunDir:
    """Paths inside one run directory."""

    def __init__(self, path: str):
        self.path = path

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def holds_a_run(self) -> bool:
        """Whether it has files of an earlier run (which a new run would overwrite)."""
        names = (CONFIG_FILE, SUMMARY_FILE, PROGRESS_FILE, CHECKPOINTS_DIR)
        return any(os.path.exists(self.file(name)) for name in names)

    def read_config(self) -> Optional[Dict]:
        """The run's config.json (a SACConfig dict), or None before a run started here."""
        return self._read(CONFIG_FILE)

    def missing_config(self) -> Optional[str]:
        """Why a resume cannot fill unset settings from config.json (a run without it), or None."""
        if os.path.exists(self.file(CONFIG_FILE)) or not self.holds_a_run():
            return None
        return (
            f"run directory {self.path!r} holds a run's files but no {CONFIG_FILE}, the "
            f"settings it was started with: restore that file (each checkpoint's "
            f"{CHECKPOINT_STATE_FILE} keeps them under 'config') or use another run directory"
        )

    def read_summary(self) -> Optional[Dict]:
        """The finished run's summary, or None while the run is not finished."""
        return self._read(SUMMARY_FILE)

    def _read(self, name: str) -> Optional[Dict]:
        data = read_json(self.file(name))
        if data is not None and not isinstance(data, dict):
            raise TfsacError(f"cannot read {self.file(name)}: not a JSON object")
        return data


def check_plain_name(what: str, name) -> str:
    """`name` where it is one plain path component; TfsacError naming `what` otherwise."""
    problem = name_problem(name)
    if problem is not None:
        raise TfsacError(f"{what} must be {PLAIN_NAME}, got {name!r}: {problem}")
    return name


def source_checkpoints(source: str):
    """(config, checkpoint prefixes to try, newest first) for init_from `source`: a run
    directory or one checkpoint's prefix (<run_dir>/checkpoints/ckpt-<step>)."""
    path = os.path.normpath(source)
    folder, name = os.path.split(path)
    step = None
    if os.path.basename(folder) == CHECKPOINTS_DIR and name.startswith("ckpt-"):
        path, step = os.path.dirname(folder), name[len("ckpt-") :]
        if not (step.isascii() and step.isdigit()):
            # One of a checkpoint's files: the checkpoint is their common prefix.
            prefix = re.fullmatch(r"(ckpt-[0-9]+)\.(index|extra|data-.*)", name)
            hint = f": name its prefix, {os.path.join(folder, prefix[1])}" if prefix else ""
            raise TfsacError(f"init_from {source!r}: not a checkpoint (ckpt-<env step>){hint}")
    try:
        config = run_config(path, need_checkpoint=True, step=None if step is None else int(step))
    except TfsacError as e:
        raise TfsacError(f"init_from: {e}") from None
    folder = os.path.join(path, CHECKPOINTS_DIR)
    steps = checkpoint_steps(folder) if step is None else [int(step)]
    return config, [os.path.join(folder, f"ckpt-{s}") for s in steps]
