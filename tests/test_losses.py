"""Losses on hand-computed numbers, alone and as the learner assembles them."""

import numpy as np
import pytest
import tensorflow as tf

from tfsac import SACConfig, SACLearner
from tfsac.algorithm import losses


def test_soft_td_target_masks_termination_only():
    reward = tf.constant([1.0, 2.0])
    terminated = tf.constant([0.0, 1.0])
    next_q = tf.constant([[3.0, 7.0], [5.0, 4.0]])  # min over critics: [3, 4]
    next_log_prob = tf.constant([-1.0, 0.5])
    y = losses.soft_td_target(reward, terminated, next_q, next_log_prob, alpha=0.2, gamma=0.9)
    # y0 = 1 + 0.9 * (3 - 0.2 * -1) = 3.88 ; y1 = 2 (terminated: no bootstrap)
    np.testing.assert_allclose(y.numpy(), [3.88, 2.0], rtol=1e-6)


def test_critic_loss_sums_over_critics():
    q = tf.constant([[1.0, 2.0], [0.0, 4.0]])
    y = tf.constant([2.0, 2.0])
    # critic 0: 0.5 * (1 + 0) / 2 = 0.25 ; critic 1: 0.5 * (4 + 4) / 2 = 2.0
    assert losses.critic_loss(q, y).numpy() == pytest.approx(2.25)


def test_actor_loss_uses_min_q():
    log_prob = tf.constant([-1.0, 2.0])
    q = tf.constant([[1.0, 5.0], [3.0, 4.0]])  # min: [1, 4]
    # mean(0.5 * [-1, 2] - [1, 4]) = mean([-1.5, -3]) = -2.25
    assert losses.actor_loss(log_prob, q, alpha=0.5).numpy() == pytest.approx(-2.25)


def test_alpha_loss_and_its_gradient():
    log_alpha = tf.Variable(np.log(0.5), dtype=tf.float32)
    log_prob = tf.constant([-1.0, -3.0])
    with tf.GradientTape() as tape:
        loss = losses.alpha_loss(log_alpha, log_prob, target_entropy=-1.0)
    # -(log 0.5) * mean([-2, -4]) = 3 * log 0.5
    assert loss.numpy() == pytest.approx(3 * np.log(0.5), rel=1e-6)
    # Entropy (2) above target (1): gradient +3 > 0, so descent lowers alpha.
    assert tape.gradient(loss, log_alpha).numpy() == pytest.approx(3.0)


def _constant_learner(gamma=0.9, tau=0.005, **kw):
    """A learner whose critics output constants: zero kernels, head biases set by hand."""
    config = SACConfig(
        hidden_sizes=(4,), alpha=1e-6, learning_rate=1e-6, gamma=gamma, tau=tau, **kw
    )
    learner = SACLearner(obs_dim=2, action_dim=1, config=config)
    models = (learner.critic, learner.target_critic, learner.actor)
    models += (learner.checkpoint_objects().get("value"),)  # v1 only
    for model in (m for m in models if m is not None):
        for v in model.variables:
            v.assign(tf.zeros_like(v))
    learner.critic.head.bias.assign([[[1.0]], [[2.0]]])
    if learner.target_critic is not None:
        learner.target_critic.head.bias.assign([[[3.0]], [[5.0]]])
    else:
        for v in learner.sac.variant.target_value.variables:
            v.assign(tf.zeros_like(v))
        learner.sac.variant.target_value.head.bias.assign([4.0])
    return learner


def _batch(reward, terminated):
    n = len(reward)
    return {
        "observation": np.ones((1, n, 2), np.float32),
        "action": np.zeros((1, n, 1), np.float32),
        "reward": np.array([reward], np.float32),
        "next_observation": np.ones((1, n, 2), np.float32),
        "terminated": np.array([terminated], np.float32),
    }


def test_learner_losses_on_constant_networks():
    learner = _constant_learner()
    metrics = learner.update(_batch([1.0, 2.0], [0.0, 1.0]))
    # Q = (1, 2), target min Q' = 3: y = (1 + 0.9 * 3, 2) = (3.7, 2).
    # critic loss = 0.5 * ((1-3.7)^2 + (1-2)^2) / 2 + 0.5 * ((2-3.7)^2 + 0) / 2 = 2.795
    assert float(metrics["critic_loss"]) == pytest.approx(2.795, abs=1e-4)
    assert float(metrics["q_mean"]) == pytest.approx(1.5, abs=1e-6)
    # alpha ~ 0: actor loss = -min Q = -1 (up to one Adam step of size 1e-6).
    assert float(metrics["actor_loss"]) == pytest.approx(-1.0, abs=1e-4)
    assert float(metrics["alpha"]) == pytest.approx(1e-6)


def test_reward_scale_multiplies_rewards_in_the_target():
    learner = _constant_learner(reward_scale=2.0)
    metrics = learner.update(_batch([1.0, 2.0], [0.0, 1.0]))
    # y = (2 * 1 + 0.9 * 3, 2 * 2) = (4.7, 4):
    # 0.5 * ((1-4.7)^2 + (1-4)^2) / 2 + 0.5 * ((2-4.7)^2 + (2-4)^2) / 2 = 8.495
    assert metrics["critic_loss"] == pytest.approx(8.495, abs=1e-4)


def test_learner_polyak_target_update_is_exact_at_half():
    learner = _constant_learner(tau=0.5)
    learner.update(_batch([1.0, 2.0], [0.0, 1.0]))
    critic_bias = learner.critic.head.bias.numpy()
    target_bias = learner.target_critic.head.bias.numpy()
    np.testing.assert_allclose(target_bias, 0.5 * (critic_bias + [[[3.0]], [[5.0]]]), rtol=1e-7)


def test_v1_losses_by_hand():
    # y = r + gamma * (1 - d) * V'(s') = (1 + 0.9 * 4, 2 + 0) = (4.6, 2).
    y = losses.v1_q_target(tf.constant([1.0, 2.0]), tf.constant([0.0, 1.0]), 4.0, 0.9)
    np.testing.assert_allclose(y.numpy(), [4.6, 2.0], rtol=1e-6)
    # V target = min_i Q_i - alpha * log pi = (min(1, 3) - 0.5 * -2, min(2, 0) - 0.5 * 0)
    # = (2, 0); loss = 0.5 * mean((V - target)^2) = 0.5 * ((0 - 2)^2 + (1 - 0)^2) / 2 = 1.25.
    v_loss = losses.value_loss(
        tf.constant([0.0, 1.0]),
        tf.constant([[1.0, 2.0], [3.0, 0.0]]),
        tf.constant([-2.0, 0.0]),
        0.5,
    )
    assert float(v_loss) == pytest.approx(1.25)


def test_v1_learner_on_constant_networks():
    learner = _constant_learner(tau=0.5, variant="v1")
    assert learner.target_critic is None and learner.sac.variant.value is not None
    metrics = learner.update(_batch([1.0, 2.0], [0.0, 1.0]))
    # Target V = 4: y = (4.6, 2); critic loss = 0.5 * ((1-4.6)^2 + (1-2)^2) / 2
    # + 0.5 * ((2-4.6)^2 + 0) / 2 = 3.49 + 1.69 = 5.18.
    assert metrics["critic_loss"] == pytest.approx(5.18, abs=1e-4)
    # V = 0 against min Q - alpha log pi ~ 1 (alpha ~ 0): 0.5 * 1^2.
    assert metrics["value_loss"] == pytest.approx(0.5, abs=1e-4)
    # Polyak at tau = 0.5 on V (moved by one Adam step of 1e-6) and target V (4).
    v_bias = float(learner.sac.variant.value.head.bias.numpy()[0])
    assert float(learner.sac.variant.target_value.head.bias.numpy()[0]) == pytest.approx(
        0.5 * (v_bias + 4.0), abs=1e-7
    )
