"""Options users of other SAC implementations expect: how each reaches the learner."""

import os
import sys

import numpy as np
import pytest
from absl import flags
from conftest import REPO_ROOT

from tfsac import SACConfig, SACLearner, TfsacError

sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
import _cli  # noqa: E402

import tfsac  # noqa: E402


def _config_from_args(*args):
    fv = flags.FLAGS
    if "env_kwargs" not in fv:
        _cli.define_training_flags()
    fv.unparse_flags()
    try:
        fv(["train.py", *args])
        return _cli.config_from_flags(tfsac)
    finally:
        fv.unparse_flags()


@pytest.mark.parametrize(
    "value, alpha, initial",
    [("auto", None, 1.0), ("auto_0.1", None, 0.1), ("0.2", 0.2, 1.0)],
)
def test_entropy_coefficient_forms(value, alpha, initial):
    config = _config_from_args(f"--alpha={value}")
    assert (config.alpha, config.initial_alpha) == (alpha, initial)
    learner = SACLearner(3, 1, config)
    assert float(learner.alpha) == pytest.approx(alpha or initial)
    assert learner.log_alpha.trainable == (alpha is None)


def test_separate_learning_rates_and_clipping():
    config = _config_from_args(
        "--learning_rate=1e-3",
        "--critic_learning_rate=5e-4",
        "--max_grad_norm=0.5",
        "--hidden_sizes=8",
    )
    learner = SACLearner(3, 1, config)
    assert float(learner.actor_optimizer.learning_rate) == pytest.approx(1e-3)
    assert float(learner.critic_optimizer.learning_rate) == pytest.approx(5e-4)
    assert float(learner.alpha_optimizer.learning_rate) == pytest.approx(1e-3)
    assert learner.critic_optimizer.global_clipnorm == 0.5
    assert learner.actor_optimizer.global_clipnorm == 0.5


def test_clipped_update_moves_like_adam_and_stays_finite():
    rng = np.random.default_rng(0)
    batch = {
        "observation": rng.normal(size=(1, 32, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (1, 32, 1)).astype(np.float32),
        "reward": (1e4 * rng.normal(size=(1, 32))).astype(np.float32),  # huge gradients
        "next_observation": rng.normal(size=(1, 32, 3)).astype(np.float32),
        "terminated": np.zeros((1, 32), np.float32),
    }
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,), max_grad_norm=1.0))
    before = learner.critic.head.bias.numpy().copy()
    assert learner.update(batch)["finite"]
    # Adam's first step moves each parameter by at most the learning rate.
    assert np.max(np.abs(learner.critic.head.bias.numpy() - before)) <= 3e-4 * 1.0001


@pytest.mark.parametrize(
    "field, value",
    [("reward_scale", 0.0), ("max_grad_norm", -1.0), ("critic_learning_rate", 2.0)],
)
def test_bad_option_values(field, value):
    with pytest.raises(TfsacError, match=field):
        SACConfig(**{field: value}).validate()
