"""What recorded transitions are in tfsac: the episodes a source holds (`Episodes`, env
units) and the checked, read-only transitions a run samples (`RecordedData`, replay units).
The .npz layout that scripts/collect.py writes is in docs/guide/recorded-data.md."""

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
