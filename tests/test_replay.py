import numpy as np
import pytest

from tfsac import ReplayBuffer


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
    with pytest.raises(ValueError):
        ReplayBuffer(4, 1, 1).sample(2)


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
    assert rows.shape == (2, 8, 2 + 1 + 1 + 2 + 1) and rows.dtype == np.float32
    r = rows[..., 3]  # [obs(2) | action(1) | reward | next_obs(2) | terminated]
    np.testing.assert_array_equal(rows[..., :2], np.stack([r, -r], -1))
    np.testing.assert_array_equal(rows[..., 2], r / np.float32(10))
    np.testing.assert_array_equal(rows[..., 4:6], np.stack([r + 1, -r - 1], -1))
    np.testing.assert_array_equal(rows[..., 6], (r % 2 == 0).astype(np.float32))
