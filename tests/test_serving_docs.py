"""Every request in docs/guide/deploy.md runs against an exported model's signatures."""

import json
import os
import re

import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT

from tfsac import EnvSpec, SACConfig, SACLearner, export_policy

DOC = os.path.join(REPO_ROOT, "docs", "guide", "deploy.md")
SPEC = EnvSpec("Pendulum-v1", 3, 1, (-2.0,), (2.0,), "Box(3)", "Box(1)", "none")


def _blocks(marker):
    text = open(DOC).read()
    return re.findall(rf"<!-- {marker} -->\s*```\w+\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(16,)))
    path = export_policy(
        learner.actor,
        SPEC,
        str(tmp_path_factory.mktemp("m")),
        "pendulum_v1",
        {"env_id": "Pendulum-v1"},
    )
    return tf.saved_model.load(path)


def _serve_rest(model, body):
    """TF Serving's REST predict semantics for one named input and one named output."""
    signature = model.signatures[body.get("signature_name", "serving_default")]
    if "inputs" in body:
        out = signature(observation=tf.constant(body["inputs"]["observation"], tf.float32))
        return {"outputs": out["action"].numpy().tolist()}
    rows = [row["observation"] for row in body["instances"]]
    out = signature(observation=tf.constant(rows, tf.float32))
    return {"predictions": out["action"].numpy().tolist()}


def test_rest_requests_and_responses_match_the_signatures(model):
    requests, responses = _blocks("request"), _blocks("response")
    assert len(requests) == len(responses) == 3
    for request, documented in zip(requests, responses, strict=True):
        body, documented = json.loads(request), json.loads(documented)
        served = _serve_rest(model, body)
        assert served.keys() == documented.keys()
        key = next(iter(served))
        assert np.shape(served[key]) == np.shape(documented[key])
        assert np.all(np.abs(served[key]) <= 2.0)  # Pendulum's bounds


def test_grpc_client_code_runs_against_the_signatures(model, monkeypatch):
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    class FakeStub:
        """Answers Predict from the SavedModel, as TF Serving would."""

        def __init__(self, channel):
            pass

        def Predict(self, request, timeout=None):
            assert request.model_spec.name == "pendulum_v1"
            signature = model.signatures[request.model_spec.signature_name]
            inputs = {k: tf.constant(tf.make_ndarray(v)) for k, v in request.inputs.items()}
            response = predict_pb2.PredictResponse()
            for name, value in signature(**inputs).items():
                response.outputs[name].CopyFrom(tf.make_tensor_proto(value.numpy()))
            return response

    import grpc

    monkeypatch.setattr(grpc, "insecure_channel", lambda target: object())
    monkeypatch.setattr(prediction_service_pb2_grpc, "PredictionServiceStub", FakeStub)
    (code,) = _blocks("grpc-client")
    namespace = {}
    exec(compile(code, DOC, "exec"), namespace)
    assert namespace["actions"].shape == (2, 1) and namespace["actions"].dtype == np.float32
    assert namespace["sampled"].shape == (1, 1)


def test_metadata_signature(model):
    metadata = json.loads(model.signatures["metadata"]()["metadata"].numpy())
    assert metadata == {"env_id": "Pendulum-v1"}
