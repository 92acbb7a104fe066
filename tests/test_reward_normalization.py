"""Reward normalisation (normalize_rewards): the running std of the discounted return,
each env copy's own, divides the rewards in the update; never the replay, the logged
returns or an export."""

import dataclasses
import json

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch

from tfsac import SACConfig, SACLearner, Trainer
from tfsac.data.collector import Collector
from tfsac.data.envs import env_spec
from tfsac.data.return_normalizer import ReturnNormalizer


def test_the_divisor_is_the_std_of_every_return_folded_in():
    normalizer = ReturnNormalizer(gamma=0.9)
    assert normalizer.divisor == 1.0  # before any data
    normalizer.update([1.0, 2.0])
    normalizer.update([3.0])
    # Returns 1, 2, 3: mean 2, population variance 2/3; times 1 - gamma.
    assert normalizer.mean == pytest.approx(2.0)
    assert normalizer.divisor == pytest.approx(0.1 * np.sqrt(2 / 3 + 1e-8))
    again = ReturnNormalizer(gamma=0.9)
    again.load_state(json.loads(json.dumps(normalizer.state())))
    assert again.divisor == normalizer.divisor


def test_each_copy_discounts_its_own_episode_and_starts_again_after_it():
    def env_fn():
        return gym.make("Pendulum-v1", max_episode_steps=3)

    collector = Collector(env_fn, env_spec("Pendulum-v1", env_fn()), 2, "sync", seed=0, gamma=0.5)
    collector.reset(seed=0)
    expected = np.zeros(2)
    for t in range(5):
        transitions = collector.step(None)
        # G_t = gamma G_{t-1} + r_t, with G = 0 before each episode's first step.
        expected = (0.0 if t % 3 == 0 else 0.5 * expected) + transitions.reward
        np.testing.assert_allclose(transitions.discounted_return, expected)
    collector.close()


def test_dividing_by_d_is_the_update_of_rewards_scaled_by_one_over_d():
    batch = random_batch(2, 16, 3, 2, seed=3)
    common = dict(hidden_sizes=(16,), seed=5, jit_compile=False)  # no XLA compile: faster
    normalized = SACLearner(3, 2, SACConfig(**common, normalize_rewards=True))
    scaled = SACLearner(3, 2, SACConfig(**common, reward_scale=0.25))
    for part in ("actor", "critic", "target_critic"):
        getattr(scaled, part).set_weights(getattr(normalized, part).get_weights())
    normalized.set_reward_divisor(4.0)
    a, b = normalized.update(batch), scaled.update(batch)
    for name in ("critic_loss", "actor_loss", "q_mean"):
        assert a[name] == pytest.approx(b[name], rel=1e-5), name


def test_a_run_keeps_raw_rewards_checkpoints_the_statistics_and_exports_without_them(tmp_path):
    config = SACConfig(
        env_id="Pendulum-v1",
        total_steps=200,
        learning_starts=100,
        batch_size=16,
        hidden_sizes=(8,),
        eval_every=200,
        eval_episodes=1,
        log_every=100,
        checkpoint_every=100,
        run_dir=str(tmp_path / "run"),
        export_dir=str(tmp_path / "models"),
        normalize_rewards=True,
        jit_compile=False,
    )
    trainer = Trainer(config, export=True)
    result = trainer.run()
    divisor = float(trainer.learner.sac.reward_divisor.numpy())
    statistics = trainer.updates.returns.state()
    # Pendulum's rewards are in [-16.3, 0]: the replay holds them as the env gave them,
    # and their discounted returns spread by far more than 1 / (1 - gamma).
    assert trainer.buffer.reward[:200].min() < -1.0 and trainer.buffer.reward.max() <= 0.0
    assert statistics["count"] == 200 and divisor > 1.0
    expected = 0.01 * np.sqrt(statistics["variance"] + 1e-8)
    assert divisor == pytest.approx(expected, rel=1e-6)
    resumed = Trainer(dataclasses.replace(config, total_steps=300), export=False, resume=True)
    assert resumed.updates.returns.state() == statistics
    assert float(resumed.learner.sac.reward_divisor.numpy()) == divisor
    served = tf.saved_model.load(result.saved_model_path)
    assert not any("reward_divisor" in v.name for v in served.variables)
