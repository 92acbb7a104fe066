"""Envs that record when training first steps them, then end the process.

Each instance notes its first step's wall time and process CPU time; the first instance
to reach 5 steps (the training env, not a one-step probe) writes its figures and exits."""

import os
import time

import gymnasium as gym

OUT = os.environ.get("FIRSTSTEP_OUT", "/tmp/firststep.txt")


class FirstStep(gym.Wrapper):
    def __init__(self, env):
        super().__init__(env)
        self._n = 0
        self._first = None

    def step(self, action):
        self._n += 1
        if self._n == 1:
            self._first = (time.time(), time.process_time())
        if self._n == 5:
            with open(OUT, "w") as f:
                f.write(f"{self._first[0]} {self._first[1]}\n")
            os._exit(0)
        return self.env.step(action)


def _make(base):
    return lambda **kw: FirstStep(gym.make(base, **kw))


gym.register("FSPendulum-v0", entry_point=_make("Pendulum-v1"), max_episode_steps=200)
gym.register("FSHumanoid-v0", entry_point=_make("Humanoid-v5"), max_episode_steps=1000)
