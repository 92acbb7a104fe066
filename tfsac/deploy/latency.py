"""Per-call latency of an export (`scripts/benchmark.py --inference`): the SavedModel in Python
and through TF's C API (as TF Serving loads it), LiteRT and ONNX Runtime."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np

from tfsac.deploy.formats import litert_interpreter, onnx_session

BATCHES = (1, 64)
RUNTIMES = ("saved_model_python", "saved_model_c_api", "litert", "onnxruntime")
_WARMUP_CALLS = 50
_C_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "saved_model_latency.c")


def time_calls(call: Callable[[], object], calls: int) -> Dict[str, float]:
    """p50 and p99 in microseconds of `calls` calls timed one by one, after a warm-up."""
    for _ in range(_WARMUP_CALLS):
        call()
    micros = np.empty(calls)
    for i in range(calls):
        start = time.perf_counter_ns()
        call()
        micros[i] = (time.perf_counter_ns() - start) / 1e3
    p50, p99 = np.percentile(micros, [50, 99])
    return {"p50_us": round(float(p50), 1), "p99_us": round(float(p99), 1)}


def _runner(runtime: str, version_dir: str):
    """A function of observation rows -> actions in `runtime` (None: the C API's)."""
    if runtime == "saved_model_python":
        import tensorflow as tf

        served = tf.saved_model.load(version_dir).signatures["serving_default"]
        return lambda rows: served(observation=tf.constant(rows))["action"]
    if runtime == "onnxruntime":
        session = onnx_session(os.path.join(version_dir, "policy.onnx"))
        return lambda rows: session.run(["action"], {"observation": rows})[0]
    if runtime != "litert":
        return None
    runners = {}  # one interpreter per batch size: a new shape means a new allocation

    def run(rows):
        if len(rows) not in runners:
            lite = litert_interpreter(os.path.join(version_dir, "policy.tflite"))
            runners[len(rows)] = lite.get_signature_runner("serving_default")
        return runners[len(rows)](observation=rows)["action"]

    return run


def signature_tensors(version_dir: str):
    """('op', 'index') of serving_default's observation and action, and the observation width."""
    from tensorflow.core.protobuf import saved_model_pb2

    model = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as f:
        model.ParseFromString(f.read())
    signature = model.meta_graphs[0].signature_def["serving_default"]

    def split(name):
        op, _, index = name.partition(":")
        return op, index or "0"

    observation = signature.inputs["observation"]
    width = observation.tensor_shape.dim[-1].size
    return split(observation.name), split(signature.outputs["action"].name), width


def build_c_timer(build_dir: str) -> str:
    """The binary of saved_model_latency.c on TF's C API; RuntimeError saying why not."""
    import tensorflow as tf

    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if compiler is None:
        raise RuntimeError("no C compiler (cc, gcc or clang) on PATH")
    lib = tf.sysconfig.get_lib()
    binary = os.path.join(build_dir, "saved_model_latency")
    command = [compiler, "-O2", "-o", binary, _C_SOURCE, f"-I{tf.sysconfig.get_include()}"]
    command += [f"-L{lib}", "-l:libtensorflow_cc.so.2", "-l:libtensorflow_framework.so.2"]
    done = subprocess.run([*command, f"-Wl,-rpath,{lib}"], capture_output=True, text=True)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        raise RuntimeError(f"building the C API timer failed: {lines[-1]}")
    return binary


def time_c_api(binary: str, version_dir: str, tensors, batch: int, calls: int):
    """p50 and p99 of `calls` TF_SessionRun calls; `tensors` is signature_tensors(version_dir)."""
    (in_op, in_index), (out_op, out_index), obs_dim = tensors
    args = [version_dir, in_op, in_index, out_op, out_index, obs_dim, batch, calls]
    done = subprocess.run(
        [binary, *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no output"]
        raise RuntimeError(lines[-1])
    p50, p99 = map(float, done.stdout.split())
    return {"p50_us": round(p50, 1), "p99_us": round(p99, 1)}


def measure(version_dir: str, calls: int = 2000) -> List[Dict]:
    """{runtime, batch, p50_us, p99_us} (or skipped: why) per runtime and batch size."""
    tensors = signature_tensors(version_dir)
    obs_dim = tensors[2]
    rng = np.random.default_rng(0)
    observations = {b: rng.uniform(-1, 1, (b, obs_dim)).astype(np.float32) for b in BATCHES}
    rows = []
    with tempfile.TemporaryDirectory() as build_dir:
        try:
            binary, why_not = build_c_timer(build_dir), None
        except RuntimeError as e:
            binary, why_not = None, str(e)
        for runtime in RUNTIMES:
            run = _runner(runtime, version_dir)
            for batch in BATCHES:
                row = {"runtime": runtime, "batch": batch}
                if run is not None:
                    row.update(time_calls(lambda b=batch, r=run: r(observations[b]), calls))
                elif binary is not None:
                    row.update(time_c_api(binary, version_dir, tensors, batch, calls))
                else:
                    row["skipped"] = why_not
                rows.append(row)
    return rows


def table(rows: List[Dict]) -> str:
    """The rows as a Markdown table (µs per call), one line per runtime."""
    lines = [
        "| runtime | batch 1 p50 | batch 1 p99 | batch 64 p50 | batch 64 p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for runtime in RUNTIMES:
        cells = []
        for batch in BATCHES:
            row = next(r for r in rows if r["runtime"] == runtime and r["batch"] == batch)
            if "skipped" in row:
                cells += ["–", "–"]
            else:
                cells += [f"{row['p50_us']:.1f} µs", f"{row['p99_us']:.1f} µs"]
        lines.append(f"| {runtime} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
