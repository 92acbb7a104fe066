"""What recorded transitions are in tfsac (`--offline_data`): the episodes a source holds
(`Episodes`, in the env's units) and the checked, read-only transitions a run samples
(`RecordedData`, in replay units), with the .npz layout's names; reading and checking the
sources is tfsac/data/offline_data.py's.

The .npz layout (what scripts/collect.py --format=npz writes):

    <folder>/dataset.json        {"format": "tfsac-episodes/1", "env_id": ..., "action_low":
                                  [...], "action_high": [...], "observation_shape": [d],
                                  "env_kwargs": {...} (what collect.py made the env with)}
    <folder>/episode_<n>.npz     one episode of T steps, Minari's fields: observations
                                  [T+1, d], actions [T, a] (in the env's units), rewards [T],
                                  terminations [T], truncations [T] (a flag only at step T)

The data's identity, a SHA-256 over its arrays, is what a checkpoint keeps of it
(tfsac/data/mixed_replay.py); a resume finds the same data or refuses.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Dict, Optional, Sequence

import numpy as np

NPZ_FORMAT = "tfsac-episodes/1"
NPZ_META_FILE = "dataset.json"
EPISODE_FIELDS = ("observations", "actions", "rewards", "terminations", "truncations")
# RecordedData's read-only float arrays (its next_index is the links).
ARRAYS = ("observation", "action", "reward", "next_observation", "terminated")
# Recorded actions may sit this far outside the bounds (float rounding of a clip).
BOUNDS_SLACK = 1e-5


@dataclasses.dataclass
class Episodes:
    """What a source holds, in the env's units: episodes of Minari's fields, and what the
    source says about the env (None where it says nothing)."""

    kind: str  # "minari", "npz" or "run"
    env_id: Optional[str]
    action_low: Optional[np.ndarray]
    action_high: Optional[np.ndarray]
    episodes: Sequence[Dict[str, np.ndarray]]


@dataclasses.dataclass
class RecordedData:
    """Transitions in replay units, read-only: row i's next observation, and `next_index[i]`
    the row that continues its episode (len: none, after a termination or truncation)."""

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
        for name in ARRAYS:
            getattr(self, name).flags.writeable = False
        if not self.checksum:
            digest = hashlib.sha256()
            for name in ARRAYS:
                digest.update(np.ascontiguousarray(getattr(self, name)).tobytes())
            digest.update(np.asarray(self.next_index, np.int64).tobytes())
            self.checksum = digest.hexdigest()

    def __len__(self) -> int:
        return len(self.reward)

    @property
    def nbytes(self) -> int:
        """The bytes its arrays hold."""
        return sum(np.asarray(getattr(self, name)).nbytes for name in (*ARRAYS, "next_index"))

    def reference(self) -> Dict:
        """What a checkpoint keeps of it: where it came from, its size and checksum."""
        return {"source": self.source, "transitions": len(self), "checksum": self.checksum}
