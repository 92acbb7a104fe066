"""SAC losses as plain functions (Haarnoja et al. 2018, "Soft Actor-Critic Algorithms and
Applications", arXiv:1812.05905). Equation numbers refer to that paper."""

from __future__ import annotations

import tensorflow as tf


def soft_td_target(reward, terminated, next_q, next_log_prob, alpha, gamma):
    """The soft Bellman target of Eqs. 2-3, with the clipped double-Q minimum (Sec. 5):

        y = r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha * log pi(a'|s')).

    `next_q` is [n_critics, B] from the target critics at a' ~ pi(.|s'). A time-limit
    truncation is not a termination: it keeps bootstrapping from s'.
    """
    next_v = tf.reduce_min(next_q, axis=0) - alpha * next_log_prob
    return tf.stop_gradient(reward + gamma * (1.0 - terminated) * next_v)


def critic_loss(q_values, target):
    """Eq. 5, summed over the critics: sum_i E[0.5 * (Q_i(s, a) - y)^2].

    `q_values` is [n_critics, B], `target` is [B].
    """
    return tf.reduce_sum(0.5 * tf.reduce_mean(tf.square(q_values - target), axis=-1))


def actor_loss(log_prob, q_values, alpha):
    """Eq. 7 with the reparameterised action (Eq. 11): E[alpha * log pi(a|s) - min_i Q_i(s, a)].

    `q_values` is [n_critics, B] at a ~ pi(.|s); the minimum over the critics follows
    Sec. 5.
    """
    return tf.reduce_mean(alpha * log_prob - tf.reduce_min(q_values, axis=0))


def alpha_loss(log_alpha, log_prob, target_entropy):
    """Eq. 18, J(alpha) = E[-alpha * log pi(a|s) - alpha * target_entropy], optimised in
    log-alpha: E[-log_alpha * (log pi(a|s) + target_entropy)].

    Both forms have the same sign of gradient and fixed point; the log form keeps alpha
    positive and its steps scale-free. `log_prob` carries no gradient.
    """
    return -tf.reduce_mean(log_alpha * tf.stop_gradient(log_prob + target_entropy))


def alpha_loss_direct(alpha, log_prob, target_entropy):
    """Eq. 18 as written, optimised in alpha itself: E[-alpha * (log pi(a|s) + target_entropy)]
    `log_prob` carries no gradient."""
    return -tf.reduce_mean(alpha * tf.stop_gradient(log_prob + target_entropy))


def v1_q_target(reward, terminated, next_v, gamma):
    """SAC v1 (Haarnoja et al. 2018, arXiv:1801.01290), Eq. 8: the critics' target from the
    target value network, y = r + gamma * (1 - terminated) * V_target(s')."""
    return tf.stop_gradient(reward + gamma * (1.0 - terminated) * next_v)


def value_loss(v, q_values, log_prob, alpha):
    """SAC v1 (arXiv:1801.01290), Eq. 5: E_s[0.5 * (V(s) - (min_i Q_i(s, a) - alpha *
    log pi(a|s)))^2] with a ~ pi(.|s) fresh; the minimum over critics follows Sec. 4.2 of
    that paper. The v1 paper fixes alpha = 1 and scales rewards instead; alpha may be learned
    here as well. `v` is [B], `q_values` [n_critics, B]."""
    v_target = tf.stop_gradient(tf.reduce_min(q_values, axis=0) - alpha * log_prob)
    return 0.5 * tf.reduce_mean(tf.square(v - v_target))
