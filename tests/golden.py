"""Golden references: what a short deterministic training run computes, within rounding.

A restructuring of the learner or the loop that must not change the algorithm proves it with
`tests/test_golden.py`, which trains each configuration of CONFIGS through the public API
(`tfsac.train`) and compares a sketch of each named group of state (networks, optimizers,
temperature, replay rows, evaluation returns) with the sketch recorded in
tests/data/golden_references.json, so that a mismatch names the part that differs.

XLA:CPU compiles for the host CPU (its vector width and instruction set), so another CPU
may round differently; the comparison allows TOLERANCE, measured against such rounding, and
holds on any x86-64 CPU with AVX2 and FMA. A change of the algorithm (a loss, a target,
the order of the updates or of the random draws) moves the numbers by orders of magnitude
more. Record the references again (after a change meant to change the numbers, said in its
commit message) with

    python tests/golden.py --record

and compare without writing anything (in a fresh process) with `python tests/golden.py`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

DATA_FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "golden_references.json"
)

# The run every configuration starts from: 100 warm-up steps, then 60 env steps of training
# (an update after each with the defaults), then one evaluation. A longer run feeds rounding
# back through the policy's actions until it is as large as a changed loss's effect (after
# 300 updates: up to 0.4 of an array's size). The default networks and batch size; most of
# a run's time is the XLA compilation of its update.
BASE_CONFIG = dict(
    env_id="Pendulum-v1",
    deterministic=True,
    seed=0,
    total_steps=160,
    learning_starts=100,
    eval_every=160,  # one evaluation, at the end
    eval_episodes=2,
    tensorboard=False,
    checkpoint_every=0,
    progress_bar=False,
)

CONFIGS = {
    "defaults": {},
    "use_sde": {"use_sde": True},
    "v1": {"variant": "v1"},
    "num_envs_2": {"num_envs": 2},
    "delays": {"policy_delay": 2, "target_update_interval": 2},
    # 2 collection phases of a whole episode, the first of which straddles learning_starts.
    "episodes_per_rollout": {"episodes_per_rollout": 1, "total_steps": 400, "eval_every": 400},
    "tqc": {"algorithm": "tqc"},
    "n_steps_3": {"n_steps": 3},
    # 20 training steps: their normalisation layers feed rounding back faster (XLA without
    # FMA moved SimBa's actor optimizer by 0.1 of its size after 60, by 9e-3 after 20).
    "crossq": {
        "algorithm": "crossq",
        "critic_hidden_sizes": (256, 256),
        "total_steps": 120,
        "eval_every": 120,
    },
    "simba": {"network": "simba", "total_steps": 120, "eval_every": 120},
    "xqc": {
        "algorithm": "xqc",
        "critic_hidden_sizes": (64, 64),
        "total_steps": 120,
        "eval_every": 120,
    },
}


def _groups(result) -> Dict[str, List]:
    """The state of a finished run (a `tfsac.TrainResult`) that is compared, by group name:
    lists of arrays (or variables) in a fixed order.

    This is the one place that knows where the state lives; a restructuring that moves
    it changes only this function (and must keep each group's contents and order)."""
    objects = result.learner.checkpoint_objects()
    evaluations = result.summary["evaluations"]
    groups = {
        "actor": objects["actor"].trainable_variables,
        "critic": objects["critic"].trainable_variables,
        "actor_optimizer": objects["actor_optimizer"].variables,
        "critic_optimizer": objects["critic_optimizer"].variables,
        "alpha_optimizer": objects["alpha_optimizer"].variables,
        "temperature": [objects["log_alpha"], *([objects["alpha"]] if "alpha" in objects else [])],
        # The filled rows in the packed layout (how the buffer stores them is its own).
        "replay": [result.buffer.packed(np.arange(result.buffer.size))],
        # Mean and spread together: the spread of two like episodes is no scale of its own.
        "evaluations": [
            [e["step"] for e in evaluations],
            [[e["return_mean"], e["return_std"]] for e in evaluations],
        ],
    }
    if "target_critic" in objects:  # v2
        groups["target_critic"] = objects["target_critic"].trainable_variables
    if "value" in objects:  # v1
        groups["value"] = objects["value"].trainable_variables
        groups["target_value"] = objects["target_value"].trainable_variables
        groups["value_optimizer"] = objects["value_optimizer"].variables
    if "exploration" in objects:  # gSDE
        groups["gsde_exploration"] = [objects["exploration"]]
    return groups


# An array of up to this many numbers is kept whole; a larger one as its root mean square
# and this many projections on fixed random sign vectors (each moves with the array's
# whole difference, sum(s * d) / sqrt(n), so a change anywhere in it shows).
SKETCH = 4

# The largest difference allowed, relative to the root mean square of the recorded array:
# another CPU's rounding stays well within it, a changed loss goes far beyond it (the
# figures are in tests/test_golden.py).
TOLERANCE = 5e-3
# The smallest scale an array is measured against, as a share of its group's largest.
GROUP_FLOOR = 0.05


def _sketch(value) -> Dict[str, object]:
    """{"rms": the root mean square, "values": the numbers or their SKETCH projections}."""
    x = np.asarray(value.numpy() if hasattr(value, "numpy") else value, np.float64).ravel()
    rms = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
    if x.size > SKETCH:
        x = _signs(x.size) @ x / np.sqrt(x.size)
    return {"rms": rms, "values": [float(v) for v in x]}


def _signs(n: int) -> np.ndarray:
    """SKETCH rows of n signs (+-1), the top bits of SplitMix64's hash of (row, index): the
    same on every machine and numpy version, unlike a numpy Generator's stream."""
    rows = np.arange(1, SKETCH + 1, dtype=np.uint64)[:, None] * np.uint64(0x9E3779B97F4A7C15)
    z = np.arange(n, dtype=np.uint64)[None] + rows
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return 1.0 - 2.0 * (z >> np.uint64(63)).astype(np.float64)


def sketch(config_overrides: Optional[Dict] = None) -> Dict[str, List[Dict]]:
    """Trains BASE_CONFIG plus `config_overrides` (outputs in a temporary folder, nothing
    exported) and returns {group: [the _sketch of each array]}, groups sorted by name."""
    import tfsac

    with tempfile.TemporaryDirectory(prefix="tfsac-golden-") as tmp:
        config = tfsac.SACConfig(
            **{**BASE_CONFIG, "run_dir": os.path.join(tmp, "run"), **(config_overrides or {})}
        )
        result = tfsac.train(config, export=False)
        return {
            name: [_sketch(v) for v in values] for name, values in sorted(_groups(result).items())
        }


def _difference(expected: Dict, actual: Dict, floor: float = 0.0) -> float:
    """The largest difference of two sketches, relative to the recorded root mean square or
    `floor`, whichever is larger (absolute for an array of zeros)."""
    if len(expected["values"]) != len(actual["values"]):
        return math.inf
    pairs = zip(
        [expected["rms"], *expected["values"]], [actual["rms"], *actual["values"]], strict=True
    )
    return max(abs(e - a) for e, a in pairs) / (max(expected["rms"], floor) or 1.0)


def differences(expected: Dict[str, List], actual: Dict[str, List]) -> Dict[str, float]:
    """{group: its largest relative difference} for every recorded group (infinite where
    the run lacks the group or has other arrays in it). An array near zero beside larger
    ones (a bias or batch-norm shift that stays at rounding noise) is measured against
    GROUP_FLOOR of the largest root mean square of its group's arrays: its own would make
    noise a change."""
    out = {}
    for name, sketches in expected.items():
        got = actual.get(name, [])
        # Scalars (an optimizer's step count) left out: they are no array's scale.
        arrays = [s["rms"] for s in sketches if len(s["values"]) > 1]
        floor = GROUP_FLOOR * max(arrays, default=0.0)
        if len(got) != len(sketches):
            out[name] = math.inf
        else:
            out[name] = max(
                (_difference(e, a, floor) for e, a in zip(sketches, got, strict=True)),
                default=0.0,
            )
    return out


def beyond_tolerance(expected: Dict[str, List], actual: Dict[str, List]) -> List[str]:
    """'group (difference)' for each group further from its record than TOLERANCE."""
    return [
        f"{name} ({diff:.1e})"
        for name, diff in sorted(differences(expected, actual).items())
        if not diff <= TOLERANCE
    ]


def load(path: str = DATA_FILE) -> Dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--record", action="store_true", help=f"rewrite {os.path.relpath(DATA_FILE)}"
    )
    parser.add_argument(
        "--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS), metavar="NAME"
    )
    args = parser.parse_args(argv)
    if args.record and set(args.configs) != set(CONFIGS):
        parser.error("--record computes every configuration")
    recorded = load()
    sketches, failed = {}, []
    for name in args.configs:
        t0 = time.perf_counter()
        sketches[name] = sketch(CONFIGS[name])
        line = f"{name}: {time.perf_counter() - t0:.1f}s"
        if not args.record and name not in recorded:
            failed.append(name)
            line += ", not recorded"
        elif not args.record:
            diffs = differences(recorded[name], sketches[name])
            worst = max(diffs, key=diffs.get)
            beyond = beyond_tolerance(recorded[name], sketches[name])
            failed += [name] if beyond else []
            line += f", largest difference {diffs[worst]:.1e} in {worst}"
            line += f": beyond {TOLERANCE:g} in {', '.join(beyond)}" if beyond else ""
        print(line, flush=True)
    if args.record:
        os.makedirs(os.path.dirname(DATA_FILE), exist_ok=True)
        with open(DATA_FILE, "w") as f:
            json.dump(sketches, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"recorded {DATA_FILE}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
