"""Seconds from the command to the training env's first step, two trees in alternating pairs.

    python measure.py old=<tree>,new=<tree> FSPendulum-v0 4

Each run is `scripts/train.py --env=firststep:<id>` of one tree; firststep.py's wrapper notes
the wall and process CPU time of the training env's first step and ends the process."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
trees = dict(x.split("=") for x in sys.argv[1].split(","))
env, pairs = sys.argv[2], int(sys.argv[3])
res = {k: [] for k in trees}
for i in range(pairs):
    for name, tree in trees.items() if i % 2 == 0 else reversed(list(trees.items())):
        run_dir = tempfile.mkdtemp(prefix="fs-")
        out = os.path.join(run_dir, "t.txt")
        e = dict(os.environ, PYTHONPATH=f"{tree}:{HERE}", FIRSTSTEP_OUT=out)
        t0 = time.time()
        p = subprocess.run(
            [
                sys.executable,
                f"{tree}/scripts/train.py",
                f"--env=firststep:{env}",
                f"--run_dir={run_dir}/r",
                "--total_steps=2000",
            ],
            env=e,
            capture_output=True,
            text=True,
        )
        if not os.path.exists(out):
            print(name, "FAILED", p.stderr[-2000:])
            continue
        wall, cpu = (float(v) for v in open(out).read().split())
        res[name].append((wall - t0, cpu))
        print(f"{name} pair {i}: wall {wall - t0:.2f} s, cpu {cpu:.2f} s", flush=True)
for k, v in res.items():
    if v:
        wall = statistics.median(w for w, _ in v)
        cpu = statistics.median(c for _, c in v)
        print(f"{k} median wall {wall:.2f} s, cpu {cpu:.2f} s, n {len(v)}")
