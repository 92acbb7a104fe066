"""Checkpoints that survive kills: learner state through tf.train.CheckpointManager, the
replay buffer and the loop's Python state in a sidecar folder per checkpoint.

Layout of <run_dir>/checkpoints/:
  checkpoint                    CheckpointManager's state file (names the latest)
  ckpt-<step>.index/.data-*     actor, critics, targets (V and target V for v1), optimizers
                                with slots, log-alpha, gSDE noise, TF RNG states, step counter
  ckpt-<step>.extra/            replay arrays (.npy, the filled rows only), state.json

Write order makes every save atomic: the sidecar is written to a hidden temp folder,
fsynced and renamed into place first; then the manager writes the TF files and only then
rewrites its state file (itself by temp file + rename). A process killed at any moment
leaves `latest` pointing at a complete checkpoint; orphans are removed by the next save.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from tfsac.errors import TfsacError, first_line
from tfsac.learner import SACLearner
from tfsac.replay import FIELDS, ReplayBuffer

REPLAY_FIELDS = FIELDS
STATE_FILE = "state.json"
# Config fields that change the shape of the saved state: a checkpoint made with other
# values cannot be restored into this run.
STRUCTURAL_FIELDS = (
    "env_id",
    "hidden_sizes",
    "num_critics",
    "critic_layer_norm",
    "use_log_alpha",
    "buffer_size",
    "variant",
    "use_sde",
)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _save_array(path: str, array: np.ndarray) -> None:
    # np.save streams the (strided) column view to the file in small chunks: no copy of
    # the buffer.
    with open(path, "wb") as f:
        np.save(f, array)
        f.flush()
        os.fsync(f.fileno())


class Checkpointer:
    """Saves and restores a run's complete training state under `directory`."""

    def __init__(self, directory: str, learner: SACLearner, max_to_keep: int = 3):
        self.directory = directory
        self.step = tf.Variable(0, dtype=tf.int64, name="step")
        self.checkpoint = tf.train.Checkpoint(step=self.step, **learner.checkpoint_objects())
        # The folder is made by the first save: a start refused after this leaves none.
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=max_to_keep, checkpoint_name="ckpt"
        )

    @property
    def latest(self) -> Optional[str]:
        return self.manager.latest_checkpoint

    def latest_to_restore(self) -> Optional[str]:
        """`latest`, or None when the directory holds no checkpoint; raises TfsacError when
        it holds checkpoints but its index file, which names the latest, is missing or
        unreadable (starting over would overwrite them)."""
        prefix = self.latest
        if prefix is None and glob.glob(os.path.join(self.directory, "ckpt-*")):
            raise TfsacError(
                f"cannot tell which checkpoint in {self.directory!r} is the latest: its "
                "'checkpoint' index file is missing or unreadable"
            )
        return prefix

    @staticmethod
    def extra_dir(prefix: str) -> str:
        return prefix + ".extra"

    def save(self, step: int, buffer: ReplayBuffer, state: Dict) -> str:
        """Writes the checkpoint for `step`; returns its prefix. Raises TfsacError on I/O
        failure, leaving the previous checkpoint as the latest."""
        prefix = os.path.join(self.directory, f"ckpt-{step}")
        extra = self.extra_dir(prefix)
        tmp = os.path.join(self.directory, f".tmp-ckpt-{step}.extra")
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            n = len(buffer)
            for name in REPLAY_FIELDS:
                _save_array(os.path.join(tmp, f"{name}.npy"), getattr(buffer, name)[:n])
            state = dict(
                state,
                step=int(step),
                replay={
                    "size": n,
                    "cursor": buffer.cursor,
                    "capacity": buffer.capacity,
                    "rng": buffer.rng.bit_generator.state,
                },
            )
            with open(os.path.join(tmp, STATE_FILE), "w") as f:
                json.dump(state, f)
                f.flush()
                os.fsync(f.fileno())
            _fsync_dir(tmp)
            shutil.rmtree(extra, ignore_errors=True)  # an orphan from a killed save
            os.rename(tmp, extra)
            _fsync_dir(self.directory)
            self.step.assign(step)
            path = self.manager.save(checkpoint_number=step)
        except (OSError, tf.errors.OpError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            reason = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
            raise TfsacError(
                f"cannot write checkpoint for step {step} in {self.directory!r}: {reason}; "
                f"the previous checkpoint ({self.latest or 'none'}) is kept"
            ) from None
        self._remove_orphans()
        return path

    def _remove_orphans(self) -> None:
        """Deletes sidecars (and temp folders) of checkpoints the manager no longer keeps."""
        kept = {os.path.basename(p) for p in self.manager.checkpoints}
        for name in os.listdir(self.directory):
            match = re.fullmatch(r"(ckpt-\d+)\.extra", name)
            if (match and match.group(1) not in kept) or name.startswith(".tmp-ckpt-"):
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    def read_state(self, prefix: str) -> Dict:
        try:
            with open(os.path.join(self.extra_dir(prefix), STATE_FILE)) as f:
                return json.load(f)
        except (OSError, ValueError) as e:
            raise TfsacError(f"checkpoint {prefix!r} is incomplete or corrupt: {e}") from None

    def restore_learner(self, prefix: str) -> None:
        """Restores only the learner's state (for evaluation: no replay buffer)."""
        try:
            self.checkpoint.restore(prefix).expect_partial()
        except (tf.errors.OpError, AssertionError, ValueError, IndexError, KeyError) as e:
            raise TfsacError(f"checkpoint {prefix!r} cannot be restored: {first_line(e)}") from None

    def restore(self, prefix: str, buffer: ReplayBuffer) -> Dict:
        """Restores learner and buffer from `prefix`; returns the saved loop state."""
        state = self.read_state(prefix)
        try:
            self.checkpoint.restore(prefix).assert_consumed()
        except (tf.errors.OpError, AssertionError, ValueError, IndexError, KeyError) as e:
            raise TfsacError(f"checkpoint {prefix!r} cannot be restored: {first_line(e)}") from None
        replay = state["replay"]
        if replay["capacity"] != buffer.capacity:
            raise TfsacError(
                f"checkpoint {prefix!r} has a replay capacity of {replay['capacity']}, "
                f"this run {buffer.capacity}"
            )
        n = replay["size"]
        extra = self.extra_dir(prefix)
        try:
            for name in REPLAY_FIELDS:
                # Memory-mapped read, copied straight into the preallocated arrays.
                saved = np.load(os.path.join(extra, f"{name}.npy"), mmap_mode="r")
                if saved.shape[0] != n or saved.shape[1:] != getattr(buffer, name).shape[1:]:
                    raise ValueError(f"{name}.npy has shape {saved.shape}")
                getattr(buffer, name)[:n] = saved
        except (OSError, ValueError) as e:
            raise TfsacError(f"checkpoint {prefix!r} has a corrupt replay buffer: {e}") from None
        buffer.size, buffer.cursor = n, replay["cursor"]
        buffer.rng.bit_generator.state = replay["rng"]
        return state


def check_compatible(saved_config: Dict, config_dict: Dict, prefix: str) -> None:
    """Raises TfsacError naming the first structural field that differs."""
    # gSDE keeps one exploration matrix per env copy.
    fields = STRUCTURAL_FIELDS + (("num_envs",) if config_dict.get("use_sde") else ())
    for field in fields:
        saved, current = saved_config.get(field), config_dict.get(field)
        if isinstance(saved, list):
            saved = tuple(saved)
        if isinstance(current, list):
            current = tuple(current)
        if saved != current:
            raise TfsacError(
                f"checkpoint {prefix} was made with {field}={saved!r}, this run has "
                f"{field}={current!r}; use another --run_dir or the same {field}"
            )
