"""CrossQ (Bhatt et al. 2024): batch renormalisation on hand-computed numbers, the joint
batch, and which calls move the statistics (training steps) and which never do (acting,
evaluation, export)."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch, tiny_config

from tfsac import SACConfig, SACLearner, TfsacError, Trainer, train
from tfsac.algorithm.layers import BatchRenorm
from tfsac.algorithm.resolve import resolve
from tfsac.deploy.loading import load_policy

X = np.array([[0.0, 10.0], [2.0, 10.0], [4.0, 16.0], [6.0, 12.0]], np.float32)
EPS = 1e-3


def test_batch_renorm_is_batch_norm_in_warmup_and_moves_its_statistics():
    layer = BatchRenorm(momentum=0.9, warmup_steps=1, epsilon=EPS)
    y = layer(X, training=True).numpy()
    mean, var = X.mean(axis=0), X.var(axis=0)  # [3, 12], [5, 6]
    np.testing.assert_allclose(y, (X - mean) / np.sqrt(var + EPS), rtol=1e-5)
    np.testing.assert_allclose(layer.moving_mean.numpy(), [[0.3, 1.2]], rtol=1e-6)
    np.testing.assert_allclose(layer.moving_variance.numpy(), [[0.9 + 0.5, 0.9 + 0.6]], rtol=1e-6)
    assert layer.steps.numpy() == 1


def test_batch_renorm_after_warmup_corrects_towards_the_moving_statistics():
    layer = BatchRenorm(momentum=0.9, warmup_steps=1, r_max=3.0, d_max=5.0, epsilon=EPS)
    layer(X, training=True)  # warm-up call: moving mean [0.3, 1.2], variance [1.4, 1.5]
    x2 = X * 0.1
    y = layer(x2, training=True).numpy()
    mean, var = x2.mean(axis=0), x2.var(axis=0)
    mu, sigma = np.array([0.3, 1.2]), np.sqrt(np.array([1.4, 1.5]) + EPS)
    std = np.sqrt(var + EPS)
    r = np.clip(std / sigma, 1 / 3.0, 3.0)
    d = np.clip((mean - mu) / sigma, -5.0, 5.0)
    assert r[0] == pytest.approx(1 / 3.0)  # sigma_B = 0.22 against 1.18: clipped
    np.testing.assert_allclose(y, (x2 - mean) / std * r + d, rtol=1e-4, atol=1e-5)
    # r and d are constants of the batch: the gradient is plain batch norm's, times r.
    r = np.clip(std / np.sqrt(layer.moving_variance.numpy()[0] + EPS), 1 / 3.0, 3.0)
    plain = BatchRenorm(warmup_steps=10**9, epsilon=EPS)
    weights = tf.constant(np.random.default_rng(0).normal(size=(4, 2)), tf.float32)
    grads = []
    for norm in (layer, plain):
        x = tf.Variable(x2)
        with tf.GradientTape() as tape:
            out = tf.reduce_sum(norm(x, training=True) * weights)
        grads.append(tape.gradient(out, x).numpy())
    np.testing.assert_allclose(grads[0], grads[1] * r, rtol=1e-4, atol=1e-6)


def test_batch_renorm_outside_training_uses_the_moving_statistics_and_changes_nothing():
    layer = BatchRenorm(momentum=0.5, warmup_steps=0)
    layer(X, training=True)
    state = [v.numpy().copy() for v in layer.weights]
    mean, var = layer.moving_mean.numpy(), layer.moving_variance.numpy()
    for training in (None, False):
        y = layer(X, training=training).numpy()
        np.testing.assert_allclose(y, (X - mean) / np.sqrt(var + 1e-3), rtol=1e-5)
    for v, s in zip(layer.weights, state, strict=True):
        np.testing.assert_array_equal(v.numpy(), s)


def test_ensemble_members_keep_their_own_statistics():
    layer = BatchRenorm(momentum=0.0)
    members = np.stack([X, 2 * X + 1])  # [2, B, 2]
    layer(members, training=True)
    np.testing.assert_allclose(
        layer.moving_mean.numpy()[:, 0], [X.mean(0), 2 * X.mean(0) + 1], rtol=1e-6
    )


def _crossq(**kw):
    return SACConfig(
        algorithm="crossq", hidden_sizes=(16,), critic_hidden_sizes=(32,), jit_compile=False, **kw
    )


def _stats(model):
    return {v.path: v.numpy().copy() for v in model.non_trainable_variables}


def test_crossq_defaults_are_the_papers_and_can_be_overridden():
    config = resolve(SACConfig(algorithm="crossq"))
    assert (config.policy_delay, config.adam_beta1, config.critic_hidden_sizes) == (
        3,
        0.5,
        (2048, 2048),
    )
    assert resolve(SACConfig()).policy_delay == 1
    assert resolve(SACConfig()).critic_hidden_sizes == (256, 256)
    own = SACConfig(algorithm="crossq", policy_delay="1", critic_hidden_sizes="512,512")
    assert (own.policy_delay, own.critic_hidden_sizes) == (1, (512, 512))
    with pytest.raises(
        TfsacError, match="variant v1 is algorithm sac_v1, and algorithm is crossq: give one"
    ):
        resolve(SACConfig(algorithm="crossq", variant="v1"))
    with pytest.raises(TfsacError, match="crossq does not take use_sde"):
        resolve(SACConfig(algorithm="crossq", use_sde=True))
    with pytest.raises(TfsacError, match="policy_delay must be 'auto' or an integer"):
        SACConfig(policy_delay="often")


def test_crossq_networks_start_lecun_normal_and_the_others_glorot_uniform():
    """CrossQ's kernels have variance 1 / fan_in (flax's default, as in the paper's code and
    SBX); SAC's keep Keras' Glorot uniform, variance 2 / (fan_in + fan_out)."""
    wide = dict(hidden_sizes=(400,), critic_hidden_sizes=(400,))
    for algorithm, want in (("crossq", lambda i, o: 1 / i), ("sac", lambda i, o: 2 / (i + o))):
        learner = SACLearner(30, 2, SACConfig(algorithm=algorithm, **wide))
        kernels = [
            v.numpy()
            for model in (learner.sac.actor, learner.sac.critic)
            for v in model.trainable_variables
            if v.path.endswith("kernel")
        ]
        assert len(kernels) == 5  # actor: hidden, mean, log_std; critic: hidden, q
        for w in kernels:
            fan_in, fan_out = w.shape[-2:]
            assert w.var() == pytest.approx(want(fan_in, fan_out), rel=0.15), (algorithm, w.shape)


def test_crossq_update_trains_the_statistics_on_the_joint_batch_and_acting_does_not():
    learner = SACLearner(3, 2, _crossq(batch_norm_momentum=0.99))
    sac = learner.sac
    assert learner.target_critic is None and "target_critic" not in sac.checkpoint_objects()
    assert sac.actor_optimizer.beta_1 == 0.5
    rng = np.random.default_rng(0)
    batch = random_batch(1, 32, 3, 2)
    batch["next_observation"] += 2.0  # s' apart from s, so the joint mean tells them apart
    actor_stats, critic_stats = _stats(learner.actor), _stats(learner.critic)
    assert learner.update(batch)["finite"]
    # The critics' input statistics saw (s, a) and (s', a') as one batch: the observation
    # columns' moving mean moved 1% of the way to the mean over s and s'.
    joint = np.concatenate([batch["observation"][0], batch["next_observation"][0]])
    moving = learner.critic.input_norm.moving_mean.numpy()  # [n_critics, 1, obs + act]
    np.testing.assert_allclose(moving[:, 0, :3], [0.01 * joint.mean(0)] * 2, rtol=1e-4)
    assert all(not np.array_equal(v, critic_stats[k]) for k, v in _stats(learner.critic).items())
    # policy_delay 3: the actor (and its statistics) first trains on the third update.
    assert all(np.array_equal(v, actor_stats[k]) for k, v in _stats(learner.actor).items())
    metrics = learner.update({k: np.concatenate([v, v]) for k, v in batch.items()})
    assert metrics["actor_loss"] != 0.0
    assert all(not np.array_equal(v, actor_stats[k]) for k, v in _stats(learner.actor).items())
    # Acting, deterministic or sampled, reads the moving statistics and writes nothing.
    actor_stats, critic_stats = _stats(learner.actor), _stats(learner.critic)
    obs = rng.normal(size=(5, 3)).astype(np.float32)
    learner.act(obs), learner.act(obs, deterministic=True)
    for model, stats in ((learner.actor, actor_stats), (learner.critic, critic_stats)):
        for k, v in _stats(model).items():
            np.testing.assert_array_equal(v, stats[k])
    # The same observation alone or in a batch gets the same action (no batch statistics).
    np.testing.assert_allclose(
        learner.act(obs[:1], deterministic=True), learner.act(obs, deterministic=True)[:1], 1e-5
    )


def test_a_crossq_run_trains_exports_with_moving_statistics_and_resumes(tmp_path):
    config = tiny_config(
        tmp_path, "Pendulum-v1", algorithm="crossq", critic_hidden_sizes=(8,), checkpoint_every=20
    )
    result = train(config)
    policy = load_policy(result.saved_model_path)
    obs = np.random.default_rng(1).normal(size=(6, 3)).astype(np.float32)
    action = policy.signatures["serving_default"](observation=tf.constant(obs))["action"]
    # The export acts as the learner does, with the moving statistics (Pendulum: +-2).
    expected = 2.0 * result.learner.act(obs, deterministic=True)
    np.testing.assert_allclose(action.numpy(), expected, atol=1e-5)
    # The statistics are in the checkpoint: a resumed run starts from them.
    again = SACConfig.from_dict({**config.to_dict(), "total_steps": 60})
    resumed = Trainer(again, resume=True).learner
    for model in ("actor", "critic"):
        saved, restored = _stats(getattr(result.learner, model)), _stats(getattr(resumed, model))
        assert saved.keys() == restored.keys() and len(saved) >= 3
        for k, v in saved.items():
            np.testing.assert_array_equal(restored[k], v)
