"""Every policy tfsac trains goes through LiteRT and ONNX Runtime with the SavedModel's
actions: Dict observations, gSDE, DroQ, a custom Keras actor and CrossQ with SimBa
networks (batch renormalisation, the observation normaliser), each a real (tiny)
training run exported with --export_formats=saved_model,tflite,onnx, each file run by the
runtime that will load it, at batch 1 and 64, on observations sampled from the space."""

import json
import os

import gymnasium as gym
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import SpaceEnv, assert_nan_contract, tiny_config

from tfsac import train
from tfsac.deploy.metadata import METADATA_FILE, sample_observations

DICT_SPACE = gym.spaces.Dict(
    {
        "pos": gym.spaces.Box(-1, 1, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
        "grid": gym.spaces.MultiBinary(4),
    }
)
ACTION_SPACE = gym.spaces.Box(
    np.array([0.0, -10.0], np.float32), np.array([5.0, 2.0], np.float32), dtype=np.float32
)
gym.register(
    "tfsac-test/Deploy-dict-v0",
    entry_point=SpaceEnv,
    kwargs={"observation_space": DICT_SPACE, "action_space": ACTION_SPACE},
)


def layer_norm_actor(obs_dim, action_dim):
    """A custom Keras actor (functional, layer norm, two heads), as in the guide
    (docs/guide/custom-env-and-networks.md)."""
    obs = keras.Input((obs_dim,))
    x = keras.layers.Dense(16)(obs)
    x = keras.layers.LayerNormalization()(x)
    x = keras.layers.Activation("tanh")(x)
    mean = keras.layers.Dense(action_dim)(x)
    log_std = keras.layers.Dense(action_dim)(x)
    return keras.Model(obs, [mean, log_std])


VARIANTS = {
    "dict": dict(env_id="tfsac-test/Deploy-dict-v0"),
    "gsde": dict(env_id="Pendulum-v1", use_sde=True),
    "droq": dict(env_id="Pendulum-v1", critic_dropout=0.01, critic_layer_norm=True),
    "custom": dict(env_id="Pendulum-v1", actor_fn=layer_norm_actor),
    # Batch renormalisation (moving statistics), the observation normaliser, residual blocks.
    "mlp_normalized": dict(env_id="Pendulum-v1", normalize_observations=True),
    "crossq_simba": dict(
        env_id="Pendulum-v1", algorithm="crossq", network="simba", critic_hidden_sizes=(8,)
    ),
    # Unit-norm blocks, batch norms' moving statistics, RMSNorm, the tanh-bounded log-std.
    "flashsac": dict(env_id="Pendulum-v1", algorithm="flashsac", critic_hidden_sizes=(8,)),
    # Unit-norm layers batch-normed before each ReLU, the clipped log-std.
    "xqc": dict(env_id="Pendulum-v1", algorithm="xqc", critic_hidden_sizes=(8,)),
}


# gSDE's, DroQ's, the custom actor, the normalised MLP, FlashSAC's and XQC's with -m slow: their
# conversions take the same paths as the others (crossq_simba's holds the observation
# normaliser).
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.slow)
        if n in ("gsde", "droq", "custom", "mlp_normalized", "crossq_simba", "flashsac", "xqc")
        else n
        for n in sorted(VARIANTS)
    ],
)
def test_litert_and_onnx_give_the_saved_models_actions(tmp_path, name):
    import onnxruntime
    from ai_edge_litert.interpreter import Interpreter

    options = dict(VARIANTS[name])
    actor_fn = options.pop("actor_fn", None)
    config = tiny_config(
        tmp_path, export_formats="saved_model,tflite,onnx", total_steps=60, **options
    )
    version = train(config, actor_fn=actor_fn).saved_model_path
    assert {"saved_model.pb", "policy.tflite", "policy.onnx"} <= set(os.listdir(version))
    with open(os.path.join(version, METADATA_FILE)) as f:
        metadata = json.load(f)
    obs = sample_observations(
        metadata["observation_space_json"], metadata["observation_dim"], 1000, seed=7
    )
    if name == "dict":
        assert obs.shape == (1000, 2 + 3 + 4)  # flattened as the networks take it
    served = tf.saved_model.load(version).signatures["serving_default"]
    expected = served(observation=tf.constant(obs))["action"].numpy()
    assert np.ptp(expected, axis=0).min() > 1e-3  # the actions vary with the observation
    lite = Interpreter(model_path=os.path.join(version, "policy.tflite"))
    lite = lite.get_signature_runner("serving_default")
    session = onnxruntime.InferenceSession(os.path.join(version, "policy.onnx"))
    for batch, count in ((1, 100), (64, 1000)):  # the same files at both batch sizes
        for start in range(0, count, batch):
            rows, want = obs[start : start + batch], expected[start : start + batch]
            np.testing.assert_allclose(lite(observation=rows)["action"], want, atol=1e-5)
            got = session.run(["action"], {"observation": rows})[0]
            np.testing.assert_allclose(got, want, atol=1e-5)
    # docs/guide/deploy.md's contract for an observation with a NaN or an infinity.
    raw_bad = None
    if name == "dict":
        raw_bad = {"pos": np.array([np.nan, 0.0], np.float32), "mode": 1, "grid": np.ones(4)}
    assert_nan_contract(version, obs[:8], raw_bad)
    # A wrong shape is refused by both signatures, naming the shapes (a tester's: CrossQ's
    # graph took a 1-D observation as a batch of one; the others failed on a matrix product).
    signatures = tf.saved_model.load(version).signatures
    for bad in (obs[0], obs[:2, :-1]):
        for signature in ("serving_default", "sample"):
            message = "is not compatible with expected shape"
            with pytest.raises(tf.errors.InvalidArgumentError, match=message):
                signatures[signature](observation=tf.constant(bad))
        with pytest.raises(onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument):
            session.run(["action"], {"observation": bad})
    # LiteRT (docs/guide/deploy.md): a wrong width fails, one row without its batch axis is a row.
    with pytest.raises(RuntimeError, match="failed to reshape"):
        lite(observation=obs[:2, :-1])
    np.testing.assert_allclose(lite(observation=obs[0])["action"], expected[:1], atol=1e-5)
    with open(os.path.join(version, METADATA_FILE)) as f:
        assert json.load(f)["normalizes_observations"] is (
            name in ("crossq_simba", "mlp_normalized")
        )
