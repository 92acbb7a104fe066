"""Checkpoints that survive kills, in <run_dir>/checkpoints/: ckpt-<step>.index/.data-* (the
learner's TF state, via tf.train.CheckpointManager, whose state file `checkpoint` names the
latest), ckpt-<step>.extra/ (the replay buffer's .npy arrays and state.json, fsynced in a temp
folder and renamed into place before the TF files) and broken/ (those that did not restore)."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import time
from typing import Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from absl import logging

from tfsac.algorithm.learner import SACLearner
from tfsac.algorithm.network_checks import check_saved
from tfsac.data.replay import ReplayBuffer
from tfsac.deploy.loading import (
    STATE_FILE,
    CheckpointMismatch,
    CheckpointReader,
    restore_checkpoint,
)
from tfsac.errors import Fault, TfsacError
from tfsac.files import new_file

INDEX_FILE = "checkpoint"  # CheckpointManager's state file
BROKEN_DIR = "broken"


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: str, data) -> None:
    with new_file(path, "wb") as f:
        if isinstance(data, bytes):
            f.write(data)
        else:
            np.save(f, data)  # streams a (strided) column view: no copy of the buffer
        f.flush()
        os.fsync(f.fileno())


class Checkpointer(CheckpointReader):
    """Saves and restores a run's complete training state under `directory`."""

    def __init__(self, directory: str, learner: SACLearner, max_to_keep: int = 3):
        super().__init__(directory, learner)
        self.learner, self.max_to_keep = learner, max_to_keep
        check_saved(learner, "cannot checkpoint this run")  # before it trains: networks built
        self._new_manager()

    def _new_manager(self) -> None:  # the folder is made by the first save
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, self.directory, max_to_keep=self.max_to_keep, checkpoint_name="ckpt"
        )

    @property
    def latest(self) -> Optional[str]:
        return self.manager.latest_checkpoint

    def check_newest(self, known: Optional[str]) -> None:
        """A Fault unless the newest complete checkpoint is `known` (this process's last)."""
        newest = next(iter(self.candidates()), None)
        names = [p and os.path.basename(p) for p in (newest, known)]
        if names[0] != names[1]:
            raise Fault(
                f"the run in {os.path.dirname(self.directory)!r} changed since this Trainer "
                f"was built (its newest checkpoint is {names[0] or 'none'}, this Trainer's "
                f"{names[1] or 'none'}): build the Trainer again (resume=True) to go on from it"
            )

    def restore_newest(self, buffer: ReplayBuffer) -> Optional[Tuple[str, Dict]]:
        """(prefix, saved state) of the newest checkpoint that restores into the learner and
        `buffer` (each damaged one before it moved to broken/), or None."""
        for prefix in self.candidates():
            try:
                state = self.restore(prefix, buffer)
            except CheckpointMismatch:  # whole, of other networks: refused, kept in place
                raise
            except TfsacError as e:
                self._set_aside(prefix, e)
                continue
            self._write_index(prefix)
            return prefix, state
        if os.path.exists(os.path.join(self.directory, INDEX_FILE)):
            self._write_index(None)  # it named checkpoints that are gone or broken
        return None

    def _set_aside(self, prefix: str, error: TfsacError) -> None:
        broken = os.path.join(self.directory, BROKEN_DIR)
        os.makedirs(broken, exist_ok=True)
        stamp = ""  # a name already set aside: this one's with the time
        if os.path.exists(os.path.join(broken, os.path.basename(prefix) + ".index")):
            stamp = f".{int(time.time())}"
        for path in glob.glob(glob.escape(prefix) + ".*"):
            os.replace(path, os.path.join(broken, os.path.basename(path) + stamp))
        logging.warning("skipping a damaged checkpoint: %s; moved to %s", error, broken)

    def _write_index(self, latest: Optional[str]) -> None:
        """Makes the state file name `latest` and the checkpoints before it (None: removes it)."""
        path = os.path.join(self.directory, INDEX_FILE)
        if latest is None:
            os.remove(path)
        else:
            step = int(latest.rsplit("-", 1)[1])
            older = [p for p in reversed(self.candidates()) if int(p.rsplit("-", 1)[1]) < step]
            if self.manager.checkpoints != [*older, latest]:
                # The CheckpointState text proto: relative paths (the run dir can move), and
                # timestamps (the manager prunes only those after last_preserved_timestamp).
                older.append(latest)
                times = [os.path.getmtime(p + ".index") for p in older]
                lines = [f'model_checkpoint_path: "{os.path.basename(latest)}"']
                lines += [f'all_model_checkpoint_paths: "{os.path.basename(p)}"' for p in older]
                lines += [f"all_model_checkpoint_timestamps: {t!r}" for t in times]
                lines.append(f"last_preserved_timestamp: {min(times) - 1.0!r}")
                _write_synced(path + ".tmp", ("\n".join(lines) + "\n").encode())
                os.replace(path + ".tmp", path)
        self._new_manager()

    def save(
        self, step: int, buffer: ReplayBuffer, state: Dict, blobs: Optional[Dict] = None
    ) -> str:
        """Writes the checkpoint for `step` (with `blobs`, {file name: bytes}, in its
        sidecar); returns its prefix. A Fault on I/O failure keeps the previous one."""
        check_saved(self.learner, f"cannot checkpoint step {step}")
        prefix = os.path.join(self.directory, f"ckpt-{step}")
        extra = self.extra_dir(prefix)
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step}.extra")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            arrays = buffer.state_arrays()
            state = dict(
                state,
                step=int(step),
                replay={
                    "arrays": list(arrays),
                    "size": len(buffer),
                    "cursor": buffer.cursor,
                    "capacity": buffer.capacity,
                    "rng": buffer.rng.bit_generator.state,
                },
            )
            files = {**{f"{name}.npy": array for name, array in arrays.items()}, **(blobs or {})}
            files[STATE_FILE] = json.dumps(state).encode()
            for name, data in files.items():
                _write_synced(os.path.join(tmp, name), data)
            _fsync_dir(tmp)
            shutil.rmtree(extra, ignore_errors=True)  # an orphan from a killed save
            os.rename(tmp, extra)
            _fsync_dir(self.directory)
            self.step.assign(step)
            path = self.manager.save(checkpoint_number=step)
        except (OSError, tf.errors.OpError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            reason = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
            raise Fault(
                f"cannot write checkpoint for step {step} in {self.directory!r}: {reason}; "
                f"the previous checkpoint ({self.latest or 'none'}) is kept"
            ) from None
        names = os.listdir(self.directory)  # sidecars the manager pruned, killed saves' temps
        for name in names:
            match = re.fullmatch(r"(ckpt-\d+)\.extra", name)
            if (match and f"{match.group(1)}.index" not in names) or name.startswith(".tmp-ckpt-"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
        return path

    def read_blob(self, prefix: str, name: str) -> Optional[bytes]:
        try:
            with open(os.path.join(self.extra_dir(prefix), name), "rb") as f:
                return f.read()
        except OSError:
            return None

    def restore(self, prefix: str, buffer: ReplayBuffer) -> Dict:
        state = self.read_state(prefix)
        restore_checkpoint(self.checkpoint, prefix, "all")
        replay = state["replay"]
        if replay["capacity"] != buffer.capacity:  # its config's buffer_size is this run's
            raise Fault(
                f"checkpoint {prefix!r} has a replay capacity of {replay['capacity']}, "
                f"this run {buffer.capacity}"
            )
        extra = self.extra_dir(prefix)
        try:
            arrays = {
                name: np.load(os.path.join(extra, f"{name}.npy"), mmap_mode="r")
                for name in replay["arrays"]
            }
            buffer.load_state_arrays(arrays, replay["size"], replay["cursor"])
        except (OSError, ValueError, EOFError) as e:  # EOFError: an empty .npy file
            raise Fault(f"checkpoint {prefix!r} has a corrupt replay buffer: {e}") from None
        buffer.rng.bit_generator.state = replay["rng"]
        return state
