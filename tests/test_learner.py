"""Invariants of the compiled update and of acting."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import random_batch

from tfsac import ReplayBuffer, SACConfig, SACLearner, polyak_update
from tfsac.algorithm.network_checks import unsaved_variables
from tfsac.data.replay import pack_batch


def _random_batch(num_batches, batch_size, obs_dim=3, action_dim=2, seed=0):
    return random_batch(num_batches, batch_size, obs_dim, action_dim, seed)


def _values(variables):
    return [v.numpy().copy() for v in variables]


def _all_changed(before, variables):
    return all(not np.array_equal(b, v.numpy()) for b, v in zip(before, variables, strict=True))


def test_polyak_update_exact_at_half():
    source = [tf.Variable([2.0, -4.0]), tf.Variable(1.0)]
    target = [tf.Variable([4.0, 0.0]), tf.Variable(3.0)]
    polyak_update(target, source, 0.5)
    np.testing.assert_array_equal(target[0].numpy(), [3.0, -2.0])
    assert target[1].numpy() == 2.0


def test_update_changes_every_parameter_and_stays_finite():
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(16, 16)))
    models = (learner.actor, learner.critic, learner.target_critic)
    before = [_values(m.trainable_variables) for m in models]
    log_alpha = learner.sac.temperature.log_alpha.numpy()
    metrics = learner.update(_random_batch(2, 32))
    for b, m in zip(before, models, strict=True):
        assert _all_changed(b, m.trainable_variables), m.name
    assert learner.sac.temperature.log_alpha.numpy() != log_alpha
    assert set(metrics) == {
        "critic_loss",
        "actor_loss",
        "alpha",
        "alpha_loss",
        "entropy",
        "q_mean",
        "finite",
    }
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert bool(metrics["finite"]) and learner.nonfinite_quantities(metrics) == []
    # Two gradient steps ran: Adam's step counter says so.
    assert int(learner.sac.critic_optimizer.iterations.numpy()) == 2


def test_nonfinite_parameter_is_flagged_and_named():
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(8,)))
    learner.critic.head.bias.assign(np.full((2, 1, 1), np.nan, np.float32))
    metrics = learner.update(_random_batch(1, 8))
    assert not bool(metrics["finite"])
    names = learner.nonfinite_quantities(metrics)
    assert "critic_loss" in names and any("q/bias" in n for n in names), names


def test_fixed_alpha_stays_fixed():
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(16,), alpha=0.3))
    before = learner.sac.temperature.log_alpha.numpy()
    metrics = learner.update(_random_batch(1, 16))
    assert learner.sac.temperature.log_alpha.numpy() == before
    assert abs(float(metrics["alpha"]) - 0.3) < 1e-6


def test_acting_does_not_change_parameters():
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(16,)))
    models = (learner.actor, learner.critic, learner.target_critic)
    before = [_values(m.variables) for m in models]
    obs = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    sampled = learner.act(obs)
    mode = learner.act(obs, deterministic=True)
    for b, m in zip(before, models, strict=True):
        for x, v in zip(b, m.variables, strict=True):
            np.testing.assert_array_equal(x, v.numpy())
    assert sampled.shape == mode.shape == (5, 2)
    assert np.all(np.abs(sampled) <= 1.0) and np.all(np.abs(mode) <= 1.0)
    np.testing.assert_array_equal(mode, learner.act(obs, deterministic=True))


def test_update_traces_once_for_any_batch_count():
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(8,)))
    for num_batches in (1, 3, 1, 5):
        learner.update(_random_batch(num_batches, 16, seed=num_batches))
    for b in (1, 4, 1):
        learner.act(np.zeros((b, 3), np.float32))
    assert learner.trace_counts() == {"update": 1, "act": 1}


@pytest.mark.slow
def test_same_seed_same_updates():
    results = []
    for _ in range(2):
        tf.keras.utils.set_random_seed(0)
        learner = SACLearner(3, 2, SACConfig(hidden_sizes=(16,), seed=4))
        metrics = learner.update(_random_batch(3, 16))
        results.append({k: float(v) for k, v in metrics.items()})
    assert results[0] == results[1]


def test_update_and_act_equals_update_then_act():
    obs = np.random.default_rng(2).normal(size=(1, 3)).astype(np.float32)
    batch = _random_batch(2, 16)
    separate = SACLearner(3, 2, SACConfig(hidden_sizes=(16,), seed=7))
    fused = SACLearner(3, 2, SACConfig(hidden_sizes=(16,), seed=7))
    fused.actor.set_weights(separate.actor.get_weights())
    fused.critic.set_weights(separate.critic.get_weights())
    fused.target_critic.set_weights(separate.target_critic.get_weights())
    m1 = separate.update(batch)
    a1 = separate.act(obs)
    m2, a2 = fused.update_and_act(batch, obs)
    np.testing.assert_allclose(a1, a2, rtol=1e-6)
    assert float(m1["critic_loss"]) == pytest.approx(float(m2["critic_loss"]), rel=1e-6)
    for x, y in zip(separate.actor.variables, fused.actor.variables, strict=True):
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-6)


def test_packed_and_dict_batches_give_the_same_update():
    batch = _random_batch(2, 16, seed=5)
    results = []
    for as_packed in (False, True):
        tf.keras.utils.set_random_seed(0)
        learner = SACLearner(3, 2, SACConfig(hidden_sizes=(16,), seed=4))
        buffer = ReplayBuffer(4, 3, 2)
        results.append(learner.update(pack_batch(batch) if as_packed else batch))
        assert learner.trace_counts()["update"] == 1
    assert results[0] == results[1]
    # The packed rows follow the buffer's layout: unpacking gives the fields back.
    unpacked = buffer.unpack(pack_batch(batch))
    for name, value in batch.items():
        np.testing.assert_array_equal(unpacked[name], value)
    np.testing.assert_array_equal(unpacked["discount"], np.float32(0.99))  # gamma: one step


def test_inputs_of_another_shape_are_one_error_naming_the_shape_wanted():
    from tfsac import TfsacError

    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(8,), jit_compile=False))
    for observation in (np.zeros(3), np.zeros((2, 4))):
        with pytest.raises(TfsacError, match=r"observations must be a batch \[B, 3\], got shape"):
            learner.act(observation)
    assert learner.act(np.zeros((0, 3))).shape == (0, 2)  # no rows: no actions
    batch = _random_batch(1, 4)
    width = 3 + 2 + 1 + 3 + 1 + 1
    wrong = {
        "a batch without its steps axis": {k: v[0] for k, v in batch.items()},
        "no terminated field": {k: v for k, v in batch.items() if k != "terminated"},
        "an empty batch": np.zeros((1, 0, width), np.float32),
        "no steps": np.zeros((0, 8, width), np.float32),
        "rows of another width": np.zeros((1, 8, width + 1), np.float32),
    }
    messages = {
        "no terminated field": "batches lack the field 'terminated'",
    }
    for what, batches in wrong.items():
        with pytest.raises(TfsacError, match=messages.get(what, r"\[steps >= 1, batch >= 1, 11\]")):
            learner.update(batches)
    assert learner.update_count == 0


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"algorithm": "crossq"},
        {"critic_dropout": 0.01, "critic_layer_norm": True},  # DroQ: dropout seed states
        # The Checkpointer runs the same check at every save: the runs of these options in
        # the default suite meet it there.
        *(
            pytest.param(options, marks=pytest.mark.slow)
            for options in (
                {"algorithm": "sac_v1"},
                {"algorithm": "tqc"},
                {"network": "simba"},
                {"use_sde": True},
                {"alpha": 0.2},
                {"normalize_rewards": True},
            )
        ),
    ],
)
def test_every_variable_an_update_writes_is_in_a_checkpoint(options):
    """The completeness check the Checkpointer runs finds nothing missing for any built-in
    configuration (a review found DroQ's dropout seed states, which tf.train.Checkpoint's
    graph leaves out, refused)."""
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), **options))
    learner.update(_random_batch(1, 8, action_dim=1))
    assert unsaved_variables(learner) == []
