"""Hindsight Experience Replay (Andrychowicz et al., 2017): episodes relabelled when sampled."""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional

import numpy as np

from tfsac.data.replay import ReplayBuffer, _checked, row_fields
from tfsac.data.spaces import GoalColumns, batched_rewards, column
from tfsac.errors import Fault

# Open episodes kept before the oldest is stored as it is (a restarted stream leaves one open).
MAX_OPEN_EPISODES = 1024


class HerReplayBuffer(ReplayBuffer):
    """A `ReplayBuffer` storing each episode once it ends, as one range of slots; a row
    continues the open episode whose last next observation is bitwise its observation. The
    first her_ratio share of each batch gets an achieved goal of its episode (by `strategy`)
    as desired goal, and the env's reward for it (empty infos, as SB3's)."""

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        action_dim: int,
        seed: int = 0,
        gamma: float = 0.99,
        *,
        columns: GoalColumns,
        compute_reward: Callable,
        strategy: str = "future",
        goals_per_transition: int = 4,
    ):
        super().__init__(capacity, obs_dim, action_dim, seed, n_steps=1, gamma=gamma)
        self.achieved = column(columns, "achieved_goal")
        self.desired = column(columns, "desired_goal")
        self.compute_reward, self.strategy = compute_reward, strategy
        self.her_ratio = 1.0 - 1.0 / (goals_per_transition + 1)  # SB3's her_ratio
        self.episode_start = np.zeros(self.capacity, np.int64)
        self.episode_length = np.zeros(self.capacity, np.int64)
        # Last next observation's bytes -> open episodes there, [(obs, action, ...)], oldest first.
        self._open: Dict[bytes, List[List[tuple]]] = {}

    @classmethod
    def bytes_per_row(cls, obs_dim: int, action_dim: int) -> int:
        """The ring's bytes per slot and its episode's first slot and length."""
        return super().bytes_per_row(obs_dim, action_dim) + 16

    def add_transitions(self, transitions) -> None:
        self.add(*transitions.as_tuple(), ended=transitions.ended)

    def add(self, observation, action, reward, next_observation, terminated, ended=None) -> None:
        """Adds transitions to open episodes, storing those that `ended` (default: terminated)."""
        rows = [np.asarray(x, np.float32) for x in (observation, action, reward)]
        rows += [np.asarray(next_observation, np.float32), np.asarray(terminated, np.float32)]
        if rows[2].ndim == 0:
            rows = [x[None] for x in rows]
        done = rows[4] != 0 if ended is None else np.asarray(ended, bool).reshape(-1)
        for i in range(len(rows[2])):
            row = tuple(x[i] for x in rows)
            episode = self._take(row[0].tobytes())
            episode.append(row)
            if done[i] or row[4]:
                self._store(episode)
            else:
                self._open.setdefault(row[3].tobytes(), []).append(episode)
        while len(self._open_list()) > MAX_OPEN_EPISODES:
            self._store(self._take(next(iter(self._open))))

    def _take(self, key: bytes) -> List[tuple]:
        """The oldest open episode ending at observation `key`, removed, or a new one."""
        waiting = self._open.get(key)
        if not waiting:
            return []
        episode = waiting.pop(0)
        if not waiting:
            del self._open[key]
        return episode

    def _open_list(self) -> List[List[tuple]]:
        return [episode for waiting in self._open.values() for episode in waiting]

    def cut_episodes(self) -> None:
        """Stores the open episodes as they are: their streams start new episodes."""
        for episode in self._open_list():
            self._store(episode)
        self._open.clear()

    def _store(self, episode: List[tuple]) -> None:
        cursor, length = self.cursor, len(episode)
        super().add(*(np.stack(field) for field in zip(*episode, strict=True)))
        kept = min(length, self.capacity)  # an episode longer than the ring keeps its end
        first = (cursor + length - kept) % self.capacity
        slots = (first + np.arange(kept)) % self.capacity
        self.episode_start[slots], self.episode_length[slots] = first, kept
        # An episode whose first rows were just overwritten starts at the oldest row now.
        oldest = self.cursor
        start = int(self.episode_start[oldest])
        if kept < self.capacity and oldest < self.size and start != oldest:
            left = int(self.episode_length[oldest]) - (oldest - start) % self.capacity
            rest = (oldest + np.arange(max(left, 0))) % self.capacity
            self.episode_start[rest], self.episode_length[rest] = oldest, left

    @property
    def open_transitions(self) -> int:
        return sum(len(e) for e in self._open_list())

    def relabel(self, rows: np.ndarray, slots: np.ndarray) -> None:
        """New desired goals (by `strategy`) and rewards for packed rows of `slots`, in place."""
        if rows.size == 0:
            return
        start, length = self.episode_start[slots], self.episode_length[slots]
        if self.strategy == "final":
            step = length - 1
        elif self.strategy == "future":  # inclusive, as SB3's: this transition may be drawn
            step = self.rng.integers((slots - start) % self.capacity, length)
        else:
            step = self.rng.integers(0, length)
        goal_rows = self._next_rows((start + step) % self.capacity)
        goals = goal_rows[..., : self.obs_dim][..., self.achieved]
        obs, nxt = self._columns["observation"].start, self._columns["next_observation"].start
        for first in (obs, nxt):
            rows[..., first + self.desired.start : first + self.desired.stop] = goals
        achieved = rows[..., nxt + self.achieved.start : nxt + self.achieved.stop]
        n, width = int(np.prod(slots.shape)), goals.shape[-1]
        reward = batched_rewards(
            self.compute_reward, achieved.reshape(n, width), goals.reshape(n, width)
        )
        rows[..., self._columns["reward"]] = reward.reshape(slots.shape)

    def sample_packed(self, batch_size: int, num_batches: int = 1) -> np.ndarray:
        if self.size == 0:
            raise Fault(
                f"her samples finished episodes, and none has ended yet "
                f"({self.open_transitions} transitions under way): raise learning_starts "
                "above the episode length, or give an env whose episodes never end a time "
                "limit (max_episode_steps)"
            )
        slots = self.rng.integers(0, self.size, size=(num_batches, batch_size))
        rows = self.packed(slots)
        relabelled = int(self.her_ratio * batch_size)
        self.relabel(rows[:, :relabelled], slots[:, :relabelled])
        return rows

    def state_arrays(self) -> Dict[str, np.ndarray]:
        """The ring's arrays, each row's episode, and the open episodes' rows and lengths."""
        arrays = super().state_arrays()
        episodes = self._open_list()
        rows = [row for episode in episodes for row in episode]
        widths = (self.obs_dim, self.action_dim, 1, self.obs_dim, 1)
        obs, action, reward, next_obs, ended = (
            np.array([row[k] for row in rows], np.float32).reshape(len(rows), w)
            for k, w in enumerate(widths)
        )
        packed = np.concatenate([obs, action, reward, ended], axis=1)
        return {
            **arrays,
            "episode_start": self.episode_start[: self.size],
            "episode_length": self.episode_length[: self.size],
            "open_rows": packed,
            "open_next_observation": next_obs,
            "open_lengths": np.array([len(e) for e in episodes], np.int64),
        }

    def load_state_arrays(self, arrays: Mapping[str, np.ndarray], size: int, cursor: int) -> None:
        super().load_state_arrays(arrays, size, cursor)
        size = int(size)
        start, length = _checked(arrays, {"episode_start": (size,), "episode_length": (size,)})
        start, length = np.asarray(start, np.int64), np.asarray(length, np.int64)
        if np.any((start < 0) | (start >= max(size, 1)) | (length < 1) | (length > size)):
            raise ValueError("episode_start.npy or episode_length.npy points outside the rows")
        lengths = np.asarray(_checked(arrays, {"open_lengths": None})[0], np.int64)
        if lengths.ndim != 1 or np.any(lengths < 1):
            raise ValueError("open_lengths.npy must list the open episodes' lengths (>= 1)")
        total, width = int(lengths.sum()), self._rows.shape[1]
        shapes = {"open_rows": (total, width), "open_next_observation": (total, self.obs_dim)}
        packed, nxt = _checked(arrays, shapes)
        self.episode_start[:size], self.episode_length[:size] = start, length
        f = row_fields(np.array(packed), self.obs_dim)
        fields = (f["observation"], f["action"], f["reward"], np.array(nxt), f["terminated"])
        rows = list(zip(*fields, strict=True))
        self._open = {}
        for end, n in zip(np.cumsum(lengths).tolist(), lengths.tolist(), strict=True):
            self._open.setdefault(rows[end - 1][3].tobytes(), []).append(rows[end - n : end])


def her_buffer(config, spec, compute_reward: Optional[Callable]) -> HerReplayBuffer:
    """The run's HER buffer (config.her) for an env of `spec` (a goal env's)."""
    return HerReplayBuffer(
        config.buffer_size,
        spec.obs_dim,
        spec.action_dim,
        config.seed,
        config.gamma,
        columns=spec.goal_columns,
        compute_reward=compute_reward,
        strategy=config.her_strategy,
        goals_per_transition=config.her_goals_per_transition,
    )
