"""FlashSAC (algorithm flashsac) and its shared parts: the projection onto the bins on
hand-computed numbers, the bounded reward normaliser against numpy, the unit-norm
layers after an update, one critic update against a numpy reference of its loss, the
zeta-repeated noise, the cosine schedule and the options flashsac fills in."""

import json
import math

import numpy as np
import pytest
import tensorflow as tf
from conftest import tf_runner_policy

from tfsac.algorithm import losses
from tfsac.algorithm.exploration import RepeatedNoise, truncated_zeta_cdf
from tfsac.algorithm.flashnet import UnitBatchNorm, UnitDense, UnitRMSNorm
from tfsac.algorithm.learner import SACLearner
from tfsac.algorithm.resolve import resolve
from tfsac.config import SACConfig
from tfsac.config.schedules import parse_schedule
from tfsac.data.return_normalizer import ReturnNormalizer
from tfsac.errors import TfsacError

BINS = tf.constant([-1.0, 0.0, 1.0])  # 3 bins on [-1, 1]: width 1


@pytest.mark.parametrize(
    "atom, want",
    [
        (0.25, [0.0, 0.75, 0.25]),  # between two bins: shares by closeness
        (-0.5, [0.5, 0.5, 0.0]),
        (0.0, [0.0, 1.0, 0.0]),  # at a bin
        (1.0, [0.0, 0.0, 1.0]),  # at the last bin
        (-1.0, [1.0, 0.0, 0.0]),
        (3.0, [0.0, 0.0, 1.0]),  # beyond the top: clipped to it
        (-7.0, [1.0, 0.0, 0.0]),  # beyond the bottom
    ],
)
def test_an_atom_is_projected_onto_its_neighbouring_bins(atom, want):
    got = losses.categorical_projection(tf.constant([[atom, 0.0, 0.0]]), [[1.0, 0, 0]], BINS)
    np.testing.assert_allclose(got.numpy(), [want], atol=1e-6)


def test_the_projection_adds_the_masses_of_every_atom():
    atoms = tf.constant([[0.25, -0.5, 9.0], [0.5, 0.5, -2.0]])
    masses = tf.constant([[0.5, 0.25, 0.25], [0.2, 0.3, 0.5]])
    want = [
        [0.125, 0.5 * 0.75 + 0.125, 0.125 + 0.25],  # 0.25 | -0.5 | clipped to 1
        [0.5, 0.25, 0.25],  # 0.5 twice (half to 0, half to 1) | clipped to -1
    ]
    np.testing.assert_allclose(losses.categorical_projection(atoms, masses, BINS), want, atol=1e-6)


def test_the_target_takes_the_lowest_critics_distribution_shifted_and_discounted():
    # Critic 0 puts all on bin 1 (Q = 1), critic 1 all on bin 0 (Q = 0): critic 1 is lower.
    logits = tf.constant([[[-50.0, -50.0, 50.0]], [[-50.0, 50.0, -50.0]]])
    # y = 0.5 + 0.5 * (0 - 0.1 * (-1)) = 0.55 -> 0.45 on bin 0 and 0.55 on bin 1.
    target = losses.categorical_td_target(
        tf.constant([0.5]), tf.constant([0.0]), logits, tf.constant([-1.0]), 0.1, 0.5, BINS
    )
    np.testing.assert_allclose(target.numpy(), [[0.0, 0.45, 0.55]], atol=1e-6)
    terminal = losses.categorical_td_target(
        tf.constant([-0.25]), tf.constant([1.0]), logits, tf.constant([-1.0]), 0.1, 0.5, BINS
    )
    np.testing.assert_allclose(terminal.numpy(), [[0.25, 0.75, 0.0]], atol=1e-6)


def test_the_bounded_reward_normaliser_matches_numpy_and_restores_exactly():
    rng = np.random.default_rng(0)
    chunks = [rng.normal(3.0, 2.0, size=n) for n in (1, 7, 50)] + [np.array([40.0])]
    for bound in (0.0, 5.0):
        normaliser = ReturnNormalizer(0.99, bound)
        assert normaliser.divisor == 1.0  # before any data
        for chunk in chunks:
            normaliser.update(chunk)
        seen = np.concatenate(chunks)
        std = np.sqrt(seen.var() + 1e-8)
        want = max(std, np.abs(seen).max() / bound) if bound else 0.01 * std
        assert normaliser.divisor == pytest.approx(want, rel=1e-12)
        restored = ReturnNormalizer(0.99, bound)
        restored.load_state(json.loads(json.dumps(normaliser.state())))
        assert restored.divisor == normaliser.divisor  # bit for bit through config JSON
    assert 40.0 / 5.0 > std  # the bound, not the spread, set the last divisor


def _flash_learner(**options):
    config = SACConfig(
        algorithm="flashsac", hidden_sizes=(8,), critic_hidden_sizes=(8,), batch_size=16,
        n_bins=11, initial_alpha=0.05, jit_compile=False, seed=3, **options,
    )  # fmt: skip
    return SACLearner(3, 2, config)


def _batch(steps=1, size=16, seed=0):
    rng = np.random.default_rng(seed)
    return dict(
        observation=rng.normal(size=(steps, size, 3)).astype(np.float32),
        action=rng.uniform(-1, 1, (steps, size, 2)).astype(np.float32),
        reward=rng.normal(size=(steps, size)).astype(np.float32),
        next_observation=rng.normal(size=(steps, size, 3)).astype(np.float32),
        terminated=(rng.uniform(size=(steps, size)) < 0.2).astype(np.float32),
    )


def _norms(model):
    """(unit-norm weights' norms, sqrt(d)-norm scales' norms / sqrt(d)) of `model`."""
    unit, scaled = [], []
    for layer in model._flatten_layers():
        if isinstance(layer, UnitDense):
            unit.append(np.linalg.norm(layer.kernel.numpy(), axis=-2))
        elif isinstance(layer, UnitBatchNorm):
            w = layer.affine.numpy()
            scaled.append(np.sqrt((w**2).sum(axis=(-2, -1))) / math.sqrt(w.shape[-1]))
        elif isinstance(layer, UnitRMSNorm):
            w = layer.scale.numpy()
            scaled.append(np.linalg.norm(w, axis=-1) / math.sqrt(w.shape[-1]))
    return unit, scaled


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _reference_critic_loss(logits, next_logits, reward, terminated, next_log_prob, alpha, bins):
    """Numpy: the lowest next critic's distribution, its atoms shifted, projected by loops."""
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
    return -(target[None] * log_q).sum(-1).mean()


def test_one_update_reports_the_numpy_reference_of_its_loss_and_keeps_unit_norms():
    learner = _flash_learner()
    sac, batch = learner.sac, {k: v[0] for k, v in _batch(seed=1).items()}
    # The seeds the update will draw, from a copy of its generator.
    rng = tf.random.Generator.from_state(sac.update_rng.state.numpy(), sac.update_rng.algorithm)
    seed = tf.cast(rng.make_seeds(sac.variant.seeds_needed), tf.int32)[:, 0]
    next_action, next_log_prob = sac.sample_with_log_prob(batch["next_observation"], seed)
    obs = np.concatenate([batch["observation"], batch["next_observation"]])
    action = np.concatenate([batch["action"], next_action.numpy()])
    next_logits = sac.target_critic(obs, action, training=True).numpy()[:, 16:]
    logits = sac.critic(obs, action, training=True).numpy()[:, :16]
    alpha = float(sac.temperature.alpha())
    want = _reference_critic_loss(
        logits, next_logits, batch["reward"], batch["terminated"], next_log_prob.numpy(),
        alpha, np.linspace(-5, 5, 11),
    )  # fmt: skip
    before = [v.numpy() for v in learner.critic.trainable_variables]
    metrics = learner.update({k: v[None] for k, v in batch.items()})
    assert metrics["critic_loss"] == pytest.approx(want, rel=1e-4)
    # Every weight moved, and the weight-normalised ones are back on their spheres.
    after = [v.numpy() for v in learner.critic.trainable_variables]
    assert all(np.abs(a - b).max() > 0 for a, b in zip(after, before, strict=True))
    for model in (learner.actor, learner.critic):
        unit, scaled = _norms(model)
        assert len(unit) >= 4 and len(scaled) >= 4
        for norms in unit + scaled:
            np.testing.assert_allclose(norms, 1.0, rtol=1e-5)


def test_the_repeated_noise_is_held_for_zeta_distributed_spans():
    cdf = truncated_zeta_cdf(2.0, 3)  # P(n) ~ 1, 1/4, 1/9
    np.testing.assert_allclose(cdf, np.cumsum([36, 9, 4]) / 49, rtol=1e-6)
    noise = RepeatedNoise(2, 3, 2.0, 16, tf.random.Generator.from_seed(0))
    draws = np.stack([noise.noise(tf.constant([2, 3])).numpy() for _ in range(800)])
    changed = np.flatnonzero(np.any(draws[1:] != draws[:-1], axis=(1, 2))) + 1
    spans = np.diff(np.concatenate([[0], changed]))
    pmf = np.arange(1, 17.0) ** -2.0
    assert spans.min() >= 1 and spans.max() <= 16
    assert spans.mean() == pytest.approx((np.arange(1, 17) * pmf).sum() / pmf.sum(), rel=0.2)
    assert noise.noise(tf.constant([5, 3])).shape == (5, 3)  # another batch: drawn afresh


def test_the_cosine_schedule_falls_to_its_factor_over_its_steps():
    schedule = parse_schedule("cosine:0.5:1000")
    assert schedule(0, 10) == 1.0 and schedule(1000, 10) == 0.5 and schedule(5000, 10) == 0.5
    assert schedule(500, 10) == pytest.approx(0.75)
    assert parse_schedule("cosine:0.2")(50, 100) == pytest.approx(0.6)  # over total_steps
    for bad in ("cosine:", "cosine:0", "cosine:0.5:0", "cosine:a:b"):
        with pytest.raises(TfsacError, match="cosine:<factor>"):
            parse_schedule(bad)


def test_flashsac_fills_its_auto_options_and_sac_keeps_its_own():
    config = resolve(SACConfig(algorithm="flashsac"))
    assert (config.network, config.normalize_rewards, config.return_bound) == (
        "flashsac", True, 5.0,
    )  # fmt: skip
    assert (config.target_std, config.exploration_zeta, config.policy_delay) == (0.15, 2.0, 2)
    assert config.critic_hidden_sizes == (256, 256)
    sac = resolve(SACConfig())
    assert (sac.network, sac.normalize_rewards, sac.return_bound, sac.exploration_zeta) == (
        "mlp", False, 0.0, 0.0,
    )  # fmt: skip
    off = resolve(SACConfig(algorithm="flashsac", normalize_rewards=False))
    assert off.return_bound == 0.0
    with pytest.raises(TfsacError, match="return_bound needs normalize_rewards"):
        resolve(SACConfig(return_bound=5.0, normalize_rewards=False))
    with pytest.raises(TfsacError, match="target_std and target_entropy both"):
        resolve(SACConfig(target_std=0.2, target_entropy=-1.0))
    with pytest.raises(TfsacError, match="does not read n_bins"):
        resolve(SACConfig(n_bins=51))


def test_the_entropy_target_of_a_target_std():
    learner = SACLearner(3, 2, SACConfig(target_std=0.15, hidden_sizes=(8,), jit_compile=False))
    # Two dimensions of a Gaussian of std 0.15: log(2 pi e 0.0225).
    assert learner.sac.target_entropy == pytest.approx(math.log(2 * math.pi * math.e * 0.0225))


def test_env_runners_act_with_the_flashsac_actor_through_tf_and_its_held_noise():
    policy = tf_runner_policy("flashsac")
    actions = np.stack([policy.sample(np.zeros((2, 3), np.float32)) for _ in range(40)])
    assert actions.shape == (40, 2, 2) and np.abs(actions).max() < 1
    # The same observation, the same held noise: runs of equal actions, some longer than one.
    repeats = np.all(actions[1:] == actions[:-1], axis=(1, 2))
    assert 0 < repeats.sum() < len(repeats)


def test_a_run_saved_before_the_new_options_resumes_without_a_change():
    new = resolve(SACConfig())
    saved = json.loads(json.dumps(new.to_dict()))
    for name in ("return_bound", "target_std", "exploration_zeta"):
        del saved[name]
    changes = new.resume_changes(saved)  # said as the resume starts, not refused
    assert [str(change) for change in changes] == [
        f"{name}: None -> 0.0" for name in ("return_bound", "target_std", "exploration_zeta")
    ]
    with pytest.raises(TfsacError, match="exploration_zeta=2.0 differs"):
        resolve(SACConfig(exploration_zeta=2.0)).resume_changes(saved)
