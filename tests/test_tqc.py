"""TQC (Kuznetsov et al. 2020): its losses on hand-computed numbers, and the update as the
learner assembles it."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch, tiny_config

from tfsac import SACConfig, SACLearner, TfsacError, train
from tfsac.algorithm import losses
from tfsac.algorithm.resolve import resolve


def test_truncated_target_pools_the_atoms_and_drops_the_top_ones_per_critic():
    # Two critics, three atoms each; dropping 1 per critic keeps the 4 lowest of the 6.
    next_quantiles = tf.constant([[[1.0, 5.0, 3.0]] * 2, [[2.0, 0.0, 4.0]] * 2])  # [2, B=2, 3]
    y, keep = losses.truncated_quantile_target(
        reward=tf.constant([1.0, 3.0]),
        terminated=tf.constant([0.0, 1.0]),
        next_quantiles=next_quantiles,
        next_log_prob=tf.constant([2.0, 2.0]),
        alpha=0.5,
        gamma=0.5,
        drop_per_net=1,
    )
    # Pooled [1, 5, 3, 2, 0, 4]; the top two (5 and 4) dropped; minus alpha * log pi = 1:
    # y = 1 + 0.5 * [0, 4, 2, 1, -1, 3]. The terminated row keeps its reward only.
    np.testing.assert_allclose(y.numpy(), [[1.0, 3.0, 2.0, 1.5, 0.5, 2.5], [3.0] * 6])
    np.testing.assert_array_equal(keep.numpy(), [[1, 0, 1, 1, 1, 0]] * 2)
    # Ties: exactly N * drop_per_net atoms are dropped, whichever of the equal ones.
    _, keep = losses.truncated_quantile_target(
        tf.zeros(1), tf.zeros(1), tf.ones([2, 1, 3]), tf.zeros(1), 0.1, 0.9, drop_per_net=1
    )
    assert keep.numpy().sum() == 4


def test_quantile_huber_loss_by_hand():
    quantiles = tf.constant([[[0.0, 2.0]]])  # one critic, one sample, taus 0.25 and 0.75
    target = tf.constant([[1.0, 4.0]])
    # tau 0.25, z = 0: u = 1 -> 0.25 * 0.5; u = 4 -> 0.25 * 3.5; mean 0.5
    # tau 0.75, z = 2: u = -1 -> |0.75 - 1| * 0.5; u = 2 -> 0.75 * 1.5; mean 0.625
    # Averaged over the quantiles too (sb3-contrib's and the authors' scale; a reviewer
    # found the sum, 1.125, under a docstring that said the references sum).
    assert losses.quantile_huber_loss(quantiles, target).numpy() == pytest.approx(0.5625)
    # Averaged over critics: a second, equal critic leaves it.
    twice = tf.concat([quantiles, quantiles], axis=0)
    assert losses.quantile_huber_loss(twice, target).numpy() == pytest.approx(0.5625)
    # A dropped atom (here the 4) leaves the mean over the kept ones: (0.125 + 0.125) / 2.
    keep = tf.constant([[1.0, 0.0]])
    assert losses.quantile_huber_loss(quantiles, target, keep).numpy() == pytest.approx(0.125)
    # Its gradient pushes each quantile toward its tau-quantile of the targets.
    z = tf.Variable(quantiles)
    with tf.GradientTape() as tape:
        loss = losses.quantile_huber_loss(z, target)
    # d/dz0 = -(0.25 * 1 + 0.25 * 1) / 4 = -0.125; d/dz1 = (0.25 * 1 - 0.75 * 1) / 4 = -0.125
    np.testing.assert_allclose(tape.gradient(loss, z).numpy(), [[[-0.125, -0.125]]])


def test_tqc_actor_loss_uses_the_mean_of_all_atoms():
    quantiles = tf.constant([[[1.0, 3.0]], [[5.0, 7.0]]])  # mean over critics and atoms: 4
    loss = losses.tqc_actor_loss(tf.constant([2.0]), quantiles, alpha=0.5)
    assert loss.numpy() == pytest.approx(0.5 * 2.0 - 4.0)


def _tqc(**kw):
    return SACConfig(algorithm="tqc", hidden_sizes=(16, 16), n_quantiles=5, **kw)


def test_tqc_update_trains_quantile_critics_and_changes_every_network():
    learner = SACLearner(3, 2, _tqc(num_critics=3, top_quantiles_to_drop_per_net=2))
    q = learner.critic(tf.zeros([4, 3]), tf.zeros([4, 2]))
    assert q.shape == (3, 4, 5)
    before = [v.numpy().copy() for v in learner.sac.trainable_state()]
    metrics = learner.update(random_batch(1, 32, 3, 2))
    assert metrics["finite"] and metrics["critic_loss"] > 0
    after = learner.sac.trainable_state()
    changed = {
        getattr(v, "path", v.name).split("/")[0].split(":")[0]
        for v, b in zip(after, before, strict=True)
        if not np.array_equal(v, b)
    }
    assert {"actor", "critic", "target_critic", "log_alpha"} <= changed, changed


def test_tqc_options_are_checked(tmp_path):
    with pytest.raises(TfsacError, match="smaller than n_quantiles"):
        resolve(_tqc(top_quantiles_to_drop_per_net=5))
    with pytest.raises(
        TfsacError, match="variant v1 is algorithm sac_v1, and algorithm is tqc: give one"
    ):
        resolve(_tqc(variant="v1"))
    with pytest.raises(
        TfsacError,
        match="algorithm must be one of crossq, flashsac, sac, sac_v1, tqc, xqc, or <module>:.* "
        "got 'qrsac'",
    ):
        resolve(SACConfig(algorithm="qrsac"))


def test_a_tqc_run_trains_checkpoints_resumes_and_exports(tmp_path):
    config = tiny_config(tmp_path, "Pendulum-v1", algorithm="tqc", n_quantiles=5)
    config.checkpoint_every = 20
    result = train(config)
    assert result.saved_model_path
    # A SAC run may not resume the TQC run's checkpoints (the critics differ).
    again = tiny_config(tmp_path, "Pendulum-v1", total_steps=60, run_dir=result.run_dir)
    with pytest.raises(TfsacError, match="algorithm='sac' differs from the resumed run's 'tqc'"):
        train(again, resume=True)
