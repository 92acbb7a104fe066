"""A converted file's actions checked against its SavedModel's, on samples of the space."""

from __future__ import annotations

import os
from typing import Tuple

import numpy as np

from tfsac.deploy.metadata import read_metadata, sample_observations
from tfsac.errors import Fault, first_line
from tfsac.logs import native_stderr_captured

# Float32 rounding in another kernel order differs by about 1e-6; this much is a wrong file.
PARITY_TOLERANCE = 1e-4
PARITY_OBSERVATIONS = 256
OBSERVATION_LIMIT = 1e6  # the largest |value| the check feeds


def litert_interpreter(path: str):
    """A LiteRT interpreter of `path`, allocated without the XNNPACK delegate's INFO line."""
    from ai_edge_litert.interpreter import Interpreter

    try:
        with native_stderr_captured():
            lite = Interpreter(model_path=path)
            lite.allocate_tensors()
    except (ValueError, RuntimeError, OSError) as e:  # "not a valid Flatbuffer buffer"
        raise Fault(f"cannot load the LiteRT model {path!r}: {first_line(e)}") from None
    return lite


def litert_quantized(path: str) -> bool:
    """Whether the LiteRT file holds float16 or int8 tensors, whatever its metadata says."""
    details = litert_interpreter(path).get_tensor_details()
    return any(np.dtype(t["dtype"]) in (np.float16, np.int8) for t in details)


def onnx_session(path: str):
    import onnxruntime

    try:
        return onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - onnxruntime's own exception types: one line
        raise Fault(f"cannot load the ONNX model {path!r}: {first_line(e)}") from None


def reference_actions(saved_model_dir: str, count: int = PARITY_OBSERVATIONS) -> Tuple:
    """(observations, the SavedModel's serving_default actions): what files are compared with."""
    import tensorflow as tf

    from tfsac.deploy.loading import load_policy

    metadata = read_metadata(saved_model_dir)
    served = load_policy(saved_model_dir).signatures["serving_default"]
    dim = metadata.get("observation_dim")
    if dim is None:
        dim = served.structured_input_signature[1]["observation"].shape[1]
    obs = sample_observations(metadata.get("observation_space_json"), dim, count, seed=1)
    # Values near float32's largest overflow differently per runtime: not a wrong file.
    obs = np.clip(obs, -OBSERVATION_LIMIT, OBSERVATION_LIMIT)
    return obs, served(observation=tf.constant(obs))["action"].numpy()


def action_error(path: str, reference: Tuple, relative: bool = True) -> float:
    """The largest difference from the `reference` actions (`relative`: to 1 + |action|)."""
    obs, expected = reference
    if path.endswith(".onnx"):
        got = onnx_session(path).run(["action"], {"observation": obs})[0]
    else:
        runner = litert_interpreter(path).get_signature_runner("serving_default")
        got = np.asarray(runner(observation=obs)["action"])
    if got.shape != expected.shape or np.any(np.isfinite(got) != np.isfinite(expected)):
        return float("inf")
    finite = np.isfinite(expected)
    if not finite.any():
        return 0.0
    scale = 1.0 + abs(expected) if relative else 1.0
    return float((abs(got - expected) / scale)[finite].max())


def check_parity(path: str, reference: Tuple, shown_as: str) -> float:
    """A Fault unless the file at `path` (`shown_as`) acts as its SavedModel; the largest error."""
    error = action_error(path, reference)
    if not error <= PARITY_TOLERANCE:
        raise Fault(
            f"{shown_as} does not act as its SavedModel: largest "
            f"action difference {error:.3g} on {len(reference[0])} observations from the "
            f"space (allowed {PARITY_TOLERANCE:g})"
        )
    return error


def quantization_error(version_dir: str, count: int = 1000) -> float:
    """The largest action difference between the version's policy.tflite and its SavedModel."""
    path = os.path.join(version_dir, "policy.tflite")
    return action_error(path, reference_actions(version_dir, count), relative=False)
