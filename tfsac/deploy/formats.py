"""LiteRT and ONNX files converted from the SavedModel into its version folder, and checked to
act as it on samples of the observation space."""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tfsac.deploy.metadata import METADATA_FILE, read_metadata, sample_observations
from tfsac.errors import Fault, first_line
from tfsac.logs import native_stderr_captured

FILES = {"tflite": "policy.tflite", "onnx": "policy.onnx"}
QUANTIZATIONS = ("none", "float16", "int8")  # LiteRT's post-training options
ONNX_OPSET = 17


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


# Temporary folders named for host and pid: a later export removes dead (SIGKILLed) ones'.
TEMP_PREFIX = ".export-"
_HOST = re.sub(r"[^A-Za-z0-9_]+", "_", socket.gethostname()) or "host"
_TEMP_NAME = re.compile(rf"{re.escape(TEMP_PREFIX)}(?P<host>.+)-(?P<pid>\d+)-[^-]+")


def temp_folder(model_dir: str) -> str:
    """A new private temporary folder in `model_dir`, once this host's dead exports' are gone."""
    try:
        names = os.listdir(model_dir)
    except OSError:
        names = []
    for name in names:
        match = _TEMP_NAME.fullmatch(name)
        if match and match["host"] == _HOST and not _alive(int(match["pid"])):
            shutil.rmtree(os.path.join(model_dir, name), ignore_errors=True)
    return tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{_HOST}-{os.getpid()}-", dir=model_dir)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's process, alive
        return True
    return True


try:  # resolved here: the child between fork and exec only makes the call
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int):
    """A preexec_fn: the child gets SIGKILL when its parent dies (Linux)."""

    def setup():
        if _prctl is not None:
            _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)

    return setup


def parse_formats(text: str) -> tuple:
    """'saved_model,onnx' -> ('saved_model', 'onnx') (SACConfig.validate checked the names)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def write_tflite(saved_model_dir: str, path: str, quantization: str = "none") -> None:
    """`path` (a .tflite) from the SavedModel's serving_default; int8 is dynamic-range."""
    import tensorflow as tf

    try:  # it loads the SavedModel: a failure here is a read failure, said as one
        converter = tf.lite.TFLiteConverter.from_saved_model(
            saved_model_dir, signature_keys=["serving_default"]
        )
    except Exception as e:  # noqa: BLE001 - OSError, IndexError, TF's errors: one line
        error = f"cannot read the SavedModel at {saved_model_dir!r}: {first_line(e)}"
        raise Fault(error) from None
    if quantization != "none":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantization == "float16":
            converter.target_spec.supported_types = [tf.float16]
    try:
        model = converter.convert()
    except Exception as e:  # noqa: BLE001 - the converter raises many kinds; one line
        raise Fault(f"the LiteRT conversion failed: {first_line(e)}") from None
    with open(path, "wb") as f:
        f.write(model)


def write_onnx(saved_model_dir: str, path: str, metadata: Dict) -> None:
    """`path` (a .onnx) from serving_default, `metadata` as its metadata_props; tf2onnx runs
    in a child process, as it prints pages of TF logs."""
    import onnx

    command = [sys.executable, "-m", "tf2onnx.convert", "--saved-model", saved_model_dir]
    command += ["--signature_def", "serving_default", "--opset", str(ONNX_OPSET)]
    done = subprocess.run(
        [*command, "--output", path],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        preexec_fn=_die_with_parent(os.getpid()),  # never writes on after a kill of this one
    )
    if done.returncode != 0 or not os.path.isfile(path):
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        raise Fault(f"the ONNX conversion failed: {lines[-1]}")
    model = onnx.load(path)
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value if isinstance(value, str) else json.dumps(value)
    onnx.save(model, path)


def write_formats(
    saved_model_dir: str,
    formats: Sequence[str],
    metadata: Dict,
    quantization: str = "none",
    folder: Optional[str] = None,
) -> Dict[str, Optional[float]]:
    """Writes each of `formats` but the SavedModel into `folder` (default: the SavedModel's);
    returns {name: largest action difference from the SavedModel, None where quantized}."""
    checked, reference = {n: None for n in FILES if n in formats}, None
    for name in checked:
        path = os.path.join(folder or saved_model_dir, FILES[name])
        if name == "tflite":
            write_tflite(saved_model_dir, path, quantization)
        else:
            write_onnx(saved_model_dir, path, metadata)
        if name == "onnx" or quantization == "none":  # a quantized one's error is said
            reference = reference or reference_actions(saved_model_dir)
            checked[name] = check_parity(path, reference, f"the converted {FILES[name]}")
    return checked


def with_quantization(metadata: Dict, formats: Sequence[str], quantization: str) -> Dict:
    """The sidecar metadata with the policy.tflite's `quantization` (its name does not say)."""
    if "tflite" not in formats:
        return metadata
    metadata = {k: v for k, v in metadata.items() if k != "tflite_quantization"}
    return metadata if quantization == "none" else {**metadata, "tflite_quantization": quantization}


def check_files(version_dir: str) -> None:
    """A Fault unless each converted file loads and, unquantized, acts as its SavedModel."""
    reference = None
    for name, file in FILES.items():
        path = os.path.join(version_dir, file)
        if os.path.isfile(path) and not (name == "tflite" and litert_quantized(path)):
            reference = reference or reference_actions(version_dir)
            check_parity(path, reference, path)


def check_readable(version_dir: str) -> None:
    """A Fault unless the SavedModel's graph and variables read whole (before any converter)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    variables = os.path.join(version_dir, "variables", "variables")
    try:
        with open(os.path.join(version_dir, "saved_model.pb"), "rb") as f:
            saved_model_pb2.SavedModel.FromString(f.read())
        if os.path.exists(variables + ".index"):
            reader = tf.train.load_checkpoint(variables)
            for name in reader.get_variable_to_shape_map():
                reader.get_tensor(name)
    except Exception as e:  # noqa: BLE001 - DecodeError, IndexError, TF's errors: one line
        error = f"cannot read the SavedModel at {version_dir!r}: {first_line(e)}"
        raise Fault(error) from None


def add_formats(
    version_dir: str,
    formats: Sequence[str],
    quantization: str = "none",
    say: Optional[Callable[[str], None]] = None,
) -> list:
    """Converts a version's SavedModel into `formats`, renamed into place; the paths written."""
    check_readable(version_dir)
    metadata = read_metadata(version_dir)
    if not any(n in FILES for n in formats):
        return []
    tmp_dir = None
    try:
        tmp_dir = temp_folder(os.path.dirname(os.path.abspath(version_dir)))
        # All converted before any is renamed: a failed conversion leaves the version as it was.
        names = write_formats(version_dir, formats, metadata, quantization, tmp_dir)
        paths = [os.path.join(version_dir, FILES[n]) for n in names]
        sidecar = with_quantization(metadata, names, quantization)
        if sidecar != metadata:
            with open(os.path.join(tmp_dir, METADATA_FILE), "w") as f:
                json.dump(sidecar, f, indent=2)
            paths.append(os.path.join(version_dir, METADATA_FILE))
        for path in paths:
            os.replace(os.path.join(tmp_dir, os.path.basename(path)), path)
    except OSError as e:
        raise Fault(f"cannot write in {version_dir!r}: {e.strerror or e}") from None
    finally:
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    for line in written_lines(version_dir, names) if say else ():
        say(line)
    return paths


def written_lines(version_dir: str, checked: Dict[str, Optional[float]]) -> List[str]:
    """What an export says of each file it converted: its path and its action error."""
    lines = []
    for name, error in checked.items():
        path = os.path.join(version_dir, FILES[name])
        if error is None:
            lines.append(f"exported {path} (quantized: its action error is not checked)")
        else:
            lines.append(
                f"exported {path}: acts as the SavedModel within {error:.2g} on "
                f"{PARITY_OBSERVATIONS} observations (allowed {PARITY_TOLERANCE:g})"
            )
    return lines
