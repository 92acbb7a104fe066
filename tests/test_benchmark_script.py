"""scripts/benchmark.py end to end (a tiny run: its output, not its speed)."""

import json
import math
import os
import subprocess
import sys

import pytest
from conftest import REPO_ROOT, script_module

SCRIPT = os.path.join(REPO_ROOT, "scripts", "benchmark.py")
TINY = [
    "--env=Pendulum-v1",
    "--steps=240",
    "--learning_starts=100",
    "--batch_size=16",
    "--hidden_sizes=16,16",
    "--update_calls=3",
]


def _run(args, cwd):
    return subprocess.run(
        [sys.executable, SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow
def test_rounds_print_one_json_line_each(tmp_path):
    proc = _run([*TINY, "--rounds=2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    ours = [line for line in lines if line.get("lib") == "tfsac"]
    assert len(ours) == 2
    for line in ours:
        assert line["env_steps_per_s"] > 0 and line["updates_per_s"] > 0
        assert line["act_latency_ms"] > 0
        assert (line["steps"], line["learning_starts"], line["batch_size"]) == (240, 100, 16)
    assert not os.listdir(tmp_path)  # the run directory was temporary


def test_missing_peers_are_one_line_before_tfsacs_rounds(tmp_path):
    proc = _run([*TINY, "--peers", f"--peers_dir={tmp_path}"], tmp_path)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: --peers: ") and "setup.sh" in lines[0]
    assert "env_steps_per_s" not in proc.stdout  # no round ran


def test_bad_flag_value_is_one_error_line(tmp_path):
    proc = _run([*TINY, "--rounds=0"], tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "rounds" in proc.stderr.strip().splitlines()[-1]


def test_steps_without_a_learning_phase_are_one_error_line(tmp_path):
    proc = _run([*TINY, "--steps=100"], tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "--steps (100) must be larger than --learning_starts (100)" in proc.stderr


@pytest.mark.slow
def test_breakdown_splits_call_time_and_counts_the_update_flops(tmp_path):
    proc = _run([*TINY, "--breakdown", "--breakdown_rounds=1"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [json.loads(x) for x in proc.stdout.strip().splitlines()]
    split = line["breakdown"]
    assert set(split["call_ms_by_updates_per_call"]) == {"1", "2", "4", "16"}
    assert all(ms > 0 for ms in split["call_ms_by_updates_per_call"].values())
    assert all(math.isfinite(split[k]) for k in ("fixed_ms_per_call", "ms_per_update"))
    # The FLOP rate comes from the slope, which a drifting machine can tilt to <= 0: then
    # there is none.
    assert (split["update_gflop_per_s"] is None) == (split["ms_per_update"] <= 0)
    # Rates (rounded to 0.1 GFLOP/s, which a saturated machine can round down to 0).
    for key in ("matmul_chain_gflop_per_s", "matmul_chain_4x_rows_gflop_per_s"):
        assert math.isfinite(split[key]) and split[key] >= 0
    assert split["update_and_act_ms"] > 0 and split["update_then_act_ms"] > 0
    # Pendulum (obs 3, action 1), two critics of [16, 16], batch 16. Multiply-adds per
    # sample: actor forward A = 3*16 + 16*16 + 16*2 = 336 (first layer 48); critics
    # C = 2 * (4*16 + 16*16 + 16*1) = 672 (first layer 128, its action part 32).
    # 4A - A1 + 6C - 2C1 + Ca = 1344 - 48 + 4032 - 256 + 32 = 5104; x 2 FLOPs x 16 rows.
    assert split["update_flops"] == 5104 * 2 * 16


def test_no_flop_count_for_another_update_shape(monkeypatch):
    """update_flops counts the default update only (the breakdown then gives no rate)."""
    from tfsac import SACConfig
    from tfsac.algorithm.resolve import resolve

    script = script_module("benchmark", monkeypatch)
    small = dict(hidden_sizes=(16, 16), batch_size=16)
    flops = lambda **options: script.update_flops(resolve(SACConfig(**small, **options)), 3, 1)  # noqa: E731
    assert flops() == 5104 * 2 * 16  # as above
    assert flops(policy_delay=2) is None
    assert flops(variant="v1") is None


@pytest.mark.slow
def test_inference_latency_table_covers_every_runtime_at_both_batch_sizes(tmp_path):
    import shutil

    proc = _run(
        ["--inference", "--env=Pendulum-v1", "--hidden_sizes=8", "--inference_calls=100"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    runtimes = ("saved_model_python", "saved_model_c_api", "litert", "onnxruntime")
    assert [(r["runtime"], r["batch"]) for r in rows] == [(n, b) for n in runtimes for b in (1, 64)]
    for row in rows:
        if row["runtime"] == "saved_model_c_api" and shutil.which("cc") is None:
            assert "no C compiler" in row["skipped"]  # a machine without one says so
            continue
        assert 0 < row["p50_us"] <= row["p99_us"], row
    assert lines[-6].startswith("| runtime | batch 1 p50")  # then one line per runtime
    assert [line.split(" | ")[0] for line in lines[-4:]] == [f"| {n}" for n in runtimes]


def _baseline_module():
    sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))
    try:
        import _baseline
    finally:
        sys.path.pop(0)
    return _baseline


def test_baseline_rounds_alternate_the_two_trees_and_print_their_ratios(tmp_path):
    baseline = _baseline_module()
    fields = baseline.probe_fields(
        {"env_id": "Pendulum-v1", "total_steps": 600, "seed": 0, "run_dir": "x"},
        {"env_id": "Pendulum-v1", "total_steps": 20000, "seed": 0},
    )
    assert fields["total_steps"] == 600 and "env_id" not in fields and "run_dir" not in fields
    assert fields["eval_every"] == 600 and fields["log_every"] == baseline.LOG_EVERY
    trees = {"baseline": str(tmp_path / "old"), "working": str(tmp_path / "new")}
    calls, lines = [], []

    class Done:
        returncode, stderr = 0, ""

    def run(command, cwd, env, **kwargs):
        calls.append((cwd, env["PYTHONPATH"], command))
        done = Done()
        rate = 100.0 if cwd == trees["baseline"] else 110.0
        done.stdout = f'noise\n{{"env_steps_per_s": {rate}}}\n'
        return done

    median = baseline.compare(trees, fields, 3, run=run, say=lines.append)
    first = ["baseline", "working", "working", "baseline", "baseline", "working"]
    assert [cwd for cwd, _, _ in calls] == [trees[side] for side in first]
    for cwd, path, command in calls:  # each imports its own tfsac, the same probe
        assert path == cwd and command[1:3] == ["-c", baseline.PROBE]
        assert json.loads(command[3]) == fields
    rounds = [json.loads(line) for line in lines]
    assert [r["ratio"] for r in rounds[:3]] == [1.1, 1.1, 1.1] and median == pytest.approx(1.1)
    assert rounds[0]["baseline_env_steps_per_s"] == 100.0 and rounds[0]["env_steps_per_s"] == 110.0
    assert rounds[-1] == {"median_ratio": 1.1, "ratios": [1.1, 1.1, 1.1]}


@pytest.mark.slow
def test_the_probe_times_the_learning_phase_of_a_real_run():
    baseline = _baseline_module()
    fields = baseline.probe_fields(
        dict(total_steps=500, learning_starts=100, hidden_sizes=[8], batch_size=16),
        dict(total_steps=20000, learning_starts=1000, hidden_sizes=[256, 256], batch_size=256),
    )
    command, env = baseline.side_command(REPO_ROOT, fields)
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert 0 < baseline.probe_rate(done.stdout) < 1e5


def test_the_baseline_worktree_holds_the_revision_and_is_removed_afterwards():
    baseline = _baseline_module()
    with baseline.checked_out(REPO_ROOT, "HEAD") as tree:
        assert os.path.isfile(os.path.join(tree, "scripts", "benchmark.py"))
        listed = subprocess.run(
            ["git", "-C", REPO_ROOT, "worktree", "list"], capture_output=True, text=True
        ).stdout
        assert tree in listed
    assert not os.path.exists(os.path.dirname(tree))
    listed = subprocess.run(
        ["git", "-C", REPO_ROOT, "worktree", "list"], capture_output=True, text=True
    ).stdout
    assert tree not in listed
