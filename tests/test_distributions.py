"""TanhNormal: change of variables, saturation, bounds."""

import numpy as np
import tensorflow as tf

from tfsac import deterministic_action, tanh_normal
from tfsac.data.envs import unit_to_bounds

LOW = np.array([0.0, -10.0], np.float32)
HIGH = np.array([5.0, 2.0], np.float32)


def _normal_log_pdf(x, mean, std):
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def test_log_prob_matches_change_of_variables_with_bounds():
    loc = np.array([[0.3, -0.7], [1.2, 0.1]], np.float32)
    std = np.array([[0.5, 1.5], [0.2, 0.9]], np.float32)
    dist = tanh_normal(loc, std, LOW, HIGH)
    action, log_prob = dist.experimental_sample_and_log_prob(seed=[1, 2])
    action = action.numpy().astype(np.float64)
    half = (HIGH - LOW) / 2.0
    y = (action - (LOW + half)) / half  # back to (-1, 1)
    u = np.arctanh(y)
    # log p(a) = sum_i [log N(u_i) - log(1 - tanh(u_i)^2) - log(half_i)]
    expected = np.sum(_normal_log_pdf(u, loc, std) - np.log(1.0 - y**2) - np.log(half), axis=-1)
    np.testing.assert_allclose(log_prob.numpy(), expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        dist.log_prob(action.astype(np.float32)).numpy(), expected, rtol=1e-3, atol=1e-3
    )


def test_log_prob_finite_when_actions_saturate():
    loc = np.array([[20.0, -20.0], [9.5, -30.0]], np.float32)  # float32 tanh rounds to +-1
    std = np.full_like(loc, 0.1)
    dist = tanh_normal(loc, std)
    action, log_prob = dist.experimental_sample_and_log_prob(seed=[3, 4])
    assert np.all(np.abs(action.numpy()) == 1.0)  # saturated for real
    assert np.all(np.isfinite(log_prob.numpy()))
    # The density piles up at the edge: -log|da/du| = -2*(log 2 - |u| - softplus(-2|u|))
    # ~ 2|u| - 1.39 per dimension, so about 80 here.
    assert np.all(log_prob.numpy() > 60)
    # The trap the learner avoids: log_prob of a fresh tensor (no bijector cache hit)
    # inverts through atanh(+-1) = +-inf.
    assert not np.any(np.isfinite(dist.log_prob(tf.constant(action.numpy())).numpy()))


def test_log_prob_exact_when_the_scale_is_below_the_means_rounding_step():
    """An initial actor on Humanoid-v5's raw observations (up to ~3,500) gives means of a
    few hundred, some with log_std clipped at -20: float32 rounds loc + scale * eps to a
    step (3e-5 at 250) far above the scale (2e-9). The log-density must come from eps and
    log(scale), not from (u - loc) / scale (which gave -1e5 and a diverging critic)."""
    loc = np.array([[250.0, -180.0, 0.5]], np.float32)
    log_std = np.array([[-20.0, -20.0, -1.0]], np.float32)
    dist = tanh_normal(loc, np.exp(log_std))
    _, log_prob = dist.experimental_sample_and_log_prob(seed=[7, 8])
    # The same draw by hand: eps is the standard normal sample the base distribution drew.
    eps = dist.distribution.sample(seed=[7, 8]).numpy().astype(np.float64)
    u = loc.astype(np.float64) + np.exp(log_std.astype(np.float64)) * eps
    log_det = 2 * (np.log(2) - np.abs(u) - np.log1p(np.exp(-2 * np.abs(u))))
    expected = np.sum(-0.5 * eps**2 - 0.5 * np.log(2 * np.pi) - log_std - log_det, axis=-1)
    np.testing.assert_allclose(log_prob.numpy(), expected, rtol=1e-5)


def test_gradients_finite_at_saturation():
    loc = tf.Variable([[25.0, -25.0]])
    with tf.GradientTape() as tape:
        _, log_prob = tanh_normal(loc, tf.fill([1, 2], 0.5)).experimental_sample_and_log_prob(
            seed=[5, 6]
        )
    grad = tape.gradient(log_prob, loc)
    assert np.all(np.isfinite(grad.numpy()))


def test_samples_and_mode_inside_asymmetric_bounds():
    loc = np.random.default_rng(0).normal(0, 5, (1000, 2)).astype(np.float32)
    dist = tanh_normal(loc, np.full_like(loc, 2.0), LOW, HIGH)
    samples = dist.sample(seed=[7, 8]).numpy()
    assert np.all(samples >= LOW) and np.all(samples <= HIGH)
    mode = deterministic_action(loc, LOW, HIGH).numpy()
    assert np.all(mode >= LOW) and np.all(mode <= HIGH)
    np.testing.assert_allclose(mode, [2.5, 6.0] * np.tanh(loc) + [2.5, -4.0], rtol=1e-5, atol=1e-5)


def test_unit_to_bounds_maps_corners():
    out = unit_to_bounds(np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.0]]), LOW, HIGH)
    np.testing.assert_allclose(out, [[0.0, -10.0], [5.0, 2.0], [2.5, -4.0]])
