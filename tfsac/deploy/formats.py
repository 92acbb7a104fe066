"""Exports beyond the SavedModel, converted from it into the same version folder: LiteRT
(`policy.tflite`, phones, robots' onboard computers, microcontrollers) and ONNX
(`policy.onnx`, ONNX Runtime in C++, C#, Java or JavaScript). Each holds `serving_default`
(`observation` in, `action` out, any batch size) and carries what a client needs: the
sidecar `tfsac_metadata.json` beside it, and for ONNX the same in `metadata_props`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, Sequence

from tfsac.deploy.metadata import read_metadata, sample_observations
from tfsac.errors import TfsacError, first_line

FILES = {"tflite": "policy.tflite", "onnx": "policy.onnx"}
QUANTIZATIONS = ("none", "float16", "int8")  # LiteRT's post-training options
ONNX_OPSET = 17
# The packages each format needs at export time (the `deploy` extra installs them).
_NEEDS = {"tflite": ("ai_edge_litert",), "onnx": ("tf2onnx", "onnx", "onnxruntime")}


def parse_formats(text: str) -> tuple:
    """'saved_model,onnx' -> ('saved_model', 'onnx') (SACConfig.validate checked the names)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def check_available(formats: Sequence[str]) -> None:
    """TfsacError, before anything is written, when a format's converter is missing."""
    import importlib.util

    for name in formats:
        missing = [m for m in _NEEDS.get(name, ()) if importlib.util.find_spec(m) is None]
        if missing:
            raise TfsacError(
                f"the {name} export needs {', '.join(missing)}: pip install 'tfsac[deploy]' "
                '(or -e ".[deploy]" in a checkout)'
            )


def write_tflite(saved_model_dir: str, path: str, quantization: str = "none") -> str:
    """`path` (a .tflite) from the SavedModel's serving_default (builtin ops): float32, or
    with float16 weights, or dynamic-range int8 (int8 weights, float activations)."""
    import tensorflow as tf

    converter = tf.lite.TFLiteConverter.from_saved_model(
        saved_model_dir, signature_keys=["serving_default"]
    )
    if quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "float16":
            converter.target_spec.supported_types = [tf.float16]
    try:
        model = converter.convert()
    except Exception as e:  # noqa: BLE001 - the converter raises many kinds; one line
        raise TfsacError(f"the LiteRT conversion failed: {first_line(e)}") from None
    with open(path, "wb") as f:
        f.write(model)
    return path


def write_onnx(saved_model_dir: str, path: str, metadata: Dict) -> str:
    """`path` (a .onnx) from the SavedModel's serving_default (tf2onnx, in a child process:
    its converter prints pages of TF logs), with `metadata` as its metadata_props."""
    import onnx

    command = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", saved_model_dir]
    command += ["--signature_def", "serving_default", "--opset", str(ONNX_OPSET)]
    done = subprocess.run(
        [*command, "--output", path], capture_output=True, text=True, env=_quiet_env()
    )
    if done.returncode != 0 or not os.path.isfile(path):
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        raise TfsacError(f"the ONNX conversion failed: {lines[-1]}")
    model = onnx.load(path)
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value if isinstance(value, str) else json.dumps(value)
    onnx.save(model, path)
    return path


def _quiet_env() -> Dict[str, str]:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def write_formats(saved_model_dir: str, formats: Sequence[str], metadata: Dict) -> None:
    """Writes each of `formats` but the SavedModel itself into its folder."""
    if "tflite" in formats:
        write_tflite(saved_model_dir, os.path.join(saved_model_dir, FILES["tflite"]))
    if "onnx" in formats:
        write_onnx(saved_model_dir, os.path.join(saved_model_dir, FILES["onnx"]), metadata)


def quantization_error(version_dir: str, count: int = 1000) -> float:
    """The largest action difference between the version's policy.tflite and its
    SavedModel on `count` observations sampled from the observation space."""
    import tensorflow as tf
    from ai_edge_litert.interpreter import Interpreter

    metadata = read_metadata(version_dir)
    served = tf.saved_model.load(version_dir).signatures["serving_default"]
    dim = metadata.get("observation_dim")
    if dim is None:
        dim = served.structured_input_signature[1]["observation"].shape[1]
    obs = sample_observations(metadata.get("observation_space_json"), dim, count, seed=1)
    expected = served(observation=tf.constant(obs))["action"].numpy()
    lite = Interpreter(model_path=os.path.join(version_dir, FILES["tflite"]))
    got = lite.get_signature_runner("serving_default")(observation=obs)["action"]
    return float(abs(got - expected).max())


def add_formats(version_dir: str, formats: Sequence[str], quantization: str = "none") -> list:
    """Converts an exported version's SavedModel into `formats` beside it (LiteRT with
    `quantization`), each file written under a temporary name and renamed into place (a
    server reading the folder never sees half a file); returns the paths written."""
    metadata = read_metadata(version_dir)
    written = []
    for name in (n for n in formats if n in FILES):
        path = os.path.join(version_dir, FILES[name])
        tmp = os.path.join(version_dir, f".{FILES[name]}.tmp")
        try:
            if name == "tflite":
                write_tflite(version_dir, tmp, quantization)
            else:
                write_onnx(version_dir, tmp, metadata)
            os.replace(tmp, path)
        except OSError as e:
            raise TfsacError(f"cannot write {path!r}: {e.strerror or e}") from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        written.append(path)
    return written
