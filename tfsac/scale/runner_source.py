"""Env runners on Ray as the trainer's collection source; importing this registers them."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from absl import logging

from tfsac.config import SACConfig
from tfsac.data.collector import Transitions
from tfsac.data.envs import EnvFn
from tfsac.data.spaces import EnvSpec
from tfsac.data.update_schedule import UpdateSchedule, crossed
from tfsac.run.signals import StartInterrupted, StopSignals
from tfsac.run.source import CollectionSource, register_env_runners
from tfsac.scale.ray_cluster import check_address, require_ray, start_ray
from tfsac.scale.runners import RunnerPool


class RunnerSource(CollectionSource):
    """Chunks of env steps from `num_actors` runners, paid for in update calls of one fixed
    size (another size would compile again). Starts Ray and the runners when built, so a
    failure stops the run before it writes anything."""

    observation = None  # runners act on their own observations

    def __init__(
        self,
        config: SACConfig,
        env_fn: EnvFn,
        spec: EnvSpec,
        learner,
        schedule: UpdateSchedule,
        actor_fn: Optional[Callable] = None,
        resumes: int = 0,
    ):
        self.config, self.learner = config, learner
        self.updates_per_call = schedule.steps_per_phase(config.train_freq) * (
            config.chunk_steps // config.train_freq
        )
        # A local Ray offers as many CPUs as runners asked for, even beyond the cores.
        cpus = max(os.cpu_count() or 1, config.num_actors)
        self._started_ray, self.pool = False, None
        # Signals wait until Ray is up: an interrupt inside its start-up leaves processes.
        with StopSignals(second_interrupts=True) as held:
            try:
                self._started_ray = start_ray(
                    config.ray_address, **({} if config.ray_address else {"num_cpus": cpus})
                )
                held.take_back()  # from ray.init's SIGTERM handler
                plan = getattr(learner.actor, "numpy_plan", lambda: None)()
                self.pool = RunnerPool(config, env_fn, spec, actor_fn, resumes, plan)
            except BaseException:
                self.close()
                raise
        if held.received is not None:
            self.close()
            raise StartInterrupted(held.received, "the env runners started")
        self.updates = 0
        logging.info(
            f"{config.num_actors} env runner{'s' if config.num_actors > 1 else ''} started "
            f"({config.runner_mode}, {config.envs_per_actor} env copies and "
            f"{config.chunk_steps}-step chunks each)"
        )

    def start(self, loop, updates: int) -> bool:
        self.updates = updates
        self.pool.set_weights(self.learner.actor.get_weights(), updates)
        return False  # new runners start new episodes

    def chunks(self, loop) -> Iterator[Tuple[Transitions, int]]:
        for chunk in self.pool.chunks(loop.step):
            self.pool.record_lag(chunk, self.updates)
            yield chunk.transitions, chunk.steps

    def after_updates(self, updates: int, next_action=None) -> None:
        before, self.updates = self.updates, updates
        if crossed(before, updates, self.config.weight_sync_every):
            self.pool.set_weights(self.learner.actor.get_weights(), updates)

    # after_chunk, snapshot and load_state are CollectionSource's no-ops: the runners reset
    # their own exploration noise and hold no state (a resumed run starts new ones).
    def state(self) -> Dict[str, Any]:
        return {}

    def stats_fields(self) -> List[str]:
        return self.pool.stats_fields()

    def stats(self) -> Dict[str, Optional[float]]:
        return self.pool.stats()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()  # kept, closed, for its statistics
        if self._started_ray:
            import ray

            ray.shutdown()
            self._started_ray = False


def check_ray(config: SACConfig) -> None:
    """What env runners need of Ray, checked at the start: its install and the cluster."""
    require_ray("env runners (num_actors > 0)", config.ray_address)
    check_address(config.ray_address)


register_env_runners(check_ray, RunnerSource)
