"""SavedModel round trips, in process and through saved_model_cli's C++ loader."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT

from tfsac import EnvSpec, SACConfig, SACLearner, TfsacError, export_policy, load_policy
from tfsac.algorithm.resolve import resolve
from tfsac.data.envs import unit_to_bounds
from tfsac.deploy import export as export_module
from tfsac.deploy.loading import check_saved_model
from tfsac.deploy.metadata import read_metadata
from tfsac.files import check_writable

SPEC = EnvSpec(
    "Test-v0",
    obs_dim=3,
    action_dim=2,
    action_low=(0.0, -10.0),
    action_high=(5.0, 2.0),
    observation_space="Box(3)",
    action_space="Box(2)",
    observation_flattening="none",
)
LOW, HIGH = np.array(SPEC.action_low), np.array(SPEC.action_high)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    learner = SACLearner(3, 2, SACConfig(hidden_sizes=(32, 32)))
    # Push the means to large values so that some actions saturate at the bounds.
    learner.actor.mean.bias.assign([6.0, -6.0])
    path = export_policy(
        learner.actor, SPEC, str(tmp_path_factory.mktemp("export")), "test", {"env_id": "Test-v0"}
    )
    return learner, path


def _obs(n, seed=0):
    return np.random.default_rng(seed).normal(0, 3, (n, 3)).astype(np.float32)


def test_layout_and_metadata(exported):
    _, path = exported
    assert os.path.basename(path) == "1"
    assert os.path.isfile(os.path.join(path, "saved_model.pb"))
    with open(os.path.join(path, export_module.METADATA_FILE)) as f:
        assert json.load(f)["env_id"] == "Test-v0"
    assert [n for n in os.listdir(os.path.dirname(path))] == ["1"]  # no temp folders left


def _warmup_requests(path):
    from tensorflow_serving.apis import prediction_log_pb2

    records = tf.data.TFRecordDataset(os.path.join(path, export_module.WARMUP_FILE))
    return [
        prediction_log_pb2.PredictionLog.FromString(r.numpy()).predict_log.request for r in records
    ]


def test_warmup_requests_parse_and_run_through_serving_default(exported):
    _, path = exported
    requests = _warmup_requests(path)
    served = load_policy(path).signatures["serving_default"]
    assert [r.model_spec.name for r in requests] == ["test", "test"]
    assert {r.model_spec.signature_name for r in requests} == {"serving_default"}
    batches = []
    for request in requests:
        assert list(request.inputs) == ["observation"]
        obs = tf.make_ndarray(request.inputs["observation"])
        assert obs.dtype == np.float32 and obs.shape[1] == 3 and np.isfinite(obs).all()
        action = served(observation=tf.constant(obs))["action"].numpy()
        assert action.shape == (len(obs), 2) and np.all((action >= LOW) & (action <= HIGH))
        batches.append(len(obs))
    assert batches == [1, 64]


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_export_follows_the_umask(exported, tmp_path, umask):
    learner, _ = exported
    previous = os.umask(umask)
    try:
        path = export_policy(learner.actor, SPEC, str(tmp_path), "perm", {"env_id": "Test-v0"})
    finally:
        os.umask(previous)
    # Every folder and file as readable as the umask allows (a TF Serving container running
    # as another user reads them), the version folder included.
    for root, _dirs, files in os.walk(path):
        assert os.stat(root).st_mode & 0o777 == 0o777 & ~umask, root
        for name in files:
            mode = os.stat(os.path.join(root, name)).st_mode & 0o777
            assert mode == 0o666 & ~umask, name


@pytest.mark.parametrize("batch", [1, 64])
def test_signatures_match_in_process_policy(exported, batch):
    learner, path = exported
    model = load_policy(path)
    obs = _obs(batch)
    served = model.signatures["serving_default"](observation=tf.constant(obs))["action"].numpy()
    expected = unit_to_bounds(learner.act(obs, deterministic=True), LOW, HIGH)
    assert served.shape == (batch, 2) and served.dtype == np.float32
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-5)
    sampled = model.signatures["sample"](observation=tf.constant(obs))["action"].numpy()
    assert sampled.shape == (batch, 2)
    for actions in (served, sampled):
        assert np.all(actions >= LOW) and np.all(actions <= HIGH)


def test_sample_signature_is_stochastic(exported):
    _, path = exported
    sample = load_policy(path).signatures["sample"]
    obs = tf.constant(np.zeros((4, 3), np.float32))
    assert not np.array_equal(sample(observation=obs)["action"], sample(observation=obs)["action"])


def test_saved_model_cli_run_matches(exported, tmp_path):
    """saved_model_cli loads through the C++ SavedModel loader that TF Serving uses."""
    learner, path = exported
    obs = _obs(5, seed=1)
    cmd = [
        sys.executable,
        "-m",
        "tensorflow.python.tools.saved_model_cli",
        "run",
        "--dir",
        path,
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--input_exprs",
        f"observation={obs.tolist()}",
        "--outdir",
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    served = np.load(tmp_path / "action.npy")
    expected = unit_to_bounds(learner.act(obs, deterministic=True), LOW, HIGH)
    np.testing.assert_allclose(served, expected, rtol=1e-5, atol=1e-5)


def test_versions_increase(exported, tmp_path, monkeypatch):
    learner, _ = exported
    first = export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    second = export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert (os.path.basename(first), os.path.basename(second)) == ("1", "2")
    # TF Serving's versions: folders named by ASCII digits that fit an int64, as named.
    for name in ("\u00b2", "\u0663", "abc", "9" * 20):
        os.makedirs(tmp_path / "m" / name)
    (tmp_path / "m" / "9").write_text("")  # a file: no version
    shutil.copytree(first, tmp_path / "m" / "007")
    with pytest.raises(TfsacError, match=r"name one, e\.g\. .*m/007 \(the newest\)"):
        check_saved_model(str(tmp_path / "m"))
    third = export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert os.path.basename(third) == "8"
    monkeypatch.syspath_prepend(os.path.join(REPO_ROOT, "scripts"))
    import _cli

    assert _cli.version_note(third).startswith(
        f"version 8 of {tmp_path / 'm'} (versions there: 1, 2, 007, 8); TF Serving serves "
        "the highest: so this one replaces version 007."
    )


def test_failed_export_leaves_nothing(exported, tmp_path, monkeypatch):
    learner, _ = exported

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(
        export_module, "build_archive", lambda *a: type("A", (), {"write_out": broken})()
    )
    with pytest.raises(TfsacError, match="No space left"):
        export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert os.listdir(tmp_path / "m") == []


def test_tf_write_error_during_export_is_one_clear_error(exported, tmp_path, monkeypatch):
    learner, _ = exported

    def full_disk(*args, **kwargs):  # what TF's SaveV2 raises on a full disk
        raise tf.errors.ResourceExhaustedError(None, None, "No space left on device [Op:SaveV2]")

    monkeypatch.setattr(
        export_module, "build_archive", lambda *a: type("A", (), {"write_out": full_disk})()
    )
    with pytest.raises(TfsacError, match="cannot export.*No space left on device"):
        export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert os.listdir(tmp_path / "m") == []


def test_truncated_variables_file_is_one_clear_error(exported, tmp_path):
    learner, _ = exported
    path = export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    data = os.path.join(path, "variables", "variables.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(50)
    with pytest.raises(TfsacError, match="cannot load the SavedModel"):
        load_policy(path)


def test_write_check_leaves_no_folders_behind(tmp_path):
    check_writable(str(tmp_path / "a" / "b" / "c"))
    assert os.listdir(tmp_path) == []
    (tmp_path / "kept").mkdir()
    check_writable(str(tmp_path / "kept" / "new"))
    assert os.listdir(tmp_path) == ["kept"] and os.listdir(tmp_path / "kept") == []
    check_writable(str(tmp_path / "new" / ".." / "x" / "."))  # makes 'new' and 'x'
    assert os.listdir(tmp_path) == ["kept"]
    (tmp_path / "a_file").write_text("")  # an output folder named as a file: said so
    with pytest.raises(TfsacError, match="'.*a_file': it exists and is not a folder$"):
        check_writable(str(tmp_path / "a_file"))


def test_unwritable_export_dir(exported, tmp_path):
    learner, _ = exported
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(TfsacError, match="cannot write"):
        export_policy(learner.actor, SPEC, str(blocker / "sub"), "m", {})


def test_load_policy_bad_path(tmp_path):
    with pytest.raises(TfsacError, match="no SavedModel"):
        load_policy(str(tmp_path / "missing"))
    (tmp_path / "saved_model.pb").write_bytes(b"not a protobuf")
    with pytest.raises(TfsacError, match="cannot load"):
        load_policy(str(tmp_path))


@pytest.fixture(scope="module")
def converted(exported, tmp_path_factory):
    learner, _ = exported
    path = export_policy(
        learner.actor,
        SPEC,
        str(tmp_path_factory.mktemp("formats")),
        "test",
        {"env_id": "Test-v0", "action_low": list(SPEC.action_low)},
        formats=("saved_model", "tflite", "onnx"),
    )
    return path


def test_litert_and_onnx_files_give_the_saved_models_actions(converted):
    import onnx
    import onnxruntime
    from ai_edge_litert.interpreter import Interpreter

    served = load_policy(converted).signatures["serving_default"]
    lite = Interpreter(model_path=os.path.join(converted, "policy.tflite"))
    lite = lite.get_signature_runner("serving_default")
    session = onnxruntime.InferenceSession(os.path.join(converted, "policy.onnx"))
    assert [i.name for i in session.get_inputs()] == ["observation"]
    obs = _obs(1000, seed=3)  # saturating and interior actions (the means are pushed out)
    expected = served(observation=tf.constant(obs))["action"].numpy()
    # One file, any batch size: 1 (a robot's control step) and 64 (a server's batch).
    for batch in (1, 64):
        for start in range(0, 1000 if batch == 64 else 50, batch):
            rows = obs[start : start + batch]
            want = expected[start : start + batch]
            np.testing.assert_allclose(lite(observation=rows)["action"], want, atol=1e-5)
            got = session.run(["action"], {"observation": rows})[0]
            np.testing.assert_allclose(got, want, atol=1e-5)
    model = onnx.load(os.path.join(converted, "policy.onnx"))
    props = {p.key: p.value for p in model.metadata_props}
    assert props["env_id"] == "Test-v0" and json.loads(props["action_low"]) == [0.0, -10.0]
    with open(os.path.join(converted, export_module.METADATA_FILE)) as f:
        assert json.load(f)["env_id"] == "Test-v0"  # the sidecar beside policy.tflite


def test_a_runs_export_names_each_file_with_the_parity_it_was_checked_to(
    exported, converted, tmp_path, monkeypatch, caplog
):
    """The end of a run with export_formats=saved_model,tflite,onnx: a line per file, each
    converted one with the largest action difference its check measured. The converters
    are stood in for by copies of the `converted` files (the same actor): the check is
    real."""
    import logging

    from tfsac.deploy import formats

    learner, _ = exported
    for name in ("tflite", "onnx"):
        source = os.path.join(converted, formats.FILES[name])
        copy = lambda saved, out, *args, source=source: shutil.copy(source, out)  # noqa: E731
        monkeypatch.setattr(formats, f"write_{name}", copy)
    formats_asked = "saved_model,tflite,onnx"
    config = resolve(
        SACConfig(export_dir=str(tmp_path), model_name="m", export_formats=formats_asked)
    )
    caplog.set_level(logging.INFO, logger="absl")
    import gymnasium as gym

    from tfsac.data.spaces import space_to_json

    box = space_to_json(gym.spaces.Box(-3.0, 3.0, (3,), np.float32))  # as a run's spec says
    spec = dataclasses.replace(SPEC, observation_space_json=box)
    path = export_module.export_trained_policy(
        config, learner, spec, {"step": 10, "return_mean": 1.0, "seed": 0}
    )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("exported")]
    assert lines[0] == f"exported SavedModel to {path}"
    reference = formats.reference_actions(path)
    for line, file in zip(lines[1:], ("policy.tflite", "policy.onnx"), strict=True):
        error = formats.action_error(os.path.join(path, file), reference)
        assert line == (
            f"exported {os.path.join(path, file)}: acts as the SavedModel within "
            f"{error:.2g} on 256 observations (allowed 0.0001)"
        )


def test_a_failed_conversion_leaves_no_version_folder(exported, tmp_path, monkeypatch):
    from tfsac.deploy import formats

    learner, _ = exported

    def broken(saved_model_dir, path, metadata):
        raise TfsacError("the ONNX conversion failed: Unsupported op")

    monkeypatch.setattr(formats, "write_onnx", broken)
    with pytest.raises(TfsacError, match="ONNX conversion failed"):
        export_policy(learner.actor, SPEC, str(tmp_path), "m", {}, formats=("onnx",))
    assert os.listdir(tmp_path / "m") == []


def test_a_converted_file_that_acts_otherwise_is_refused_and_nothing_is_published(
    exported, converted, tmp_path, monkeypatch
):
    """Found by a tester: nothing checked at export time that policy.tflite and policy.onnx
    act as their SavedModel (the README said each is checked), nor that a version's files
    load before a benchmark reads them (a damaged one was a traceback naming a copy)."""
    import shutil

    from tfsac.deploy import formats

    learner, path = exported
    other = SACLearner(3, 2, SACConfig(hidden_sizes=(32, 32)))  # other weights
    wrong = export_policy(other.actor, SPEC, str(tmp_path / "o"), "o", {}, formats=("onnx",))
    monkeypatch.setattr(
        formats, "write_onnx", lambda sm, out, md: shutil.copy(f"{wrong}/policy.onnx", out)
    )
    error = r"the converted policy.onnx does not act as its SavedModel: "
    error += r"largest action difference \S+ on 256 observations from the space"
    with pytest.raises(TfsacError, match=error):
        export_policy(learner.actor, SPEC, str(tmp_path), "m", {}, formats=("onnx",))
    assert os.listdir(tmp_path / "m") == []  # no version published
    version = shutil.copytree(path, tmp_path / "v" / "1")
    with pytest.raises(TfsacError, match=error):
        formats.add_formats(str(version), ("tflite", "onnx"))
    assert sorted(os.listdir(version)) == sorted(os.listdir(path))  # no format added

    # A version's own files: each loads and acts as its SavedModel, else one line naming it.
    formats.check_files(converted)
    damaged = shutil.copytree(converted, tmp_path / "d" / "1")
    for name, runtime in (("policy.tflite", "LiteRT"), ("policy.onnx", "ONNX")):
        good = (damaged / name).read_bytes()
        (damaged / name).write_bytes(good[:3000])
        with pytest.raises(TfsacError, match=f"cannot load the {runtime} model '{damaged / name}'"):
            formats.check_files(str(damaged))
        (damaged / name).write_bytes(good)
    shutil.copy(f"{wrong}/policy.onnx", damaged / "policy.onnx")
    with pytest.raises(TfsacError, match=f"{damaged / 'policy.onnx'} does not act"):
        formats.check_files(str(damaged))
    # A quantized LiteRT file is told by its tensors, not its metadata (the reviewer's: a
    # version quantized before tfsac recorded it was refused as a wrong file).
    shutil.copy(f"{converted}/policy.onnx", damaged / "policy.onnx")
    formats.add_formats(str(damaged), ("tflite",), "int8")
    metadata = read_metadata(str(damaged))
    del metadata["tflite_quantization"]
    (damaged / export_module.METADATA_FILE).write_text(json.dumps(metadata))
    formats.check_files(str(damaged))


def test_the_parity_check_feeds_no_values_at_which_the_arithmetic_overflows(tmp_path):
    """A reviewer's: bounds at float32's largest (CartPole's velocities) drew observations
    near 3e38, at which an untrained CrossQ actor gave NaN in LiteRT and a finite action
    from the SavedModel, and its export was refused as a wrong file."""
    import gymnasium as gym

    from tfsac.data.spaces import space_to_json

    big = np.finfo(np.float32).max
    space = space_to_json(gym.spaces.Box(-big, big, (4,), np.float32))
    spec = EnvSpec("T-v0", 4, 2, (-1.0, -1.0), (1.0, 1.0), "Box(4)", "Box(2)", "none", space)
    keras.utils.set_random_seed(0)  # weights at which it did
    learner = SACLearner(4, 2, SACConfig(hidden_sizes=(64, 64), algorithm="crossq"))
    metadata = {"observation_space_json": space}
    formats = ("saved_model", "tflite", "onnx")
    assert os.path.isfile(
        os.path.join(
            export_policy(learner.actor, spec, str(tmp_path), "m", metadata, formats=formats),
            "policy.onnx",
        )
    )


def test_no_version_beyond_what_tf_serving_reads_is_written(exported, tmp_path):
    """A tester's: beside a folder 2**63 - 1 (TF Serving's int64 maximum) an export wrote
    version 2**63, which TF Serving never serves."""
    learner, _ = exported
    (tmp_path / "m" / str(2**63 - 1)).mkdir(parents=True)
    with pytest.raises(TfsacError, match=r"holds version 9223372036854775807, the highest TF S"):
        export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert os.listdir(tmp_path / "m") == [str(2**63 - 1)]


def test_a_format_without_its_converter_is_refused_with_the_extra_to_install(monkeypatch):
    from tfsac.deploy import loading

    monkeypatch.setitem(loading._NEEDS, "onnx", ("no_such_converter_module",))
    message = r"needs no_such_converter_module: pip install 'tfsac\[deploy\]'"
    with pytest.raises(TfsacError, match=message):
        loading.check_available(("saved_model", "onnx"))
    loading.check_available(("saved_model", "tflite"))


@pytest.mark.slow
def test_export_script_adds_formats_beside_a_saved_model_and_exports_a_run(tmp_path):
    from conftest import REPO_ROOT, tiny_config

    from tfsac import train

    result = train(tiny_config(tmp_path, "Pendulum-v1", checkpoint_every=20), quiet=True)
    script = os.path.join(REPO_ROOT, "scripts", "export.py")

    def run(*args):
        done = subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "XNNPACK" not in done.stderr and "cuInit" not in done.stderr
        return done.stdout

    out = run(f"--saved_model={result.saved_model_path}", "--formats=tflite", "--quantize=float16")
    lines = out.splitlines()
    tflite = os.path.join(result.saved_model_path, "policy.tflite")
    assert lines[0] == f"exported {tflite} (quantized: its action error is not checked)"
    assert "is the float16-quantized model (tfsac_metadata.json says so" in lines[1]
    assert re.fullmatch(
        r"float16 quantization: largest action error \S+ on 1000 observations", lines[2]
    )
    assert len(lines) == 3
    assert read_metadata(result.saved_model_path)["tflite_quantization"] == "float16"
    out = run(f"--saved_model={result.saved_model_path}", "--formats=tflite")  # float32 again
    assert re.fullmatch(  # the line training's export logs
        rf"exported {re.escape(tflite)}: acts as the SavedModel within \S+ on 256 "
        r"observations \(allowed 0.0001\)",
        out.strip(),
    )
    assert "tflite_quantization" not in read_metadata(result.saved_model_path)
    assert not [n for n in os.listdir(result.saved_model_path) if n.startswith(".")]
    out = run(f"--run_dir={result.run_dir}", "--formats=onnx", f"--export_dir={tmp_path / 'again'}")
    version = tmp_path / "again" / "pendulum_v1" / "1"
    lines = out.splitlines()
    assert lines[0] == f"exported SavedModel to {version}"
    assert lines[1].startswith(f"exported {version / 'policy.onnx'}: acts as the SavedModel within")
    assert lines[2].startswith(f"  from {result.run_dir}/checkpoints/ckpt-40; version 1 of")
    assert (version / "policy.onnx").is_file() and (version / "saved_model.pb").is_file()
    # The run's last checkpoint holds the weights the run exported: the same actions.
    obs = tf.constant(np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32))
    before = load_policy(result.saved_model_path).signatures["serving_default"]
    after = load_policy(str(version)).signatures["serving_default"]
    np.testing.assert_array_equal(
        before(observation=obs)["action"].numpy(), after(observation=obs)["action"].numpy()
    )
    # The version records its checkpoint; the same weights are not published twice (a
    # tester's: versions 3 and 4 alike), unless a format or quantization it lacks is asked.
    assert read_metadata(str(version))["checkpoint"]["name"] == "ckpt-40"
    again = run(
        f"--run_dir={result.run_dir}", "--formats=onnx", f"--export_dir={version.parent.parent}"
    )
    assert (
        again.strip()
        == f"{version} holds {result.run_dir}/checkpoints/ckpt-40 already: nothing exported"
    )
    quantized = ("--formats=tflite", "--quantize=int8", f"--export_dir={tmp_path / 'again'}")
    assert "is the int8-quantized model" in run(f"--run_dir={result.run_dir}", *quantized)
    assert read_metadata(str(version.parent / "2"))["tflite_quantization"] == "int8"
    assert "nothing exported" in run(f"--run_dir={result.run_dir}", *quantized)
    assert sorted(os.listdir(version.parent)) == ["1", "2"]


def test_quantized_litert_files_are_smaller_and_their_action_error_is_measured(exported, tmp_path):
    from tfsac.deploy import formats

    learner, _ = exported
    sizes, errors = {}, {}
    # Finite observations beyond float16's range (65504) and non-finite ones.
    obs = np.zeros((6, SPEC.obs_dim), np.float32)
    obs[:, 0] = [1e5, -1e30, 1e20, np.nan, np.inf, -np.inf]
    for quantization in formats.QUANTIZATIONS:
        path = export_policy(learner.actor, SPEC, str(tmp_path), quantization, {})
        formats.add_formats(path, ("tflite",), quantization)
        sizes[quantization] = os.path.getsize(os.path.join(path, "policy.tflite"))
        errors[quantization] = formats.quantization_error(path)
        lite = formats.litert_interpreter(os.path.join(path, "policy.tflite"))
        action = lite.get_signature_runner("serving_default")(observation=obs)["action"]
        assert np.isfinite(action[:3]).all() and np.isnan(action[3:]).all(), quantization
    assert sizes["none"] > sizes["float16"] > sizes["int8"], sizes
    assert errors["none"] <= 1e-5, errors
    assert all(0 <= e < 0.1 * (HIGH - LOW).max() for e in errors.values()), errors


def _broken_copies(exported, root):
    """Copies of the exported version: variables truncated, saved_model.pb cut short,
    tfsac_metadata.json not JSON."""
    import shutil

    _, path = exported
    copies = {}
    for name in ("truncated", "bad_pb", "bad_metadata"):
        copies[name] = str(root / name)
        shutil.copytree(path, copies[name])
    with open(
        os.path.join(copies["truncated"], "variables", "variables.data-00000-of-00001"), "r+b"
    ) as f:
        f.truncate(100)
    with open(os.path.join(copies["bad_pb"], "saved_model.pb"), "r+b") as f:
        f.truncate(500)
    with open(os.path.join(copies["bad_metadata"], export_module.METADATA_FILE), "w") as f:
        f.write('{"env_id": ')
    return copies


def test_export_script_says_a_broken_saved_model_in_one_line_and_writes_nothing(exported, tmp_path):
    import concurrent.futures

    from conftest import REPO_ROOT

    copies = _broken_copies(exported, tmp_path)
    cases = [
        # One format per case: both read the SavedModel through the same loader first.
        ("truncated", "onnx", "cannot read the SavedModel at .*Read less bytes than requested"),
        ("bad_pb", "tflite", "cannot read the SavedModel at .*tensorflow.SavedModel"),
        ("bad_metadata", "onnx", "cannot read .*tfsac_metadata.json.: Expecting value"),
    ]
    before = {name: sorted(os.listdir(path)) for name, path in copies.items()}

    def run(case):
        name, fmt, _ = case
        script = os.path.join(REPO_ROOT, "scripts", "export.py")
        args = [f"--saved_model={copies[name]}", f"--formats={fmt}"]
        return subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, timeout=300
        )

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        done = list(pool.map(run, cases))
    for (name, fmt, message), proc in zip(cases, done, strict=True):
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
        assert len(lines) == 1 and re.match(f"error: {message}", lines[0]), (name, fmt, lines)
    assert before == {name: sorted(os.listdir(path)) for name, path in copies.items()}
    # Nor does a policy load with its metadata unread (it says how to flatten observations).
    from tfsac import Policy
    from tfsac.deploy.policy import saved_model_policy

    for load in (Policy.load, saved_model_policy):
        with pytest.raises(TfsacError, match="cannot read .*tfsac_metadata.json"):
            load(copies["bad_metadata"])


def test_export_script_says_when_there_is_nothing_to_do(exported):
    from conftest import REPO_ROOT

    _, path = exported
    before = sorted(os.listdir(path))
    script = os.path.join(REPO_ROOT, "scripts", "export.py")
    done = subprocess.run(
        [sys.executable, script, f"--saved_model={path}", "--formats=saved_model"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"nothing to do: {path} is a SavedModel already")
    assert sorted(os.listdir(path)) == before


def test_a_non_finite_observation_is_nan_in_every_runtime_and_refused_by_policy(converted):
    from conftest import assert_nan_contract

    assert_nan_contract(converted, _obs(8, seed=5))


def test_new_files_of_a_version_are_written_beside_it_never_inside(exported, tmp_path, monkeypatch):
    import shutil

    from tfsac.deploy import formats

    _, path = exported
    version = str(tmp_path / "m" / "1")
    shutil.copytree(path, version)
    before = sorted(os.listdir(version))
    seen = []

    def fake_write(saved_model_dir, out, *args):
        seen.append((os.path.dirname(out), sorted(os.listdir(version))))
        with open(out, "w") as f:
            f.write("converted")

    monkeypatch.setattr(formats, "write_tflite", fake_write)
    monkeypatch.setattr(formats, "write_onnx", fake_write)
    monkeypatch.setattr(formats, "check_parity", lambda *args: None)  # fake files
    formats.add_formats(version, ("tflite", "onnx"))
    for folder, _ in seen:
        assert os.path.dirname(folder) == str(tmp_path / "m")
        assert os.path.basename(folder).startswith(formats.TEMP_PREFIX)
    assert seen[0][1] == seen[1][1] == before  # every file converted before any is renamed
    assert sorted(os.listdir(tmp_path / "m")) == ["1"]  # the temporary folders are gone
    assert sorted(os.listdir(version)) == sorted([*before, "policy.onnx", "policy.tflite"])

    # A conversion that fails leaves the version as it was, no format replaced.
    def failing_write(*args):
        raise TfsacError("the ONNX conversion failed: boom")

    monkeypatch.setattr(formats, "write_onnx", failing_write)
    files = {n: (tmp_path / "m" / "1" / n).read_bytes() for n in ("policy.tflite", "policy.onnx")}
    with pytest.raises(TfsacError, match="boom"):
        formats.add_formats(version, ("tflite", "onnx"), "int8")
    assert files == {n: (tmp_path / "m" / "1" / n).read_bytes() for n in files}
    assert sorted(os.listdir(tmp_path / "m")) == ["1"]


@pytest.mark.parametrize(
    "entries, message",
    [
        ({"observation_space_json": "garbage"}, "'observation_space_json' is 'garbage'"),
        ({"observation_space_json": {"type": "Box"}}, "'obs.* does not describe a space"),
        ({"observation_space_json": {"type": "Graph"}}, "'obs.* does not describe a space"),
        ({"env_id": 7}, "'env_id' is 7, not what tfsac writes"),
        ({"observation_dim": True}, "'observation_dim' is True"),
        ({"action_low": [-1, "x"]}, "'action_low' is \\[-1, 'x'\\], not a list of finite numb"),
        ({"action_low": [float("nan")]}, "'action_low' is \\[nan\\], not a list of finite"),
        ({"action_high": [float("inf")]}, "'action_high' is \\[inf\\], not a list of finite"),
        (
            {"action_low": [-1.0, 0.5], "action_high": [1.0, 0.0]},
            "action bounds \\[-1.0, 0.5\\] to \\[1.0, 0.0\\] are not a box",
        ),
        ({"action_low": [-1.0], "action_high": [1.0, 1.0]}, "action bounds .* are not a box"),
        ({"eval_return_mean": "high"}, "'eval_return_mean' is 'high'"),
    ],
)
def test_metadata_that_reads_as_json_but_not_as_tfsac_wrote_it_is_one_line(
    tmp_path, entries, message
):
    from tfsac.deploy.metadata import read_metadata

    good = {"env_id": "Pendulum-v1", "observation_dim": 3, "eval_return_mean": None}
    (tmp_path / export_module.METADATA_FILE).write_text(json.dumps({**good, **entries}))
    with pytest.raises(TfsacError, match=f"cannot read .*tfsac_metadata.json': its {message}"):
        read_metadata(str(tmp_path))
    (tmp_path / export_module.METADATA_FILE).write_text(json.dumps(good))
    assert read_metadata(str(tmp_path)) == good
    # A dimension of one value (low == high) trains and exports: it loads too.
    degenerate = {**good, "action_low": [-1.0, 0.0], "action_high": [1.0, 0.0]}
    (tmp_path / export_module.METADATA_FILE).write_text(json.dumps(degenerate))
    assert read_metadata(str(tmp_path)) == degenerate


def test_an_export_removes_the_temporary_folders_of_dead_exports_only(exported, tmp_path):
    from tfsac.deploy import formats

    learner, _ = exported
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_TEXT)
    dead_pid = int(dead.stdout)
    model_dir = tmp_path / "m"
    live = f"{formats.TEMP_PREFIX}{formats._HOST}-{os.getpid()}-live"
    left = [
        f"{formats.TEMP_PREFIX}{formats._HOST}-{dead_pid}-dead",
        f"{formats.TEMP_PREFIX}otherhost-{dead_pid}-other",  # another host's: its pid says nothing
        f"{formats.TEMP_PREFIX}old",  # an earlier tfsac's, without a process id
        live,
    ]
    for name in left:
        (model_dir / name).mkdir(parents=True)
        (model_dir / name / "policy.onnx").write_text("half")
    path = export_policy(learner.actor, SPEC, str(tmp_path), "m", {})
    assert sorted(os.listdir(model_dir)) == sorted(["1", *left[1:]])
    assert os.path.basename(path) == "1"


_TEXT = dict(capture_output=True, text=True, timeout=60)


def test_the_converter_process_dies_with_its_parent():
    import signal
    import time

    from conftest import REPO_ROOT

    # A parent that runs a long child the way write_onnx runs tf2onnx, and says its pid.
    parent = (
        "import os, subprocess, sys\n"
        f"sys.path.insert(0, {REPO_ROOT!r})\n"
        "from tfsac.deploy.formats import _die_with_parent\n"
        "child = 'import os, time; print(os.getpid(), flush=True); time.sleep(120)'\n"
        "subprocess.run([sys.executable, '-c', child], preexec_fn=_die_with_parent(os.getpid()))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True)
    child = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _running(child):
        time.sleep(0.05)
    assert not _running(child), "the converter outlived its parent"


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended
    except OSError:
        return False


def test_a_resume_after_a_kill_before_summary_json_publishes_no_second_version(tmp_path):
    from conftest import tiny_config

    from tfsac import train

    config = tiny_config(tmp_path, "Pendulum-v1", model_name="m")
    first = train(config, quiet=True)
    with open(os.path.join(first.saved_model_path, export_module.METADATA_FILE)) as f:
        recorded = json.load(f)["checkpoint"]
    assert recorded["name"] == os.path.basename(first.summary["checkpoint"])
    assert str(tmp_path) not in json.dumps(recorded)  # served: no path of this machine
    os.remove(os.path.join(first.run_dir, "summary.json"))  # killed after the export's rename
    again = train(config, resume=True, quiet=True)
    assert again.saved_model_path == first.saved_model_path
    assert os.listdir(tmp_path / "export" / "m") == ["1"]
    assert os.path.isfile(os.path.join(first.run_dir, "summary.json"))
    # Another run's final checkpoint in the same folder has other weights: a new version.
    os.rename(first.run_dir, tmp_path / "first")
    other = train(dataclasses.replace(config, seed=1), quiet=True)
    assert os.path.basename(other.saved_model_path) == "2"


def test_a_copy_without_its_metadata_file_reads_the_metadata_signature(exported, tmp_path):
    """A tester's: evaluate.py asked for --env where the copy had lost tfsac_metadata.json,
    though the model's own metadata signature names it. And the two path flags mixed up
    are named: a version folder given as a run directory, and the other way round."""
    from tfsac import Policy
    from tfsac.deploy.policy import saved_model_policy
    from tfsac.files import run_config

    _, path = exported
    copy = str(tmp_path / "copy")
    shutil.copytree(path, copy)
    os.remove(os.path.join(copy, export_module.METADATA_FILE))
    assert saved_model_policy(copy)[1]["env_id"] == "Test-v0"
    assert Policy.load(copy).metadata == read_metadata(path)
    with pytest.raises(TfsacError, match="is an exported SavedModel, not a run directory: name"):
        run_config(copy)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{}")
    with pytest.raises(TfsacError, match="is a run directory, not a SavedModel: name it with"):
        check_saved_model(str(tmp_path / "run"))
