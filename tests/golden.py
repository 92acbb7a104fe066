"""Golden fingerprints: SHA-256 digests of what a short deterministic training run computes.

A restructuring of the learner or the loop that must not change any number proves it with
`tests/test_golden.py`, which trains each configuration of CONFIGS through the public API
(`tfsac.train`) and compares one digest per named group of state (networks, optimizers,
temperature, replay rows, evaluation returns) with the digests recorded in
tests/data/golden_fingerprints.json, so that a mismatch names the part that differs.

XLA:CPU compiles for the host CPU (its vector instructions and tuning), and float results
can differ between CPUs; the recorded digests are therefore keyed by the CPU model and its
vector extension (`cpu_class`), and a machine of an unrecorded class skips the comparison.
Only `amd-epyc-avx512f` is recorded: the TanhNormal's log-density from the standard normal
draw (tfsac/algorithm/distributions.py) moved every number, and the `amd-epyc-avx2` record
went with it (no AVX2 machine was at hand to record it again). Record this machine's class
with

    python tests/golden.py --record

and compare without writing anything (in a fresh process) with `python tests/golden.py`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

DATA_FILE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "data", "golden_fingerprints.json"
)

# The run every configuration starts from, as short as still tells the parts apart: 100
# warm-up steps, then 300 updates (2 collection phases with episodes_per_rollout=1, the
# first of which straddles learning_starts), then one evaluation. The default networks and
# batch size; most of a run's time is the XLA compilation of its update.
BASE_CONFIG = dict(
    env_id="Pendulum-v1",
    deterministic=True,
    seed=0,
    total_steps=400,
    learning_starts=100,
    eval_every=400,  # one evaluation, at the end
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
    "episodes_per_rollout": {"episodes_per_rollout": 1},
    "tqc": {"algorithm": "tqc"},
    "n_steps_3": {"n_steps": 3},
    "crossq": {"algorithm": "crossq", "critic_hidden_sizes": (256, 256)},
    "simba": {"network": "simba"},
}


def cpu_class() -> str:
    """The CPU model and its widest vector extension, e.g. 'amd-epyc-avx2': XLA:CPU
    compiles for the host (instruction set and tuning), so other CPUs may round
    differently."""
    flags, model = set(), platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == platform.machine():
                    model = value.strip()
                elif key.strip() == "flags":
                    flags.update(value.split())
    except OSError:
        pass
    vector = next((v for v in ("avx512f", "avx2") if v in flags), "novec")
    return "-".join(re.findall(r"[a-z0-9]+", f"{model} {vector}".lower()))


def _groups(result) -> Dict[str, List]:
    """The fingerprinted state of a finished run (a `tfsac.TrainResult`), by group name:
    lists of arrays (or variables) in a fixed order, or of strings.

    This is the one place that knows where the state lives; a restructuring that moves
    it changes only this function (and must keep each group's contents and order)."""
    objects = result.learner.checkpoint_objects()
    # The numbers of each evaluation (its record also names its seed, which is derived).
    evaluations = [
        {k: e[k] for k in ("step", "return_mean", "return_std")}
        for e in result.summary["evaluations"]
    ]
    groups = {
        "actor": objects["actor"].trainable_variables,
        "critic": objects["critic"].trainable_variables,
        "actor_optimizer": objects["actor_optimizer"].variables,
        "critic_optimizer": objects["critic_optimizer"].variables,
        "alpha_optimizer": objects["alpha_optimizer"].variables,
        "temperature": [objects["log_alpha"], *([objects["alpha"]] if "alpha" in objects else [])],
        # The filled rows in the packed layout (how the buffer stores them is its own),
        # without the discount column (gamma at one step) the digests predate.
        "replay": [result.buffer.packed(np.arange(result.buffer.size))[..., :-1]],
        "evaluations": [json.dumps(evaluations, sort_keys=True)],
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


def _digest(values) -> str:
    """SHA-256 over each value in order: strings as UTF-8 (with their length), arrays as
    dtype, shape and raw C-order bytes."""
    h = hashlib.sha256()
    for value in values:
        if isinstance(value, str):
            data = value.encode()
            h.update(f"str:{len(data)}:".encode())
            h.update(data)
            continue
        array = np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else value)
        h.update(f"{array.dtype.str}:{array.shape}:".encode())
        h.update(array.tobytes())
    return h.hexdigest()


def fingerprint(config_overrides: Optional[Dict] = None) -> Dict[str, str]:
    """Trains BASE_CONFIG plus `config_overrides` (outputs in a temporary folder, nothing
    exported) and returns {group: SHA-256 hex digest}, groups sorted by name."""
    import tfsac

    with tempfile.TemporaryDirectory(prefix="tfsac-golden-") as tmp:
        config = tfsac.SACConfig(
            **{**BASE_CONFIG, "run_dir": os.path.join(tmp, "run"), **(config_overrides or {})}
        )
        result = tfsac.train(config, export=False)
        return {name: _digest(values) for name, values in sorted(_groups(result).items())}


def differing_groups(expected: Dict[str, str], actual: Dict[str, str]) -> List[str]:
    """Names of the recorded groups whose digests differ (or that the run lacks). A group a
    CPU class's record lacks is not compared: a change that alters one group's numbers
    re-records them on the classes at hand, and drops that group from the others."""
    return sorted(name for name in expected if expected[name] != actual.get(name))


def load(path: str = DATA_FILE) -> Dict:
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--record",
        action="store_true",
        help=f"rewrite this CPU class's entry in {os.path.relpath(DATA_FILE)}",
    )
    parser.add_argument(
        "--configs", nargs="+", choices=sorted(CONFIGS), default=list(CONFIGS), metavar="NAME"
    )
    args = parser.parse_args(argv)
    if args.record and set(args.configs) != set(CONFIGS):
        parser.error("--record computes every configuration")
    cls = cpu_class()
    recorded = load().get(cls)
    if not args.record and recorded is None:
        print(f"no golden fingerprints for CPU class {cls!r} in {DATA_FILE}")
    fingerprints, failed = {}, []
    for name in args.configs:
        t0 = time.perf_counter()
        fingerprints[name] = fingerprint(CONFIGS[name])
        line = f"{name}: {time.perf_counter() - t0:.1f}s"
        if not args.record and recorded is not None:
            diff = differing_groups(recorded.get(name, {}), fingerprints[name])
            failed += [name] if diff else []
            line += f" differs in {', '.join(diff)}" if diff else " matches"
        print(line, flush=True)
    if args.record:
        data = load()
        data[cls] = fingerprints
        os.makedirs(os.path.dirname(DATA_FILE), exist_ok=True)
        with open(DATA_FILE, "w") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"recorded {cls!r} in {DATA_FILE}")
    else:
        print(json.dumps({cls: fingerprints}, indent=2, sort_keys=True))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.exit(main())
