"""Chaos: SIGKILLs at random instants, inside checkpoint saves and the export, of plain runs
and of a learner with env runners, and worker nodes of a multi-node Ray cluster removed
under a sweep. After each, the run or sweep completes from where it was, with no lost or
double-counted env step; a deterministic plain run ends bit-identical to an uninterrupted
one. Minutes: run with `pytest -m chaos` (not part of the default suite)."""

import csv
import glob
import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from conftest import REPO_ROOT

pytestmark = pytest.mark.chaos

TRAIN = os.path.join(REPO_ROOT, "scripts", "train.py")
SWEEP = os.path.join(REPO_ROOT, "scripts", "sweep.py")
EXPORT = os.path.join(REPO_ROOT, "scripts", "export.py")
PLAIN = [
    "--env=Pendulum-v1",
    "--total_steps=3000",
    "--learning_starts=200",
    "--batch_size=32",
    "--hidden_sizes=16,16",
    "--eval_every=1000",
    "--eval_episodes=1",
    "--log_every=100",
    "--checkpoint_every=100",
    "--keep_checkpoints=2",
    "--buffer_size=10000",
    "--deterministic",
]


def _command(run_dir, export_dir, *extra):
    return [
        sys.executable,
        TRAIN,
        *PLAIN,
        f"--run_dir={run_dir}",
        f"--export_dir={export_dir}",
        *extra,
    ]


def _final_variables(run_dir, step):
    """Every tensor of the run's checkpoint at `step` but the save counter (the number of
    saves differs between a killed and an uninterrupted run)."""
    reader = tf.train.load_checkpoint(os.path.join(run_dir, "checkpoints", f"ckpt-{step}"))
    names = [n for n in reader.get_variable_to_shape_map() if "save_counter" not in n]
    return {n: reader.get_tensor(n) for n in sorted(names) if "OBJECT_GRAPH" not in n}


def _replay_size(run_dir, step):
    with open(os.path.join(run_dir, "checkpoints", f"ckpt-{step}.extra", "state.json")) as f:
        return json.load(f)["replay"]["size"]


def _progress_steps(run_dir):
    with open(os.path.join(run_dir, "progress.csv"), newline="") as f:
        return [int(row["step"]) for row in csv.DictReader(f)]


def _last_progress_step(run_dir):
    try:
        return max(_progress_steps(run_dir), default=0)
    except (OSError, KeyError, ValueError):  # not written yet, or a row being written
        return 0


def _wait_then_kill(proc, run_dir, export_dir, rng):
    """SIGKILLs `proc`: at a random instant, or as soon as a checkpoint save or the export
    is under way (one kill in three each). Returns where it landed."""
    target = rng.choice(["random", "checkpoint", "export"])
    deadline = time.monotonic() + rng.uniform(4.0, 16.0)
    where = "random"
    while time.monotonic() < deadline and proc.poll() is None:
        if target == "checkpoint" and glob.glob(os.path.join(run_dir, "checkpoints", ".tmp-*")):
            where = "checkpoint"
            break
        if target == "export" and glob.glob(os.path.join(export_dir, "*", ".export-*")):
            where = "export"
            break
        time.sleep(0.0005 if target != "random" else 0.05)
    if proc.poll() is not None:
        return "finished"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return where


def test_twenty_kills_of_a_plain_run_end_bit_identical_to_an_uninterrupted_one(tmp_path):
    reference = tmp_path / "reference"
    done = subprocess.run(
        _command(reference, tmp_path / "ref_export", "--export=false"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    run_dir, export_dir = tmp_path / "run", tmp_path / "export"
    rng, landed = random.Random(0), []
    while len([w for w in landed if w != "finished"]) < 20:
        proc = subprocess.Popen(
            _command(run_dir, export_dir, "--resume"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        landed.append(_wait_then_kill(proc, run_dir, export_dir, rng))
        if landed[-1] == "finished":  # a complete run: start the next round on a new one
            assert (run_dir / "summary.json").exists()
            os.rename(run_dir, tmp_path / f"done-{len(landed)}")
    print(f"kills: {landed}")
    final = subprocess.run(
        _command(run_dir, export_dir, "--resume"), capture_output=True, text=True, timeout=600
    )
    assert final.returncode == 0, final.stderr[-3000:]
    assert landed.count("checkpoint") >= 1 and landed.count("random") >= 1

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["total_steps"] == 3000
    assert os.path.isfile(os.path.join(summary["saved_model_path"], "saved_model.pb"))
    # No env step lost or counted twice: one buffer row per step, one progress row per 100.
    assert _replay_size(run_dir, 3000) == 3000
    assert _progress_steps(run_dir) == list(range(100, 3001, 100))
    # The same weights, optimizer moments and RNG states as the run never killed.
    expected, actual = _final_variables(reference, 3000), _final_variables(run_dir, 3000)
    assert expected.keys() == actual.keys()
    for name in expected:
        np.testing.assert_array_equal(actual[name], expected[name], err_msg=name)
    # Every export is a whole version folder (kills inside an export leave only hidden
    # temporary folders, which TF Serving ignores).
    for version in glob.glob(os.path.join(export_dir, "*", "[0-9]*")):
        assert os.path.isfile(os.path.join(version, "saved_model.pb")), version
    # The final export removed the temporary folders that the killed ones left.
    assert glob.glob(os.path.join(export_dir, "*", ".*")) == []


def _children(pid):
    """The process ids whose parent is `pid`."""
    found = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.split("/")[2]))
    return found


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kills_inside_onnx_exports_leave_no_temporary_file_or_converter(tmp_path):
    """export.py --saved_model --formats=onnx SIGKILLed while tf2onnx converts: the version
    folder TF Serving serves never holds a temporary file, the converter dies with its
    parent, and the next export of the model leaves no temporary folder."""
    from tfsac import EnvSpec, SACConfig, SACLearner, export_policy

    spec = EnvSpec("Test-v0", 3, 1, (-2.0,), (2.0,), "Box(3)", "Box(1)", "none")
    learner = SACLearner(3, 1, SACConfig(hidden_sizes=(8,)))
    version = export_policy(learner.actor, spec, str(tmp_path), "m", {"env_id": "Test-v0"})
    before = sorted(os.listdir(version))
    command = [sys.executable, EXPORT, f"--saved_model={version}", "--formats=onnx"]
    temp = os.path.join(tmp_path, "m", ".export-*")
    rng, kills = random.Random(2), 0
    while kills < 3:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while proc.poll() is None and not (glob.glob(temp) and _children(proc.pid)):
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 1.0))
        converters = _children(proc.pid)
        if proc.poll() is not None or not converters:
            continue  # finished first: try again
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        assert sorted(os.listdir(version)) in (before, sorted([*before, "policy.onnx"]))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(map(_running, converters)):
            time.sleep(0.05)
        assert not any(map(_running, converters)), "the converter outlived its parent"
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert glob.glob(temp) == [] and sorted(os.listdir(version)) == sorted([*before, "policy.onnx"])


def test_killed_learner_with_env_runners_resumes_without_lost_steps(tmp_path):
    run_dir, export_dir = tmp_path / "run", tmp_path / "export"
    command = [
        sys.executable,
        TRAIN,
        "--env=Pendulum-v1",
        "--total_steps=6400",
        "--learning_starts=256",
        "--batch_size=32",
        "--hidden_sizes=16,16",
        "--eval_every=3200",
        "--eval_episodes=1",
        "--log_every=320",
        "--checkpoint_every=320",
        "--buffer_size=10000",
        "--num_actors=2",
        "--chunk_steps=32",
        "--runner_mode=sync",
        f"--run_dir={run_dir}",
        f"--export_dir={export_dir}",
        "--resume",
    ]
    rng, kills, reached = random.Random(1), 0, 0
    for _ in range(4):
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # Killed while it learns: after a new progress row (how long Ray and the runners take
        # to start varies by machine), at a random instant within the next second.
        while proc.poll() is None and _last_progress_step(run_dir) <= reached:
            time.sleep(0.2)
        time.sleep(rng.uniform(0.0, 1.0))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        reached = _last_progress_step(run_dir)
    final = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]
    print(f"learner kills: {kills}")
    assert kills >= 2
    assert _replay_size(run_dir, 6400) == 6400
    assert _progress_steps(run_dir) == list(range(320, 6401, 320))


def test_a_sweep_survives_worker_nodes_removed_and_added(tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    sweep_dir = tmp_path / "sweep"
    args = [
        sys.executable,
        SWEEP,
        "--env=Pendulum-v1",
        "--total_steps=1200",
        "--learning_starts=100",
        "--eval_every=400",
        "--eval_episodes=1",
        "--hidden_sizes=16,16",
        "--batch_size=32",
        "--buffer_size=2000",
        "--checkpoint_every=200",
        "--log_every=200",
        "--seeds=0,1",
        "--grid=learning_rate=3e-4,1e-3",
        "--cpus_per_trial=1",
        "--max_concurrent=2",
        "--max_failures=3",
        f"--sweep_dir={sweep_dir}",
        f"--ray_address={cluster.address}",
    ]
    try:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        removed = 0
        for _ in range(2):  # twice: a node dies under running trials, a new one joins
            deadline = time.monotonic() + 300
            while not glob.glob(str(sweep_dir / "*" / "seed*" / "checkpoints" / "ckpt-*")):
                assert time.monotonic() < deadline and proc.poll() is None, "no trial started"
                time.sleep(0.2)
            time.sleep(random.Random(removed).uniform(1.0, 8.0))
            cluster.remove_node(workers.pop(0), allow_graceful=False)
            removed += 1
            workers.append(cluster.add_node(num_cpus=1))
        out, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        cluster.shutdown()
    print(out, err)
    assert proc.returncode == 0, err[-3000:]
    summaries = sorted(glob.glob(str(sweep_dir / "*" / "seed*" / "summary.json")))
    assert len(summaries) == 4
    for path in summaries:
        run_dir = os.path.dirname(path)
        assert json.load(open(path))["total_steps"] == 1200
        assert _replay_size(run_dir, 1200) == 1200
        assert _progress_steps(run_dir) == list(range(200, 1201, 200))
    # One line per event, not Ray's node dumps.
    event = re.compile(
        r"\S+: (started|eval return .*|the trial failed: .*; retrying from its newest checkpoint)"
        r"|\[\d/4\] \S+: return .*|sweep: .*|results: .*"
    )
    lines = [line for line in out.splitlines() if line.strip()]
    assert not err.strip() and all(event.fullmatch(line) for line in lines), out + err
