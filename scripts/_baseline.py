"""benchmark.py --baseline=<git revision>: the same benchmark, run alternately from a
temporary worktree of that revision and from this working tree, one process each (each
imports its own tfsac), with the ratio of their env steps/s per round and its median."""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Callable, Iterator, List, Sequence

# Flags that belong to the comparison, not to the benchmark each side runs.
_OWN_FLAGS = ("--baseline", "--rounds")


def forwarded(argv: Sequence[str]) -> List[str]:
    """`argv` (without the program) less --baseline and --rounds, in either form
    (`--flag=value` or `--flag value`)."""
    args, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _OWN_FLAGS:
            skip = True
        elif not arg.startswith(tuple(f"{flag}=" for flag in _OWN_FLAGS)):
            args.append(arg)
    return args


def side_command(tree: str, args: Sequence[str]):
    """(command, environment) that runs `tree`'s scripts/benchmark.py with `args`, one
    round, importing `tree`'s tfsac."""
    script = os.path.join(tree, "scripts", "benchmark.py")
    env = dict(os.environ, PYTHONPATH=tree)
    return [sys.executable, script, *args, "--rounds=1"], env


def tfsac_rate(stdout: str) -> float:
    """The env steps/s of the tfsac line in a benchmark's output."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{") and json.loads(line).get("lib") == "tfsac":
            return float(json.loads(line)["env_steps_per_s"])
    raise ValueError("no tfsac line in the benchmark's output")


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
    args: Sequence[str],
    rounds: int,
    run: Callable = subprocess.run,
    say: Callable[[str], None] = print,
) -> float:
    """`rounds` rounds of both sides ({"baseline": tree, "working": tree}), the side that
    goes first alternating (a shared machine drifts); says one JSON line per round and one
    with the median ratio (working over baseline), which it returns."""
    ratios = []
    for i in range(rounds):
        order = ("baseline", "working") if i % 2 == 0 else ("working", "baseline")
        rates = {}
        for side in order:
            command, env = side_command(trees[side], args)
            proc = run(command, cwd=trees[side], env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"the {side} benchmark failed: {proc.stderr[-2000:]}")
            rates[side] = tfsac_rate(proc.stdout)
        ratios.append(rates["working"] / rates["baseline"])
        say(
            json.dumps(
                {
                    "round": i + 1,
                    "first": order[0],
                    "baseline_env_steps_per_s": rates["baseline"],
                    "env_steps_per_s": rates["working"],
                    "ratio": round(ratios[-1], 3),
                }
            )
        )
    median = statistics.median(ratios)
    say(json.dumps({"median_ratio": round(median, 3), "ratios": [round(r, 3) for r in ratios]}))
    return median
