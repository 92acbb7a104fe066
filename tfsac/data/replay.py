"""A ring buffer of transitions storing each next observation once, and n-step returns."""

from __future__ import annotations

import numbers
from typing import Dict, List, Mapping, Tuple

import numpy as np

# What a transition stores; a packed row adds `discount`.
FIELDS = ("observation", "action", "reward", "next_observation", "terminated")
# One value per transition (the others are vectors).
SCALAR_FIELDS = ("reward", "terminated", "discount")


def transition_layout(obs_dim: int, action_dim: int) -> Tuple[Tuple[str, int], ...]:
    """(field, width) of each column block of a packed row, the learner's one input; with
    n-step returns `reward` sums up to n rewards and `discount` is gamma^steps."""
    widths = {"observation": obs_dim, "action": action_dim, "next_observation": obs_dim}
    return tuple((name, widths.get(name, 1)) for name in (*FIELDS, "discount"))


def packed_width(obs_dim: int, action_dim: int) -> int:
    return sum(w for _, w in transition_layout(obs_dim, action_dim))


def pack_batch(batches: Mapping[str, np.ndarray], gamma: float = 0.99) -> np.ndarray:
    """A dict of field arrays as float32 packed rows [..., width] (`discount` default: gamma)."""
    columns = []
    for name in (*FIELDS, "discount"):
        if name == "discount" and name not in batches:
            value = np.full(np.shape(batches["reward"]), gamma, np.float32)
        else:
            value = np.asarray(batches[name], np.float32)
        columns.append(value[..., None] if name in SCALAR_FIELDS else value)
    return np.concatenate(columns, axis=-1)


def n_step_returns(buffer, slots: np.ndarray, n_steps: int, gamma: float):
    """(sum_k gamma^k r_{t+k} over the next m <= n rewards, the m-th transition's slot,
    gamma^m) for `slots`, walked along `buffer.next_index` (>= capacity: no row) to a
    termination or a missing link; off-policy where streams meet, as in SBX and SB3."""
    slots = np.asarray(slots)
    total = buffer.reward[slots].astype(np.float64)
    last = slots.copy()
    discount = np.full(slots.shape, gamma)
    going = _continues(buffer, last)
    for k in range(1, n_steps):
        if not going.any():
            break
        following = np.where(going, buffer.next_index[last], last)
        total += np.where(going, gamma**k * buffer.reward[following], 0.0)
        discount = np.where(going, gamma ** (k + 1), discount)
        last = following
        going &= _continues(buffer, last)
    return total.astype(np.float32), last, discount.astype(np.float32)


def _continues(buffer, slots: np.ndarray) -> np.ndarray:
    return (buffer.terminated[slots] == 0.0) & (buffer.next_index[slots] < buffer.capacity)


def _row_keys(rows: np.ndarray) -> List[bytes]:
    """The bytes of each row of a C-contiguous float32 [n, d] array (exact: bitwise)."""
    return rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).ravel().tolist()


def row_fields(rows: np.ndarray, obs_dim: int) -> Dict[str, np.ndarray]:
    """Views of a `ReplayBuffer`'s stored rows [..., row width] by field."""
    return {
        "observation": rows[..., :obs_dim],
        "action": rows[..., obs_dim:-2],
        "reward": rows[..., -2],
        "terminated": rows[..., -1],
    }


# The arrays of `ReplayBuffer.state_arrays()` that hold its transitions (a checkpoint's files).
TRANSITION_ARRAYS = ("rows", "next_index", "side_observation")


def saved_transitions(
    arrays: Mapping[str, np.ndarray], capacity: int, obs_dim: int, action_dim: int
) -> Tuple[Dict[str, np.ndarray], np.ndarray]:
    """The fields and next_index of `state_arrays()` without a buffer; ValueError if unfit."""
    rows, ref, side = (arrays[n] for n in TRANSITION_ARRAYS)
    if rows.shape != (len(ref), ReplayBuffer.row_width(obs_dim, action_dim)):
        raise ValueError(f"rows of shape {rows.shape} for this env")
    ref = np.asarray(ref, np.int64)
    if len(ref) and (ref.min() < 0 or ref.max() >= capacity + len(side)):
        raise ValueError("next_index out of range")
    in_side = ref >= capacity
    next_obs = np.empty((len(ref), obs_dim), np.float32)
    next_obs[~in_side] = rows[ref[~in_side], :obs_dim]
    next_obs[in_side] = side[ref[in_side] - capacity]
    return {**row_fields(rows, obs_dim), "next_observation": next_obs}, ref


class ReplayBuffer:
    """A ring of [observation | action | reward | terminated] rows that stores a next
    observation only where no later row holds it as its observation, to save memory.

    Each row's `next_index` is the row whose observation is (bitwise) its next one, or
    `capacity` + i for slot i of a small side array, where it waits, keyed by its bytes,
    until a later row of any stream has it. Actions are in the learner's [-1, 1] units.
    """

    def __init__(
        self,
        capacity: int,
        obs_dim: int,
        action_dim: int,
        seed: int = 0,
        n_steps: int = 1,
        gamma: float = 0.99,
    ):
        self.capacity, self.obs_dim, self.action_dim = int(capacity), int(obs_dim), int(action_dim)
        self.n_steps, self.gamma = int(n_steps), float(gamma)
        self._rows = np.zeros((self.capacity, self.row_width(obs_dim, action_dim)), np.float32)
        fields = row_fields(self._rows, obs_dim)
        self.observation, self.action = fields["observation"], fields["action"]
        self.reward, self.terminated = fields["reward"], fields["terminated"]
        # Empty slots say 0: "linked", so overwriting them frees nothing.
        self.next_index = np.zeros(self.capacity, np.int32)
        self._columns = {}  # field -> its columns of a packed row, for unpack
        start = 0
        for name, w in transition_layout(obs_dim, action_dim):
            self._columns[name] = start if name in SCALAR_FIELDS else slice(start, start + w)
            start += w
        self._clear_side()
        self.cursor = 0  # next slot to write
        self.size = 0
        self.rng = np.random.default_rng(seed)

    @staticmethod
    def row_width(obs_dim: int, action_dim: int) -> int:
        """Floats in a stored row (static: the memory check sizes a buffer before making it)."""
        return obs_dim + action_dim + 2

    @classmethod
    def bytes_per_row(cls, obs_dim: int, action_dim: int) -> int:
        """Bytes a slot takes (the side array holds a few per episode and is left out)."""
        return cls.row_width(obs_dim, action_dim) * 4 + 4

    def _clear_side(self, slots: int = 0) -> None:
        self._side = np.zeros((max(slots, min(self.capacity, 64)), self.obs_dim), np.float32)
        self._side_top = slots  # slots ever handed out; _free holds those given back
        self._free: List[int] = []
        # Bytes of a next observation -> the row waiting for a later row to have it.
        self._pending: Dict[bytes, int] = {}

    def __len__(self) -> int:
        return self.size

    @property
    def side_slots(self) -> int:
        return self._side_top - len(self._free)

    def add(self, observation, action, reward, next_observation, terminated) -> None:
        """Adds one transition, or N in order with a leading axis; `next_observation` is the
        true successor (at a truncation the final observation). Every shape is checked
        before a row is written, so that a refused call changes nothing."""
        transitions = (observation, action, reward, next_observation, terminated)
        if np.ndim(observation) < 2:  # one transition (a scalar's too): rows of one
            observation, action, next_observation = (
                np.reshape(np.asarray(x, np.float32), (1, -1))
                for x in (observation, action, next_observation)
            )
            reward, terminated = np.reshape(reward, -1), np.reshape(terminated, -1)
        n = len(observation)
        skip = max(n - self.capacity, 0)  # rows that later rows of this call overwrite
        obs, next_obs, action = (
            np.ascontiguousarray(np.asarray(x, np.float32)[skip:])
            for x in (observation, next_observation, action)
        )
        reward = np.asarray(reward, np.float32)
        if (
            obs.shape != (n - skip, self.obs_dim)
            or next_obs.shape != obs.shape
            or action.shape != (n - skip, self.action_dim)
            or reward.shape != (n,)
            or np.shape(terminated) not in ((), (n,))
        ):
            names = ("observations", "actions", "rewards", "next observations", "terminated")
            shapes = ", ".join(
                f"{k} {np.shape(x)}" for k, x in zip(names, transitions, strict=True)
            )
            raise ValueError(
                f"transitions of {shapes}; the buffer takes one row or N rows of observations "
                f"[{self.obs_dim}], actions [{self.action_dim}] and one reward and terminated "
                "flag each"
            )
        terminated = np.broadcast_to(np.asarray(terminated, np.float32), (n,))[skip:]
        slots = (self.cursor + skip + np.arange(n - skip)) % self.capacity
        self.observation[slots] = obs
        self.action[slots] = action
        self.reward[slots] = reward[skip:]
        self.terminated[slots] = terminated
        # Last: the links need not be undone when a row above does not fit.
        self._link(slots, obs, next_obs, terminated)
        self.cursor = int((self.cursor + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)

    def add_transitions(self, transitions) -> None:
        self.add(*transitions.as_tuple())

    def cut_episodes(self) -> None:
        """The streams start new episodes (nothing to do here: a link waits harmlessly)."""

    def _link(self, slots, obs, next_obs, terminated) -> None:
        """Links the new rows and the waiting rows whose next observation they have."""
        pending, next_index, free, cap = self._pending, self.next_index, self._free, self.capacity
        keys, next_keys = _row_keys(obs), _row_keys(next_obs)
        ended = terminated.tolist()
        for i, slot in enumerate(slots.tolist()):
            old_side = int(next_index[slot]) - cap  # the overwritten row's side slot, freed
            if old_side >= 0:
                key = self._side[old_side].tobytes()
                if pending.get(key) == slot:
                    del pending[key]
                free.append(old_side)
            row = pending.pop(keys[i], None)
            if row is not None:
                free.append(int(next_index[row]) - cap)
                next_index[row] = slot
            if free:
                side = free.pop()
            else:
                side, self._side_top = self._side_top, self._side_top + 1
            next_index[slot] = cap + side
            if not ended[i]:  # after a termination the stream restarts: never linked
                pending[next_keys[i]] = slot
        if self._side_top > len(self._side):
            # Doubling keeps growth rare; a slot per row at most, so capacity bounds it.
            grown = np.zeros((min(2 * self._side_top, cap), self.obs_dim), np.float32)
            grown[: len(self._side)] = self._side
            self._side = grown
        # After the links: a side slot freed and taken again holds its last taker's.
        waiting = np.flatnonzero(next_index[slots] >= cap)
        self._side[next_index[slots[waiting]] - cap] = next_obs[waiting]

    def _next_rows(self, slots: np.ndarray) -> np.ndarray:
        """Rows whose first obs_dim columns are the next observations of `slots`."""
        ref = self.next_index[slots]
        # One gather from the ring (clipped: side refs read some row), then the side's.
        rows = np.take(self._rows, ref, axis=0, mode="clip")
        in_side = ref >= self.capacity
        if in_side.any():
            rows[in_side, : self.obs_dim] = self._side[ref[in_side] - self.capacity]
        return rows

    @property
    def next_observation(self) -> np.ndarray:
        """The next observation of every slot (a copy; zeros in slots not filled yet)."""
        out = np.zeros_like(self.observation)
        out[: self.size] = self._next_rows(np.arange(self.size))[:, : self.obs_dim]
        return out

    def packed(self, slots: np.ndarray) -> np.ndarray:
        """The transitions in `slots` (any shape) as packed rows over up to `n_steps`."""
        rows = np.take(self._rows, slots, axis=0)
        last, discount = slots, np.full(np.shape(slots), self.gamma, np.float32)
        if self.n_steps > 1:
            rows[..., -2], last, discount = n_step_returns(self, slots, self.n_steps, self.gamma)
            rows[..., -1] = self.terminated[last]
        next_obs = self._next_rows(last)[..., : self.obs_dim]
        return np.concatenate([rows[..., :-1], next_obs, rows[..., -1:], discount[..., None]], -1)

    def sample_packed(self, batch_size: int, num_batches: int = 1) -> np.ndarray:
        """Uniform samples with replacement, packed: [num_batches, batch_size, width]."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        for name, value in (("batch_size", batch_size), ("num_batches", num_batches)):
            # 0 rows is a batch too: a mixed batch's online share at offline_ratio=1.
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
        return self.packed(self.rng.integers(0, self.size, size=(num_batches, batch_size)))

    def unpack(self, packed: np.ndarray) -> Dict[str, np.ndarray]:
        return {name: packed[..., column] for name, column in self._columns.items()}

    def sample(self, batch_size: int, num_batches: int = 1) -> Dict[str, np.ndarray]:
        """`sample_packed` as a dict by field, each [num_batches, batch_size, ...]."""
        return self.unpack(self.sample_packed(batch_size, num_batches))

    def state_arrays(self) -> Dict[str, np.ndarray]:
        """The filled rows for a checkpoint, renumbered and sorted: one state, the same files."""
        ref = self.next_index[: self.size].copy()
        in_side = np.flatnonzero(ref >= self.capacity)
        side = self._side[ref[in_side] - self.capacity]
        ref[in_side] = self.capacity + np.arange(len(in_side), dtype=np.int32)
        waiting = np.sort(np.fromiter(self._pending.values(), np.int32, len(self._pending)))
        return {
            "rows": self._rows[: self.size],
            "next_index": ref,
            "side_observation": side,
            "pending": waiting,
        }

    def load_state_arrays(self, arrays: Mapping[str, np.ndarray], size: int, cursor: int) -> None:
        """Fills the buffer from `state_arrays()`; ValueError naming what does not fit."""
        size, cursor = int(size), int(cursor)
        if not (0 <= size <= self.capacity and 0 <= cursor < self.capacity) or (
            size < self.capacity and cursor != size
        ):
            raise ValueError(f"size {size} and cursor {cursor} do not fit capacity {self.capacity}")
        self.next_index[:] = 0
        self._clear_side()
        self.size = 0
        rows, ref = _checked(arrays, {"rows": (size, self._rows.shape[1]), "next_index": (size,)})
        ref = np.asarray(ref, np.int64)
        in_side = ref >= self.capacity
        k = int(np.count_nonzero(in_side))
        (side,) = _checked(arrays, {"side_observation": (k, self.obs_dim)})
        waiting = np.asarray(_checked(arrays, {"pending": None})[0], np.int64)
        # Links go to filled rows; side slots are numbered in row order; waiting rows wait.
        if (
            np.any((ref < 0) | ((ref >= size) & ~in_side))
            or not np.array_equal(ref[in_side] - self.capacity, np.arange(k))
            or waiting.ndim != 1
            or np.any((waiting < 0) | (waiting >= size))
            or not np.all(in_side[waiting])
        ):
            raise ValueError("next_index.npy or pending.npy points outside the rows")
        self._rows[:size] = rows
        self.next_index[:size] = ref
        self._clear_side(k)
        self._side[:k] = side
        for row in waiting.tolist():
            self._pending[self._side[ref[row] - self.capacity].tobytes()] = row
        self.size, self.cursor = size, cursor


def _checked(arrays: Mapping[str, np.ndarray], shapes: Dict) -> List[np.ndarray]:
    """The arrays named in `shapes` (None: any shape); ValueError if one is missing or misshapen."""
    for name, shape in shapes.items():
        if name not in arrays:
            raise ValueError(f"no {name}.npy")
        if shape is not None and arrays[name].shape != shape:
            raise ValueError(f"{name}.npy has shape {arrays[name].shape}, not {shape}")
    return [arrays[name] for name in shapes]
