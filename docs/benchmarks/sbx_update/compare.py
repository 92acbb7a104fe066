"""Compares the arrays of tfsac_update.py and sbx_update.py: the largest difference of each,
against the largest step SBX's update took, and how many kernel entries differ by more
than a tenth of one Adam step (3e-5)."""

import sys

import numpy as np

mine, theirs, start = (dict(np.load(f)) for f in sys.argv[1:4])
print(f"{'array':10s} {'max |tfsac - sbx|':>18s} {'max |sbx step|':>15s} {'off by > 3e-5':>14s}")
for name, value in mine.items():
    diff = np.abs(value - theirs[name])
    step = np.abs(theirs[name] - start[name]) if name in start else np.abs(theirs[name])
    off = f"{int((diff > 3e-5).sum())} / {diff.size}" if name.endswith("_k") else ""
    print(f"{name:10s} {diff.max():18.3e} {step.max():15.3e} {off:>14s}")
