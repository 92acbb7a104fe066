import numpy as np
import pytest

from tfsac import ReplayBuffer
from tfsac.data.replay import pack_batch


def _fill(buffer, values):
    for v in values:
        buffer.add([v, -v], [v / 10], v, [v + 1, -v - 1], v % 2 == 0)


def test_wraps_around_and_overwrites_oldest():
    buffer = ReplayBuffer(capacity=5, obs_dim=2, action_dim=1)
    _fill(buffer, range(7))
    assert len(buffer) == 5
    assert buffer.cursor == 2
    # Slots 0 and 1 now hold transitions 5 and 6; 2..4 still hold 2..4.
    np.testing.assert_array_equal(buffer.reward, [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(buffer.observation[:, 0], [5, 6, 2, 3, 4])
    np.testing.assert_array_equal(buffer.next_observation[:, 0], [6, 7, 3, 4, 5])
    np.testing.assert_array_equal(buffer.terminated, [0, 1, 1, 0, 1])


def test_sample_shapes_and_contents():
    buffer = ReplayBuffer(capacity=100, obs_dim=2, action_dim=1, seed=0)
    _fill(buffer, range(10))
    batch = buffer.sample(batch_size=32, num_batches=3)
    assert batch["observation"].shape == (3, 32, 2)
    assert batch["action"].shape == (3, 32, 1)
    assert batch["reward"].shape == (3, 32)
    assert all(v.dtype == np.float32 for v in batch.values())
    # Only the 10 stored transitions, rows kept consistent.
    assert set(batch["reward"].ravel()) <= set(range(10))
    np.testing.assert_array_equal(batch["observation"][..., 0], batch["reward"])
    np.testing.assert_array_equal(batch["next_observation"][..., 0], batch["reward"] + 1)


def test_sample_is_reproducible_by_seed():
    a, b = (ReplayBuffer(50, 2, 1, seed=3) for _ in range(2))
    _fill(a, range(20))
    _fill(b, range(20))
    np.testing.assert_array_equal(a.sample(8)["reward"], b.sample(8)["reward"])


def test_empty_buffer_refuses_to_sample():
    with pytest.raises(ValueError, match="empty replay buffer"):
        ReplayBuffer(4, 1, 1).sample(2)


def test_a_refused_add_changes_no_row_and_names_every_shape():
    buffer = ReplayBuffer(4, 2, 1)
    obs = np.arange(10, dtype=np.float32).reshape(5, 2)
    for i in range(4):
        buffer.add(obs[i], [0.0], float(i), obs[i + 1], False)
    before = buffer.state_arrays()
    with pytest.raises(ValueError, match=r"actions \(2,\), rewards \(\), .* actions \[1\]"):
        buffer.add(np.array([99.0, 99.0]), [0.0, 0.0], 9.0, np.array([98.0, 98.0]), False)
    for name, array in buffer.state_arrays().items():
        np.testing.assert_array_equal(array, before[name])
    buffer.add(obs[0], [0.5], np.array([1.0]), obs[1], False)  # a one-element reward: one row
    assert buffer.reward[0] == 1.0
    buffer.add(obs[1], 0.25, 2.0, obs[2], False)  # a scalar action where action_dim is 1
    assert buffer.action[1, 0] == 0.25
    scalars = ReplayBuffer(4, 1, 2)
    scalars.add(0.5, np.zeros(2), 1.0, 0.75, False)  # a scalar observation where obs_dim is 1
    assert scalars.observation[0, 0] == 0.5 and len(scalars) == 1
    with pytest.raises(ValueError, match="batch_size must be a whole number >= 0, got -1"):
        buffer.sample(-1)


def test_adding_many_rows_wraps_like_single_adds():
    one, many = ReplayBuffer(5, 2, 1), ReplayBuffer(5, 2, 1)
    _fill(one, range(7))
    values = np.arange(7, dtype=np.float32)
    for chunk in (values[:3], values[3:6], values[6:]):
        many.add(
            np.stack([chunk, -chunk], 1),
            chunk[:, None] / 10,
            chunk,
            np.stack([chunk + 1, -chunk - 1], 1),
            chunk % 2 == 0,
        )
    assert (many.cursor, len(many)) == (one.cursor, len(one)) == (2, 5)
    for name in ("observation", "action", "reward", "next_observation", "terminated"):
        np.testing.assert_array_equal(getattr(many, name), getattr(one, name))


def test_sample_packed_rows_are_the_stored_transitions():
    buffer = ReplayBuffer(capacity=16, obs_dim=2, action_dim=1, seed=0)
    _fill(buffer, range(10))
    rows = buffer.sample_packed(batch_size=8, num_batches=2)
    assert rows.shape == (2, 8, 2 + 1 + 1 + 2 + 1 + 1) and rows.dtype == np.float32
    r = rows[..., 3]  # [obs(2) | action(1) | reward | next_obs(2) | terminated | discount]
    np.testing.assert_array_equal(rows[..., :2], np.stack([r, -r], -1))
    np.testing.assert_array_equal(rows[..., 2], r / np.float32(10))
    np.testing.assert_array_equal(rows[..., 4:6], np.stack([r + 1, -r - 1], -1))
    np.testing.assert_array_equal(rows[..., 6], (r % 2 == 0).astype(np.float32))
    np.testing.assert_array_equal(rows[..., 7], np.float32(0.99))  # gamma: one step


# Next observations stored once (issue #28): checked against a reference that keeps every
# transition as given, bit for bit (-0.0 and 0.0 told apart).


class _Reference:
    """Every transition packed as given, in a list used as a ring; samples drawn as the
    buffer draws them."""

    def __init__(self, capacity, seed=0):
        self.capacity, self.rows, self.cursor = capacity, [], 0
        self.rng = np.random.default_rng(seed)

    def add(self, observation, action, reward, next_observation, terminated):
        packed = pack_batch(
            dict(
                observation=observation,
                action=action,
                reward=reward,
                next_observation=next_observation,
                terminated=terminated,
            )
        )
        for row in packed:
            if len(self.rows) < self.capacity:
                self.rows.append(row)
            else:
                self.rows[self.cursor] = row
            self.cursor = (self.cursor + 1) % self.capacity

    def sample_packed(self, batch_size, num_batches=1):
        idx = self.rng.integers(0, len(self.rows), size=(num_batches, batch_size))
        return np.stack(self.rows)[idx]


def _same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def _check(buffer, reference, samples=True):
    stored = np.stack(reference.rows)
    assert (len(buffer), buffer.cursor) == (len(stored), reference.cursor)
    _same_bits(buffer.packed(np.arange(len(buffer))), stored)
    _same_bits(buffer.next_observation[: len(buffer)], stored[:, 5:8])  # obs_dim 3, action 1
    assert buffer.side_slots <= len(buffer)
    if samples:
        _same_bits(buffer.sample_packed(16, 2), reference.sample_packed(16, 2))


def _steps(rng, num_envs, steps, end=0.1):
    """(observation, action, reward, next observation, terminated) of each step of
    `num_envs` env copies with 3-dim observations of few values (-0.0, 0.0, 1.0, 2.0): equal
    observations across copies and within episodes are common, some steps stay where they
    are. Every copy starts each episode at the same observation (all 7s); an episode ends
    by termination or by truncation, whose final observation is never that one."""
    start = np.full(3, 7, np.float32)
    obs = np.tile(start, (num_envs, 1))
    values = np.array([-0.0, 0.0, 1.0, 2.0], np.float32)
    for _ in range(steps):
        next_obs = rng.choice(values, (num_envs, 3))
        stay = rng.random(num_envs) < 0.1
        next_obs[stay] = obs[stay]
        u = rng.random(num_envs)
        terminated, truncated = u < end / 2, (u >= end / 2) & (u < end)
        action = rng.normal(size=(num_envs, 1)).astype(np.float32)
        yield obs, action, rng.normal(size=num_envs).astype(np.float32), next_obs, terminated
        obs = np.where((terminated | truncated)[:, None], start, next_obs)


def test_next_observations_are_exact_for_vector_env_steps_across_wraps():
    buffer, reference = ReplayBuffer(50, 3, 1, seed=5), _Reference(50, seed=5)
    for t, step in enumerate(_steps(np.random.default_rng(0), num_envs=3, steps=300)):
        buffer.add(*step)
        reference.add(*step)
        _check(buffer, reference, samples=t % 10 == 0)  # 900 rows: 18 times round the ring
    assert 0 < buffer.side_slots < len(buffer)  # some next observations are shared


def test_next_observations_are_exact_for_interleaved_runner_chunks():
    rng = np.random.default_rng(1)
    # Two runners of two env copies each; a chunk is steps of one runner, rows step-major.
    runners = [_steps(np.random.default_rng(10 + i), num_envs=2, steps=10_000) for i in (0, 1)]
    buffer, reference = ReplayBuffer(64, 3, 1, seed=2), _Reference(64, seed=2)
    for length in [*rng.integers(1, 12, 40), 40, 3, 40]:  # 40 steps: 80 rows, over capacity
        steps = [next(runners[rng.integers(2)]) for _ in range(length)]
        chunk = [np.concatenate(field) for field in zip(*steps, strict=True)]
        buffer.add(*chunk)
        reference.add(*chunk)
        _check(buffer, reference)


def test_single_adds_match_the_reference_and_state_arrays_round_trip():
    buffer, reference = ReplayBuffer(40, 3, 1, seed=3), _Reference(40, seed=3)
    steps = _steps(np.random.default_rng(2), num_envs=1, steps=400)
    for obs, action, reward, next_obs, terminated in steps:
        if len(reference.rows) == 40 and reference.cursor == 17:
            break
        buffer.add(obs[0], action[0], reward[0], next_obs[0], terminated[0])
        reference.add(obs, action, reward, next_obs, terminated)
    _check(buffer, reference)
    restored = ReplayBuffer(40, 3, 1)
    restored.load_state_arrays(buffer.state_arrays(), len(buffer), buffer.cursor)
    restored.rng.bit_generator.state = buffer.rng.bit_generator.state
    for name, array in restored.state_arrays().items():
        np.testing.assert_array_equal(array, buffer.state_arrays()[name], err_msg=name)
    for step in steps:  # both go on alike
        for b in (buffer, restored, reference):
            b.add(*step)
        _check(buffer, reference, samples=False)
        _check(restored, reference, samples=False)
        _same_bits(restored.sample_packed(8), buffer.sample_packed(8))


def test_state_arrays_that_do_not_fit_are_refused():
    buffer = ReplayBuffer(10, 3, 1)
    for step in _steps(np.random.default_rng(4), num_envs=1, steps=6):
        buffer.add(*step)
    arrays = buffer.state_arrays()
    bad = [
        dict(arrays, rows=arrays["rows"][:5]),
        dict(arrays, next_index=arrays["next_index"] + 3),
        dict(arrays, side_observation=arrays["side_observation"][1:]),
        dict(arrays, pending=np.array([99], np.int32)),
        {k: v for k, v in arrays.items() if k != "pending"},
        {"observation": arrays["rows"][:, :3]},
    ]
    for case in bad:
        with pytest.raises(ValueError):
            ReplayBuffer(10, 3, 1).load_state_arrays(case, 6, 6)
    with pytest.raises(ValueError, match="cursor"):
        ReplayBuffer(10, 3, 1).load_state_arrays(arrays, 6, 2)


def test_equal_observations_of_other_streams_keep_exact_next_observations():
    # Two env copies that start at [0, 0]. Copy 1 stays there, then terminates at [2, 2];
    # copy 0 goes to [1, 1] and is truncated at [0, -0]; both start again at [0, 0], which is
    # bitwise not copy 0's final observation.
    buffer = ReplayBuffer(8, 2, 1)
    zero, neg = np.float32(0.0), np.float32(-0.0)
    buffer.add([[0, 0], [0, 0]], [[0], [0]], [0, 0], [[1, 1], [0, 0]], [False, False])
    buffer.add([[1, 1], [0, 0]], [[0], [0]], [0, 0], [[zero, neg], [2, 2]], [False, True])
    buffer.add([[0, 0], [0, 0]], [[0], [0]], [0, 0], [[3, 3], [3, 3]], [False, False])
    expected = [[1, 1], [0, 0], [0, -0.0], [2, 2], [3, 3], [3, 3]]
    _same_bits(buffer.next_observation[:6], np.array(expected, np.float32))
    # Copy 1's first next observation ([0, 0]) is the observation of a later row; copy 0's
    # [0, -0] is not (bitwise), nor is a terminated row's, nor the last step's two: 4 held.
    assert buffer.side_slots == 4


def test_a_waiting_next_observation_is_forgotten_with_its_row():
    # Row 0's episode is truncated at F, which no later row starts from before row 3
    # overwrites row 0 (capacity 3); row 4 then starts at F: that links no row.
    a, c, d, e, f, g = ([v, v] for v in (1, 3, 4, 5, 6, 7))
    buffer = ReplayBuffer(3, 2, 1)
    for obs, next_obs in ((a, f), ([2, 2], c), (c, d), (d, e), (f, g)):
        buffer.add(obs, [0], 0, next_obs, False)
    # Slot 0 holds row 3 (d -> e), slot 1 row 4 (f -> g), slot 2 row 2 (c -> d).
    _same_bits(buffer.next_observation, np.array([e, g, d], np.float32))
    assert buffer.side_slots == 2  # e and g wait


def _arrays_nbytes(buffer):
    """Bytes of the arrays the buffer holds (views counted once, with their base)."""
    return sum(
        v.nbytes for v in vars(buffer).values() if isinstance(v, np.ndarray) and v.base is None
    )


def test_a_halfcheetah_transition_takes_at_most_110_bytes():
    capacity, rng = 20_000, np.random.default_rng(0)
    buffer = ReplayBuffer(capacity, 17, 6)
    for _ in range(25):  # 1000-step episodes, truncated: 25,000 steps
        obs = rng.normal(size=(1001, 17)).astype(np.float32)
        buffer.add(obs[:-1], np.zeros((1000, 6)), np.zeros(1000), obs[1:], np.zeros(1000))
    assert len(buffer) == capacity
    assert _arrays_nbytes(buffer) / capacity <= 110  # 168 with next observations stored twice
    # The side array holds the final observations of the 20 episodes in the buffer.
    assert buffer.side_slots == 20


def test_the_row_layout_sizes_the_memory_check_and_reads_a_checkpoints_replay(tmp_path):
    """The buffer's row width and bytes per row are what its arrays take and what the memory
    check counts; a checkpoint's replay read as recorded data gives its transitions back."""
    import json
    import types

    from tfsac import SACConfig
    from tfsac.algorithm.resolve import resolve
    from tfsac.data.her import HerReplayBuffer
    from tfsac.data.offline_data import _checkpoint_replay
    from tfsac.run.memory_check import memory_estimates

    buffer = ReplayBuffer(50, 3, 1)
    for step in _steps(np.random.default_rng(4), num_envs=2, steps=40):  # 80 rows: wrapped
        buffer.add(*step)
    assert buffer._rows.shape == (50, ReplayBuffer.row_width(3, 1))
    assert buffer._rows.nbytes + buffer.next_index.nbytes == 50 * ReplayBuffer.bytes_per_row(3, 1)
    goals = (("achieved_goal", 0, 1), ("desired_goal", 1, 2), ("observation", 2, 3))
    her = HerReplayBuffer(50, 3, 1, columns=goals, compute_reward=None)
    her_bytes = her._rows.nbytes + her.next_index.nbytes
    her_bytes += her.episode_start.nbytes + her.episode_length.nbytes
    assert her_bytes == 50 * HerReplayBuffer.bytes_per_row(3, 1)
    for config, size in (
        (SACConfig(buffer_size=50, batch_size=8), buffer),
        (SACConfig(buffer_size=50, batch_size=8, her=True), her),
    ):
        estimates = {name: n for name, n, _ in memory_estimates(resolve(config), 3, 1)}
        assert estimates["buffer_size"] == 50 * type(size).bytes_per_row(3, 1)
    extra = tmp_path / "ckpt-80.extra"
    extra.mkdir()
    for name, array in buffer.state_arrays().items():
        np.save(extra / f"{name}.npy", array)
    (extra / "state.json").write_text(json.dumps({"replay": {"capacity": 50}}))
    spec = types.SimpleNamespace(obs_dim=3, action_dim=1)
    fields, next_index = _checkpoint_replay(str(tmp_path), 80, spec)
    packed = buffer.packed(np.arange(len(buffer)))  # [obs | action | reward | next obs | ...]
    for name, columns in (("observation", slice(0, 3)), ("action", slice(3, 4))):
        _same_bits(np.asarray(fields[name]), packed[:, columns])
    _same_bits(np.asarray(fields["next_observation"]), buffer.next_observation[:50])
    _same_bits(np.asarray(fields["reward"]), packed[:, 4])
    _same_bits(np.asarray(fields["terminated"]), packed[:, 8])
    linked = buffer.next_index[:50] < 50
    np.testing.assert_array_equal(next_index[linked], buffer.next_index[:50][linked])
    assert np.all(next_index[~linked] == 50)  # a next observation no row holds
