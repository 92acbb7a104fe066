"""gSDE (arXiv:2005.05719): the noise's distribution, when it is resampled, what is served."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import tiny_config

from tfsac import EnvSpec, SACConfig, SACLearner, TfsacError, Trainer, export_policy, load_policy
from tfsac.algorithm.resolve import resolve
from tfsac.data.envs import unit_to_bounds


def _learner(num_envs=1, **kw):
    # Seeded: the statistics below need a pre-tanh std well inside float32's tanh range.
    keras.utils.set_random_seed(0)
    config = SACConfig(hidden_sizes=(8,), use_sde=True, num_envs=num_envs, **kw)
    learner = SACLearner(3, 2, config)
    learner.actor.log_std.assign(np.linspace(-3.0, -1.0, 16).reshape(8, 2))
    return learner


def _obs(n, seed=0):
    return np.random.default_rng(seed).normal(0, 2, (n, 3)).astype(np.float32)


def test_actor_std_is_the_marginal_of_the_feature_noise():
    learner = _learner()
    obs = _obs(5)
    _, features = learner.actor.mean_and_features(obs)
    _, log_std = learner.actor(obs)
    sigma2 = np.exp(2.0 * learner.actor.log_std.numpy())
    expected = 0.5 * np.log(np.square(features.numpy()) @ sigma2 + 1e-6)
    np.testing.assert_allclose(log_std.numpy(), expected, rtol=1e-5)


def test_noise_is_held_until_reset_and_per_env():
    learner = _learner(num_envs=2)
    obs = np.repeat(_obs(1), 2, axis=0)
    first = learner.act(obs)
    np.testing.assert_array_equal(learner.act(obs), first)  # same E: same action
    assert not np.allclose(first[0], first[1])  # each env copy has its own E
    learner.reset_noise()
    assert not np.allclose(learner.act(obs), first)


@pytest.mark.parametrize("log_std_max", [2.0, -2.5])
def test_noise_over_resets_has_the_per_state_gaussian_marginal(log_std_max):
    """The marginal the losses use: with log_std_max at -2.5 the per-state log_std is
    clipped, and the noise follows (a reviewer found the losses clipping it and the acting
    not: training used another distribution than the one that collected the data)."""
    learner = _learner(log_std_max=log_std_max)
    obs = _obs(1, seed=3)
    loc, raw = (t.numpy()[0] for t in learner.actor(obs))
    log_std = np.minimum(raw, log_std_max)
    assert (log_std_max < 0) == np.any(raw > log_std_max)
    pre_tanh = []
    for _ in range(2000):
        learner.reset_noise()
        pre_tanh.append(np.arctanh(np.clip(learner.act(obs)[0], -0.999999, 0.999999)))
    pre_tanh = np.array(pre_tanh)
    assert np.all(np.exp(log_std) < 1.5)  # tanh far from saturating: arctanh is exact
    # 2000 draws: the sample std is within ~3% (1.6 standard errors per 1%) of the true one.
    np.testing.assert_allclose(pre_tanh.std(axis=0), np.exp(log_std), rtol=0.08)
    np.testing.assert_allclose(pre_tanh.mean(axis=0), loc, atol=0.2 * np.exp(log_std).max())


def test_deterministic_action_and_served_policy_ignore_the_noise(tmp_path):
    learner = _learner()
    obs = _obs(4)
    mean, _ = learner.actor.mean_and_features(obs)
    expected = np.tanh(np.clip(mean.numpy(), -2.0, 2.0))
    np.testing.assert_allclose(learner.act(obs, deterministic=True), expected, rtol=1e-6)
    learner.reset_noise()
    np.testing.assert_allclose(learner.act(obs, deterministic=True), expected, rtol=1e-6)
    spec = EnvSpec(
        "Test-v0",
        obs_dim=3,
        action_dim=2,
        action_low=(0.0, -1.0),
        action_high=(4.0, 1.0),
        observation_space="Box(3)",
        action_space="Box(2)",
        observation_flattening="none",
    )
    path = export_policy(learner.actor, spec, str(tmp_path), "sde", {})
    model = load_policy(path)
    served = model.signatures["serving_default"](observation=tf.constant(obs))["action"]
    np.testing.assert_allclose(
        served.numpy(), unit_to_bounds(expected, spec.action_low, spec.action_high), rtol=1e-5
    )
    sampled = model.signatures["sample"](observation=tf.constant(obs))["action"].numpy()
    assert np.all((sampled >= [0.0, -1.0]) & (sampled <= [4.0, 1.0]))


def test_update_trains_the_log_std_matrix():
    learner = _learner()
    before = learner.actor.log_std.numpy().copy()
    rng = np.random.default_rng(0)
    batch = {
        "observation": rng.normal(size=(2, 16, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (2, 16, 2)).astype(np.float32),
        "reward": rng.normal(size=(2, 16)).astype(np.float32),
        "next_observation": rng.normal(size=(2, 16, 3)).astype(np.float32),
        "terminated": np.zeros((2, 16), np.float32),
    }
    assert learner.update(batch)["finite"]
    assert not np.array_equal(learner.actor.log_std.numpy(), before)


@pytest.mark.parametrize("at_warmup", [False, True])
def test_loop_resamples_at_each_phase_and_every_sde_sample_freq(tmp_path, at_warmup):
    cfg = tiny_config(
        tmp_path,
        "Pendulum-v1",
        use_sde=True,
        use_sde_at_warmup=at_warmup,
        sde_sample_freq=2,
        train_freq=4,
        gradient_steps=4,
    )
    trainer = Trainer(cfg, export=False)
    learner, calls = trainer.learner, []
    acted = []
    reset, fused = learner.reset_noise, learner.update_and_act
    learner.reset_noise = lambda: (calls.append(("reset", trainer.loop.step)), reset())[1]
    learner.update_and_act = lambda *a: (calls.append(("update", trainer.loop.step)), fused(*a))[1]
    act = learner.act
    learner.act = lambda obs, deterministic=False: (
        acted.append(trainer.loop.step) if not deterministic else None,
        act(obs, deterministic),
    )[1]
    trainer.run()
    # 40 steps, learning from step 21: a phase ends every 4 env steps (before learning,
    # explicitly; after, inside the update call) and the noise is redrawn 2 steps into it.
    phases = [("reset", s) for s in (4, 8, 12, 16, 20)] + [
        ("update", s) for s in (24, 28, 32, 36, 40)
    ]
    mid = [("reset", s) for s in (2, 6, 10, 14, 18, 22, 26, 30, 34, 38)]
    assert sorted(calls, key=lambda c: c[1]) == sorted(phases + mid, key=lambda c: c[1])
    # Warmup actions (steps 1-20, chosen when 0-19 are done) come from gSDE only with
    # use_sde_at_warmup.
    assert (min(acted) < 20) == at_warmup


def test_gsde_needs_the_built_in_actor():
    from tfsac.algorithm.networks import Actor

    with pytest.raises(TfsacError, match="use_sde"):
        SACLearner(3, 2, SACConfig(use_sde=True), actor_fn=lambda o, a: Actor(a, (8,)))


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(use_sde=True, sde_sample_freq=0), "sde_sample_freq"),
        (dict(sde_sample_freq=4), "need use_sde"),
        (dict(use_sde_at_warmup=True), "need use_sde"),
        (dict(use_sde=True, log_std_init=5.0), "log_std_init"),
    ],
)
def test_bad_gsde_settings(kw, message):
    with pytest.raises(TfsacError, match=message):
        resolve(SACConfig(**kw))
