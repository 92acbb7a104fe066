"""Custom Keras networks: the docs example trains, bad models are refused clearly."""

import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT

from tfsac import SACConfig, SACLearner, TfsacError

DOC = os.path.join(REPO_ROOT, "docs", "custom_networks.md")


def test_docs_example_trains_checkpoints_and_exports(tmp_path, monkeypatch):
    (code,) = re.findall(r"<!-- example -->\s*```python\n(.*?)```", open(DOC).read(), re.S)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, DOC, "exec"), namespace)
    result = namespace["result"]
    assert result.summary["total_steps"] == 3000
    assert np.isfinite(result.summary["eval_return_mean"])
    assert result.learner.critic.q1.trainable_variables  # the user's model was used
    served = tf.saved_model.load(result.saved_model_path).signatures["serving_default"]
    action = served(observation=tf.zeros([4, 3]))["action"].numpy()
    assert action.shape == (4, 1) and np.all(np.abs(action) <= 2.0)
    assert os.listdir(tmp_path / "runs" / "custom" / "checkpoints")


def test_bad_actor_is_refused():
    def actor_fn(obs_dim, action_dim):
        return keras.Sequential([keras.layers.Dense(action_dim)])  # one output, not two

    with pytest.raises(TfsacError, match=r"actor must return \(mean, log_std\)"):
        SACLearner(3, 1, SACConfig(), actor_fn=actor_fn)


def test_single_critic_is_refused():
    class One(keras.Model):
        def __init__(self):
            super().__init__()
            self.q = keras.layers.Dense(1)

        def call(self, observations, actions, training=None):
            return tf.transpose(self.q(tf.concat([observations, actions], -1)))  # [1, B]

    with pytest.raises(TfsacError, match=r"n_critics >= 2"):
        SACLearner(3, 1, SACConfig(), critic_fn=lambda o, a: One())
