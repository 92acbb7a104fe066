"""SAC's losses as plain functions; equation numbers are arXiv:1812.05905's."""

from __future__ import annotations

import math

import tensorflow as tf


def soft_td_target(reward, terminated, next_q, next_log_prob, alpha, gamma):
    """Eqs. 2-3 with Sec. 5's clipped double-Q: y = r + gamma (1 - terminated) (min_i Q'_i(s', a')
    - alpha log pi(a'|s')), `next_q` [n_critics, B]; `gamma` a float or [B] (n-step: gamma^m
    per sample, in every target below); a truncation keeps bootstrapping from s'."""
    next_v = tf.reduce_min(next_q, axis=0) - alpha * next_log_prob
    return tf.stop_gradient(reward + gamma * (1.0 - terminated) * next_v)


def critic_loss(q_values, target):
    """Eq. 5, summed over the critics: sum_i E[0.5 * (Q_i(s, a) - y)^2]; q_values [N, B]."""
    return tf.reduce_sum(0.5 * tf.reduce_mean(tf.square(q_values - target), axis=-1))


def actor_loss(log_prob, q_values, alpha):
    """Eqs. 7 and 11: E[alpha log pi(a|s) - min_i Q_i(s, a)]; `q_values` [n_critics, B]."""
    return tf.reduce_mean(alpha * log_prob - tf.reduce_min(q_values, axis=0))


def random_subset(num_critics: int, size: int, seed):
    """`size` of `num_critics` indices without replacement (REDQ, arXiv:2101.05982, Alg. 1),
    its seed folded from the target's: switched off, no other random number changes."""
    seed = tf.random.experimental.stateless_fold_in(seed, 1)
    return tf.argsort(tf.random.stateless_uniform([num_critics], seed))[:size]


def actor_loss_on_mean(log_prob, q_values, alpha):
    """Eq. 7 on the critics' mean, not their minimum (REDQ, Alg. 1 line 10; RLPD's code)."""
    return tf.reduce_mean(alpha * log_prob - tf.reduce_mean(q_values, axis=0))


def alpha_loss(log_alpha, log_prob, target_entropy):
    """Eq. 18 in log-alpha, E[-log_alpha (log pi(a|s) + target_entropy)]: the same fixed
    point, alpha kept positive and its steps scale-free; given alpha, Eq. 18 as written."""
    return -tf.reduce_mean(log_alpha * tf.stop_gradient(log_prob + target_entropy))


alpha_loss_direct = alpha_loss  # Eq. 18 as written, optimised in alpha itself


def v1_q_target(reward, terminated, next_v, gamma):
    """SAC v1 (arXiv:1801.01290), Eq. 8: y = r + gamma (1 - terminated) V_target(s')."""
    return tf.stop_gradient(reward + gamma * (1.0 - terminated) * next_v)


def value_loss(v, q_values, log_prob, alpha):
    """SAC v1, Eq. 5: E[0.5 (V(s) - (min_i Q_i(s, a) - alpha log pi(a|s)))^2], a ~ pi(.|s)
    fresh (the paper fixes alpha = 1; here it may be learned). `v` is [B]."""
    v_target = tf.stop_gradient(tf.reduce_min(q_values, axis=0) - alpha * log_prob)
    return 0.5 * tf.reduce_mean(tf.square(v - v_target))


# TQC (Kuznetsov et al. 2020, arXiv:2005.04269): equations of that paper.


def truncated_quantile_target(
    reward, terminated, next_quantiles, next_log_prob, alpha, gamma, drop_per_net: int
):
    """Eqs. 10-11: the target critics' N*M atoms pooled, y_i = r + gamma (1 - terminated)
    (z_i(s', a') - alpha log pi(a'|s')), and `keep` [B, N*M], 0 for the top `drop_per_net` * N
    per sample: a mask, as XLA:CPU sorts slower than it computes the whole loss."""
    n_critics, n_quantiles = next_quantiles.shape[0], next_quantiles.shape[-1]
    pooled = tf.reshape(tf.transpose(next_quantiles, [1, 0, 2]), [-1, n_critics * n_quantiles])
    remaining = pooled
    for _ in range(drop_per_net * n_critics):  # the largest left, one at a time
        largest = tf.one_hot(tf.argmax(remaining, axis=-1), n_critics * n_quantiles, True, False)
        remaining = tf.where(largest, -math.inf, remaining)
    keep = tf.cast(remaining > -math.inf, pooled.dtype)
    next_v = pooled - alpha * next_log_prob[:, None]
    targets = reward[:, None] + (gamma * (1.0 - terminated))[:, None] * next_v
    return tf.stop_gradient(targets), keep


def quantile_huber_loss(quantiles, target_atoms, keep=None, kappa: float = 1.0):
    """Eq. 12: |tau_m - 1{u < 0}| Huber_kappa(u) / kappa, u = y_i - z_m(s, a), tau_m =
    (2m + 1) / 2M, averaged over kept atoms, quantiles, batch and critics (as the authors'
    code and sb3-contrib). `quantiles` [N, B, M], `target_atoms` and `keep` [B, K]."""
    n_quantiles = quantiles.shape[-1]
    if keep is None:
        keep = tf.ones_like(target_atoms)
    taus = (tf.range(n_quantiles, dtype=quantiles.dtype) + 0.5) / n_quantiles
    delta = target_atoms[None, :, None, :] - quantiles[..., None]  # [N, B, M, K]
    abs_delta = tf.abs(delta)
    huber = tf.where(abs_delta > kappa, abs_delta - 0.5 * kappa, 0.5 * tf.square(delta) / kappa)
    weight = tf.abs(taus[:, None] - tf.cast(delta < 0, delta.dtype)) * keep[None, :, None, :]
    per_quantile = tf.reduce_sum(weight * huber, axis=[1, 3]) / tf.reduce_sum(keep)  # [N, M]
    return tf.reduce_mean(per_quantile)


def tqc_actor_loss(log_prob, quantiles, alpha):
    """Eq. 13: E[alpha log pi(a|s) - mean_{n,m} z_m^n(s, a)] (no truncation, no minimum)."""
    return tf.reduce_mean(alpha * log_prob - tf.reduce_mean(quantiles, axis=[0, 2]))


# Categorical critics (C51, arXiv:1707.06887, as FlashSAC and XQC): a softmax over fixed
# bins z_1 < ... < z_K, Q(s, a) = sum_k p_k z_k.


def categorical_value(logits, bins):
    """Q = sum_k softmax(logits)_k z_k over the last axis of `logits` ([..., K])."""
    return tf.reduce_sum(tf.nn.softmax(logits) * bins, axis=-1)


def categorical_projection(target_values, probabilities, bins):
    """Atoms `target_values` [B, K] of masses `probabilities` [B, K] projected onto `bins`
    (C51's Eq. 7): each clipped atom splits its mass between its two neighbours."""
    n_bins = bins.shape[0]
    low, high = bins[0], bins[-1]
    position = (tf.clip_by_value(target_values, low, high) - low) / ((high - low) / (n_bins - 1))
    lower = tf.floor(position)
    upper_share = position - lower
    lower = tf.cast(lower, tf.int32)
    upper = tf.minimum(lower + 1, n_bins - 1)
    # One-hot sums: XLA:CPU serialises a scatter, and [B, K, K] is small.
    to_lower = tf.one_hot(lower, n_bins) * (probabilities * (1.0 - upper_share))[..., None]
    to_upper = tf.one_hot(upper, n_bins) * (probabilities * upper_share)[..., None]
    return tf.reduce_sum(to_lower + to_upper, axis=-2)


def categorical_td_target(reward, terminated, next_logits, next_log_prob, alpha, gamma, bins):
    """FlashSAC's soft target: per sample the distribution of the critic with the lowest
    Q'(s', a'), atoms moved to r + gamma (1 - terminated) (z_k - alpha log pi(a'|s')) and
    projected. `next_logits` [n_critics, B, K]; returns [B, K]."""
    next_probabilities = tf.nn.softmax(next_logits)  # [N, B, K]
    lowest = tf.argmin(tf.reduce_sum(next_probabilities * bins, axis=-1), axis=0)  # [B]
    chosen = tf.gather(tf.transpose(next_probabilities, [1, 0, 2]), lowest, batch_dims=1)
    continuing = (gamma * (1.0 - terminated))[:, None]
    atoms = reward[:, None] + continuing * (bins[None, :] - alpha * next_log_prob[:, None])
    return tf.stop_gradient(categorical_projection(atoms, chosen, bins))


def categorical_loss(logits, target_probabilities):
    """-sum_k p_k log q_k of each critic's softmax q, averaged over critics and batch (as
    FlashSAC's code). `logits` [n_critics, B, K], the target [B, K]."""
    log_q = tf.nn.log_softmax(logits)
    return tf.reduce_mean(-tf.reduce_sum(target_probabilities[None] * log_q, axis=-1))
