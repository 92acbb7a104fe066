"""Rendering in a separate process that never loads TensorFlow.

Mesa's software OpenGL (llvmpipe, which MuJoCo's EGL backend uses on machines without a
GPU) and TensorFlow each carry their own LLVM; loaded into one process they crash on the
first frame. So frames come from `python -m tfsac.rendering`, a worker that holds the env
and answers reset/step requests over its stdin/stdout with pickled messages.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from typing import Optional

import gymnasium as gym
import numpy as np

from tfsac.errors import TfsacError


def needs_flattening(space: gym.Space) -> bool:
    """Whether observations must go through gymnasium.spaces.flatten for the networks."""
    return not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1)


class RenderedEnv:
    """An env in a worker process: `reset`/`step` as gymnasium's, plus each `frame`."""

    def __init__(self, env_id: str, env_kwargs: Optional[dict] = None):
        env = os.environ.copy()
        if not env.get("DISPLAY"):
            env.setdefault("MUJOCO_GL", "egl")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tfsac.rendering"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.fps = self._request(("make", env_id, dict(env_kwargs or {})))

    def _request(self, message):
        try:
            pickle.dump(message, self._proc.stdin)
            self._proc.stdin.flush()
            status, payload = pickle.load(self._proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError):
            raise TfsacError(
                f"the render worker died (exit status {self._proc.wait()}); rendering needs "
                "a working OpenGL: on a headless machine, EGL (apt-get install libegl1 "
                "libgl1-mesa-dri) with MUJOCO_GL=egl"
            ) from None
        if status == "error":
            raise TfsacError(f"rendering failed: {payload}")
        return payload

    def reset(self, seed=None):
        """Returns (flat observation, frame)."""
        return self._request(("reset", seed))

    def step(self, action):
        """Returns (flat observation, reward, terminated, truncated, frame)."""
        return self._request(("step", np.asarray(action)))

    def close(self):
        if self._proc.poll() is None:
            try:
                self._request(("close",))
            except TfsacError:
                pass
            self._proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _serve(stdin, stdout) -> None:
    env = None
    while True:
        try:
            message = pickle.load(stdin)
        except EOFError:
            return
        try:
            if message[0] == "make":
                env = gym.make(message[1], render_mode="rgb_array", **message[2])
                if needs_flattening(env.observation_space):
                    env = gym.wrappers.FlattenObservation(env)
                reply = env.metadata.get("render_fps", 30)
            elif message[0] == "reset":
                obs, _ = env.reset(seed=message[1])
                reply = (obs, env.render())
            elif message[0] == "step":
                obs, reward, terminated, truncated, _ = env.step(message[1])
                reply = (obs, reward, terminated, truncated, env.render())
            else:
                if env is not None:
                    env.close()
                pickle.dump(("ok", None), stdout)
                stdout.flush()
                return
            pickle.dump(("ok", reply), stdout)
        except Exception as e:  # reported to the parent, which raises TfsacError
            pickle.dump(("error", f"{type(e).__name__}: {e}"), stdout)
        stdout.flush()


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
