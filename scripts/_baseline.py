"""benchmark.py --baseline=<git revision>: the same training run, alternately from a
temporary worktree of that revision and from this working tree, one process each (each
imports its own tfsac), with the ratio of their env steps/s per round and its median.

Both sides run the same probe (PROBE, this file's): each revision's own benchmark.py may
measure differently (its learning clock, what it pauses for), so the probe times the run
itself: the env steps between two progress rows of the learning phase, by the wall clock
of the `on_log` callback, after the update's compilation and before the final evaluation.
It uses only what every revision has: SACConfig's fields, Trainer(config, export=False,
on_log=...) and the rows' step."""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterator

LOG_EVERY = 100  # env steps between the probe's progress rows
WINDOW_START = 200  # timed from learning_starts + this: the update's compilation is behind it
# One run: argv[1] is a JSON object of SACConfig fields (the benchmark's settings), argv[2]
# where the timing starts after learning_starts.
PROBE = """
import json, os, sys, tempfile, time
import tfsac
fields = json.loads(sys.argv[1])
stamps = []
with tempfile.TemporaryDirectory() as tmp:
    config = tfsac.SACConfig(**fields, run_dir=os.path.join(tmp, "run"))
    trainer = tfsac.Trainer(config, export=False, on_log=lambda row: stamps.append(
        (row["step"], time.perf_counter())))
    trainer.run()
start = config.learning_starts + int(sys.argv[2])
rows = [(s, t) for s, t in stamps if start <= s < config.total_steps]
(s0, t0), (s1, t1) = rows[0], rows[-1]
print(json.dumps({"env_steps_per_s": (s1 - s0) / (t1 - t0)}))
"""


def probe_fields(fields: Dict, defaults: Dict) -> Dict:
    """The benchmark's SACConfig fields that differ from the defaults (an older revision
    may lack a newer option; it is refused only where it is set), with a progress row every
    LOG_EVERY env steps, one short evaluation at the end and nothing written but the run's
    own temporary folder."""
    differing = {k: v for k, v in fields.items() if v != defaults.get(k) and k != "run_dir"}
    quiet = dict(log_every=LOG_EVERY, tensorboard=False, progress_bar=False, checkpoint_every=0)
    return {**differing, **quiet, "eval_every": fields["total_steps"], "eval_episodes": 1}


def side_command(tree: str, fields: Dict):
    """(command, environment) that runs PROBE with `fields` importing `tree`'s tfsac."""
    command = [sys.executable, "-c", PROBE, json.dumps(fields), str(WINDOW_START)]
    return command, dict(os.environ, PYTHONPATH=tree)


def probe_rate(stdout: str) -> float:
    """The env steps/s of the probe's last JSON line."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return float(json.loads(line)["env_steps_per_s"])
    raise ValueError("no measurement in the probe's output")


@contextlib.contextmanager
def checked_out(repo: str, revision: str) -> Iterator[str]:
    """A detached worktree of `revision` in a temporary folder, removed afterwards."""
    parent = tempfile.mkdtemp(prefix="tfsac-baseline-")
    tree = os.path.join(parent, "tree")
    git = ["git", "-C", repo, "worktree"]
    subprocess.run([*git, "add", "--detach", tree, revision], check=True, capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run([*git, "remove", "--force", tree], capture_output=True)
        subprocess.run([*git, "prune"], capture_output=True)
        os.rmdir(parent)


def compare(
    trees: dict,
    fields: Dict,
    rounds: int,
    run: Callable = subprocess.run,
    say: Callable[[str], None] = print,
) -> float:
    """`rounds` rounds of PROBE with `fields` on both sides ({"baseline": tree, "working":
    tree}), the side that goes first alternating (a shared machine drifts); says one JSON
    line per round and one with the median ratio (working over baseline), which it returns."""
    ratios = []
    for i in range(rounds):
        order = ("baseline", "working") if i % 2 == 0 else ("working", "baseline")
        rates = {}
        for side in order:
            command, env = side_command(trees[side], fields)
            proc = run(command, cwd=trees[side], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"the {side} run failed: {proc.stderr[-2000:]}")
            rates[side] = probe_rate(proc.stdout)
        ratios.append(rates["working"] / rates["baseline"])
        say(
            json.dumps(
                {
                    "round": i + 1,
                    "first": order[0],
                    "baseline_env_steps_per_s": round(rates["baseline"], 2),
                    "env_steps_per_s": round(rates["working"], 2),
                    "ratio": round(ratios[-1], 3),
                }
            )
        )
    median = statistics.median(ratios)
    say(json.dumps({"median_ratio": round(median, 3), "ratios": [round(r, 3) for r in ratios]}))
    return median
