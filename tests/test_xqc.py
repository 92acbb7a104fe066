"""XQC (algorithm xqc, network xqc): the options it fills in, the reward normaliser without
FlashSAC's bound against numpy, the networks' layers and order against a numpy forward
pass, one critic update against a numpy reference of its loss, the linear schedule to a
factor, and a tiny run trained, resumed and exported with parity."""

import math

import numpy as np
import pytest
import tensorflow as tf
from conftest import tf_runner_policy

from tfsac.algorithm.flashnet import UnitDense, XQCCritic
from tfsac.algorithm.layers import BatchRenorm
from tfsac.algorithm.learner import SACLearner
from tfsac.algorithm.resolve import resolve
from tfsac.algorithm.variants.xqc import XQC
from tfsac.config import SACConfig
from tfsac.config.schedules import parse_schedule
from tfsac.data.return_normalizer import ReturnNormalizer
from tfsac.errors import TfsacError


def test_xqc_fills_its_auto_options():
    config = resolve(SACConfig(algorithm="xqc"))
    assert (config.network, config.normalize_rewards, config.return_bound) == ("xqc", True, 0.0)
    assert (config.policy_delay, config.exploration_zeta) == (3, 0.0)
    assert config.critic_hidden_sizes == (512, 512, 512, 512)
    assert (config.n_bins, config.bin_range) == (101, 5.0)
    # The std whose Gaussian has entropy -1/2 per dimension: the target -dim(A)/2.
    assert 0.5 * math.log(2 * math.pi * math.e * config.target_std**2) == pytest.approx(-0.5)
    own = resolve(SACConfig(algorithm="xqc", target_entropy=-2.0))
    assert own.target_std == 0.0 and own.target_entropy == -2.0
    with pytest.raises(TfsacError, match="network xqc has batch norms of its own"):
        resolve(SACConfig(algorithm="crossq", network="xqc"))
    with pytest.raises(TfsacError, match="does not take use_sde"):
        resolve(SACConfig(algorithm="xqc", use_sde=True))


def test_the_rewards_are_divided_by_the_std_of_the_discounted_return_alone():
    """The authors' RewardNormalizer: G = gamma (1 - done) G + r over the collected steps,
    rewards / std(G): no max|G| term, no (1 - gamma) factor."""
    rng = np.random.default_rng(0)
    rewards = rng.normal(1.0, 3.0, size=300)
    done = rng.uniform(size=300) < 0.05
    rewards[100], done[100] = 200.0, True  # one large return, FlashSAC's bound's divisor
    gamma, g, returns = 0.97, 0.0, []
    for r, d in zip(rewards, done, strict=True):
        g = r + gamma * g
        returns.append(g)
        g = 0.0 if d else g
    returns = np.array(returns)
    config = resolve(SACConfig(algorithm="xqc", gamma=gamma))
    normaliser = ReturnNormalizer(config.gamma, config.return_bound)
    for chunk in np.array_split(returns, 7):
        normaliser.update(chunk)
    scale = XQC.reward_factor(config) / normaliser.divisor  # what a reward is multiplied by
    assert scale == pytest.approx(1.0 / np.sqrt(returns.var() + 1e-8), rel=1e-9)
    assert scale == pytest.approx(1.0 / (returns.std() + 1e-8), rel=1e-6)  # theirs
    assert abs(returns).max() / returns.std() > 5  # a max term would have set it instead
    bounded = resolve(SACConfig(algorithm="xqc", return_bound=5.0))  # FlashSAC's divisor
    assert XQC.reward_factor(bounded) == 1.0
    assert XQC.reward_factor(resolve(SACConfig(algorithm="xqc", normalize_rewards=False))) == 1.0


def test_the_critic_is_unit_norm_layers_batch_normed_before_each_relu():
    critic = XQCCritic(2, (8, 6), outputs=5)
    rng = np.random.default_rng(1)
    obs = rng.normal(size=(32, 3)).astype(np.float32)
    act = rng.uniform(-1, 1, (32, 2)).astype(np.float32)
    got = critic(obs, act, training=True).numpy()
    layers = critic.trunk.layers
    dense = [layer for layer in layers if isinstance(layer, UnitDense)] + [critic.head]
    norms = [critic.input_norm] + [layer for layer in layers if isinstance(layer, BatchRenorm)]
    assert [d.bias is None for d in dense] == [True, True, False]  # only the head has a bias
    assert [(n.momentum, n.epsilon) for n in norms] == [(0.99, 1e-3)] * 3
    kernels = [d.kernel.numpy() for d in dense]
    for kernel in kernels:  # each output unit's weights of unit norm, per member
        np.testing.assert_allclose(np.linalg.norm(kernel, axis=-2), 1.0, rtol=1e-5)
    # Orthogonal where there are no more units than inputs (8 -> 6), each member its own.
    first, second = kernels[1]
    np.testing.assert_allclose(first.T @ first, np.eye(6), atol=1e-5)
    assert np.abs(first - second).max() > 0.1

    def batch_norm(x):  # training: the batch's statistics, the biased variance
        return (x - x.mean(-2, keepdims=True)) / np.sqrt(x.var(-2, keepdims=True) + 1e-3)

    x = batch_norm(np.tile(np.concatenate([obs, act], -1)[None], [2, 1, 1]))
    for kernel in kernels[:2]:
        x = np.maximum(batch_norm(x @ kernel), 0.0)
    want = x @ kernels[2] + dense[2].bias.numpy()
    np.testing.assert_allclose(got, want, atol=1e-4)
    # The moving statistics moved towards the batch's (momentum 0.99, biased variance).
    xa = np.concatenate([obs, act], -1)
    np.testing.assert_allclose(
        norms[0].moving_variance.numpy()[0, 0], 0.99 + 0.01 * xa.var(0), rtol=1e-5
    )
    # Still plain batch norm much later: its renormalisation never starts.
    assert norms[0].warmup_steps > 2**24


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _reference_critic_loss(logits, next_logits, reward, terminated, next_log_prob, alpha, bins):
    """Numpy: the lowest next critic's distribution, its atoms shifted, projected by loops;
    each critic's cross-entropy averaged over the batch, summed over the critics."""
    probabilities = _softmax(next_logits)
    lowest = (probabilities * bins).sum(-1).argmin(0)
    width = bins[1] - bins[0]
    target = np.zeros((len(reward), len(bins)))
    for i in range(len(reward)):
        for k, z in enumerate(bins):
            y = reward[i] + 0.99 * (1 - terminated[i]) * (z - alpha * next_log_prob[i])
            b = (np.clip(y, bins[0], bins[-1]) - bins[0]) / width
            lo = int(np.floor(b))
            mass = probabilities[lowest[i], i, k]
            target[i, lo] += mass * (1 - (b - lo))
            target[i, min(lo + 1, len(bins) - 1)] += mass * (b - lo)
    log_q = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    return -(target[None] * log_q).sum(-1).mean(-1).sum()


def test_one_update_reports_the_numpy_reference_of_its_loss_and_keeps_unit_norms():
    config = SACConfig(
        algorithm="xqc", hidden_sizes=(8, 8), critic_hidden_sizes=(8, 8), batch_size=16,
        n_bins=11, initial_alpha=0.05, jit_compile=False, seed=3,
    )  # fmt: skip
    learner = SACLearner(3, 2, config)
    sac = learner.sac
    assert sac.target_entropy == pytest.approx(-1.0)  # -dim(A)/2
    rng = np.random.default_rng(1)
    batch = dict(
        observation=rng.normal(size=(16, 3)).astype(np.float32),
        action=rng.uniform(-1, 1, (16, 2)).astype(np.float32),
        reward=rng.normal(size=16).astype(np.float32),
        next_observation=rng.normal(size=(16, 3)).astype(np.float32),
        terminated=(rng.uniform(size=16) < 0.2).astype(np.float32),
    )
    learner.set_reward_divisor(0.01 * 0.5)  # tfsac's (1 - gamma) std(G) of a std of 0.5
    # The seeds the update will draw, from a copy of its generator.
    seeds = tf.random.Generator.from_state(sac.update_rng.state.numpy(), sac.update_rng.algorithm)
    seed = tf.cast(seeds.make_seeds(sac.variant.seeds_needed), tf.int32)[:, 0]
    next_action, next_log_prob = sac.sample_with_log_prob(batch["next_observation"], seed)
    obs = np.concatenate([batch["observation"], batch["next_observation"]])
    action = np.concatenate([batch["action"], next_action.numpy()])
    next_logits = sac.target_critic(obs, action, training=True).numpy()[:, 16:]
    logits = sac.critic(obs, action, training=True).numpy()[:, :16]
    want = _reference_critic_loss(
        logits, next_logits, batch["reward"] / 0.5, batch["terminated"], next_log_prob.numpy(),
        float(sac.temperature.alpha()), np.linspace(-5, 5, 11),
    )  # fmt: skip
    before = [v.numpy() for v in learner.critic.trainable_variables]
    metrics = learner.update({k: v[None] for k, v in batch.items()})
    assert metrics["critic_loss"] == pytest.approx(want, rel=1e-4)
    after = [v.numpy() for v in learner.critic.trainable_variables]
    assert all(np.abs(a - b).max() > 0 for a, b in zip(after, before, strict=True))
    for model in (learner.actor, learner.critic):
        dense = [layer for layer in model._flatten_layers() if isinstance(layer, UnitDense)]
        assert len(dense) >= 3
        for layer in dense:  # back on their spheres after the step
            np.testing.assert_allclose(
                np.linalg.norm(layer.kernel.numpy(), axis=-2), 1.0, rtol=1e-5
            )


def test_the_linear_schedule_falls_to_its_factor_over_its_steps():
    schedule = parse_schedule("linear:0.1:1000")
    assert schedule(0, 10) == 1.0 and schedule(1000, 10) == pytest.approx(0.1)
    assert schedule(500, 10) == pytest.approx(0.55) and schedule(5000, 10) == pytest.approx(0.1)
    assert parse_schedule("linear:0.5")(50, 100) == pytest.approx(0.75)  # over total_steps
    assert parse_schedule("linear")(50, 100) == 0.5  # to 0, as before
    for bad in ("linear:", "linear:0", "linear:0.5:0", "linear:a"):
        with pytest.raises(TfsacError, match="linear\\[:<factor>"):
            parse_schedule(bad)


def test_env_runners_act_with_the_xqc_actor_through_tf():
    policy = tf_runner_policy("xqc")
    actions = np.stack([policy.sample(np.zeros((2, 3), np.float32)) for _ in range(20)])
    assert actions.shape == (20, 2, 2) and np.abs(actions).max() < 1
    assert np.all(actions[1:] != actions[:-1])  # a new draw every step: no held noise


@pytest.mark.learning
def test_pendulum_with_xqc_reaches_minus_200(tmp_path):
    """XQC (its categorical critics, unit-norm layers batch-normed before each ReLU, the
    std(G) reward scale, the entropy target -dim(A)/2) with its authors' initial temperature,
    layers 64 wide to save time."""
    from tfsac import train

    config = SACConfig(
        env_id="Pendulum-v1", algorithm="xqc", hidden_sizes=(64, 64),
        critic_hidden_sizes=(64, 64), initial_alpha=0.01, total_steps=20_000,
        learning_starts=1000, jit_compile=False, run_dir=str(tmp_path / "run"),
    )  # fmt: skip
    result = train(config, export=False)
    print(f"xqc: eval return {result.summary['eval_return_mean']:.1f}")
    assert result.summary["eval_return_mean"] >= -200
