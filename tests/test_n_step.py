"""n-step returns (tfsac.data.replay.n_step_returns) on numbers computed by hand: an episode
that ends in a termination, one that ends in a truncation, two env copies added step by step."""

import numpy as np
import pytest
from conftest import tiny_config

from tfsac import ReplayBuffer, train

# Row fields of a packed n-step transition.
OBS, ACTION, REWARD, NEXT_OBS, TERMINATED, DISCOUNT = 0, 1, 2, 3, 4, 5


def _episodes(buffer):
    """s0 -1-> s1 -2-> s2 -3-> s3 (terminated); s10 -10-> s11 -20-> s12 (truncated: the
    next episode starts at s20, not s12); s20 -100-> s21 (under way)."""
    steps = [
        (0, 1, 1, False),
        (1, 2, 2, False),
        (2, 3, 3, True),
        (10, 10, 11, False),
        (11, 20, 12, False),
        (20, 100, 21, False),
    ]
    for obs, reward, next_obs, terminated in steps:
        buffer.add([float(obs)], [0.0], float(reward), [float(next_obs)], terminated)


def test_n_step_rows_by_hand():
    buffer = ReplayBuffer(16, obs_dim=1, action_dim=1, n_steps=3, gamma=0.5)
    _episodes(buffer)
    rows = buffer.packed(np.arange(6))
    expected = [
        # obs, action, sum of rewards, obs it ends in, terminated, gamma^steps
        (0, 0, 1 + 0.5 * 2 + 0.25 * 3, 3, 1, 0.125),  # three steps, the last terminal
        (1, 0, 2 + 0.5 * 3, 3, 1, 0.25),  # stops at the termination
        (2, 0, 3, 3, 1, 0.5),
        (10, 0, 10 + 0.5 * 20, 12, 0, 0.25),  # stops at the truncation: bootstraps from s12
        (11, 0, 20, 12, 0, 0.5),
        (20, 0, 100, 21, 0, 0.5),  # the newest step: nothing follows yet
    ]
    np.testing.assert_allclose(rows, np.array(expected, np.float32))


def test_one_step_rows_are_the_stored_transitions():
    buffer = ReplayBuffer(16, obs_dim=1, action_dim=1, gamma=0.5)
    _episodes(buffer)
    rows = buffer.packed(np.arange(6))
    np.testing.assert_array_equal(rows[:, REWARD], [1, 2, 3, 10, 20, 100])
    np.testing.assert_array_equal(rows[:, NEXT_OBS], [1, 2, 3, 11, 12, 21])
    np.testing.assert_array_equal(rows[:, DISCOUNT], 0.5)


def test_n_step_follows_each_env_copy_of_a_vector_env():
    buffer = ReplayBuffer(32, obs_dim=1, action_dim=1, n_steps=2, gamma=0.9)
    for t in range(4):  # copy A: observations t, rewards t; copy B: 100 + t, rewards -t
        obs = np.array([[t], [100 + t]], np.float32)
        buffer.add(obs, np.zeros((2, 1)), np.array([t, -t]), obs + 1, np.zeros(2))
    rows = buffer.packed(np.arange(8))
    # Row 2t is A's step t, row 2t+1 B's: two steps ahead within the same copy.
    np.testing.assert_allclose(rows[0, [REWARD, NEXT_OBS]], [0 + 0.9 * 1, 2])
    np.testing.assert_allclose(rows[1, [REWARD, NEXT_OBS]], [0 - 0.9 * 1, 102])
    np.testing.assert_allclose(rows[4, [REWARD, NEXT_OBS]], [2 + 0.9 * 3, 4])
    np.testing.assert_allclose(rows[7, [REWARD, NEXT_OBS, DISCOUNT]], [-3, 104, 0.9])


def test_n_step_after_the_ring_wraps():
    buffer = ReplayBuffer(4, obs_dim=1, action_dim=1, n_steps=3, gamma=0.5)
    for t in range(7):  # one long episode; slots now hold steps 4, 5, 6, 3
        buffer.add([float(t)], [0.0], float(t), [float(t + 1)], False)
    rows = buffer.packed(np.array([3, 0, 1, 2]))  # steps 3..6, oldest first
    np.testing.assert_allclose(rows[:, REWARD], [3 + 2 + 1.25, 4 + 2.5 + 1.5, 5 + 3, 6])
    np.testing.assert_allclose(rows[:, NEXT_OBS], [6, 7, 7, 7])


@pytest.mark.parametrize("algorithm", ["sac", "tqc"])
def test_a_run_with_n_step_returns(tmp_path, algorithm):
    result = train(tiny_config(tmp_path, "Pendulum-v1", n_steps=3, algorithm=algorithm))
    assert result.buffer.n_steps == 3
    assert np.isfinite(result.summary["eval_return_mean"])
