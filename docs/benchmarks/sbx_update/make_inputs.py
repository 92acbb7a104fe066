"""Weights, a batch and the two noise draws that both updates take (numpy only).

python make_inputs.py <out.npz> <seed>
"""

import sys

import numpy as np

rng = np.random.default_rng(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
OBS, ACT, B, H = 17, 6, 256, 256


def lecun(fan_in, shape):
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


w = {}
for name, (i, o) in {"a0": (OBS, H), "a1": (H, H), "mean": (H, ACT), "log_std": (H, ACT)}.items():
    w[f"{name}_k"] = lecun(i, (i, o))
    w[f"{name}_b"] = (0.01 * rng.standard_normal(o)).astype(np.float32)
for name, (i, o) in {"q0": (OBS + ACT, H), "q1": (H, H), "q2": (H, 1)}.items():
    w[f"{name}_k"] = lecun(i, (2, i, o))
    w[f"{name}_b"] = (0.01 * rng.standard_normal((2, o))).astype(np.float32)
    w[f"t{name}_k"] = lecun(i, (2, i, o))  # target critics differ from the online ones
    w[f"t{name}_b"] = (0.01 * rng.standard_normal((2, o))).astype(np.float32)
w["log_alpha"] = np.float32(np.log(0.3))
w["obs"] = rng.standard_normal((B, OBS)).astype(np.float32)
w["next_obs"] = rng.standard_normal((B, OBS)).astype(np.float32)
w["action"] = rng.uniform(-1, 1, (B, ACT)).astype(np.float32)
w["reward"] = rng.standard_normal(B).astype(np.float32)
w["terminated"] = (rng.uniform(size=B) < 0.1).astype(np.float32)
w["eps_next"] = rng.standard_normal((B, ACT)).astype(np.float32)
w["eps_pi"] = rng.standard_normal((B, ACT)).astype(np.float32)
np.savez(sys.argv[1], **w)
