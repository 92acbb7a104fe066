"""scripts/benchmark.py end to end (a tiny run: its output, not its speed)."""

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

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


def test_rounds_print_one_json_line_each_and_missing_peers_are_reported(tmp_path):
    proc = _run([*TINY, "--rounds=2", "--peers", f"--peers_dir={tmp_path}"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    ours = [line for line in lines if line.get("lib") == "tfsac"]
    assert len(ours) == 2
    for line in ours:
        assert line["env_steps_per_s"] > 0 and line["updates_per_s"] > 0
        assert line["act_latency_ms"] > 0
        assert (line["steps"], line["learning_starts"], line["batch_size"]) == (240, 100, 16)
    peers = [line for line in lines if line.get("lib") in ("sb3", "sbx")]
    assert len(peers) == 4 and all("not installed" in p["error"] for p in peers)
    assert lines[-1] == {"ratios": {}}
    assert not os.listdir(tmp_path)  # the run directory was temporary


def test_bad_flag_value_is_one_error_line(tmp_path):
    proc = _run([*TINY, "--rounds=0"], tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "rounds" in proc.stderr.strip().splitlines()[-1]
