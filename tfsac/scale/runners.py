"""Distributed collection on Ray: `EnvRunner` actors step env copies with a copy of the actor
(numpy, or TF for one without a numpy plan); the learner's `RunnerPool` hands them chunks."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import time
from typing import Callable, Dict, Iterator, List, Optional

import numpy as np
from absl import logging

from tfsac.config import SACConfig
from tfsac.data.collector import Collector, Transitions
from tfsac.data.envs import EnvFn
from tfsac.data.spaces import EnvSpec
from tfsac.errors import Fault, TfsacError, first_line
from tfsac.logs import quiet_library_logs
from tfsac.scale.numpy_actor import NumpyActor
from tfsac.scale.ray_cluster import check_free_cpus

# Restarts of one runner's process before the run gives up on it.
MAX_RESTARTS = 5


class RunnerEnvError(Fault):
    """A runner's env raised mid-run: the run stops with this line."""


@dataclasses.dataclass
class Chunk:
    """Consecutive env steps of one runner, rows step-major as the replay buffer stores them."""

    runner: int
    steps: int
    transitions: Transitions
    policy_version: int  # the learner's update count when the weights it acted with were sent
    collect_s: float  # seconds the runner spent collecting it
    pid: int  # the runner's process (a new one after a restart)


def runner_seeds(seed: int, runner: int, resumes: int) -> List[int]:
    """Seeds of a runner's warm-up actions, env resets and sampling, per (seed, runner, session)."""
    sequence = np.random.SeedSequence([seed, runner, resumes])
    return [int(s) for s in sequence.generate_state(3) % (2**31 - 1)]


class TFPolicy:
    """The policy of an actor without a `numpy_plan`: its Keras model and exploration, compiled."""

    def __init__(self, spec: EnvSpec, cfg: SACConfig, actor_fn: Optional[Callable], seed: int):
        import tensorflow as tf

        from tfsac.algorithm.exploration import GaussianExploration
        from tfsac.algorithm.networks import build_actor

        # Batch-1 acting: more threads only contend with the other runners.
        with contextlib.suppress(RuntimeError):  # TF already initialised in this worker
            tf.config.threading.set_intra_op_parallelism_threads(1)
            tf.config.threading.set_inter_op_parallelism_threads(1)
        self.actor = build_actor(spec.obs_dim, spec.action_dim, cfg, actor_fn)
        self.actor(tf.zeros([1, spec.obs_dim]))  # builds the variables set_weights fills
        rng = tf.random.Generator.from_seed(seed)
        noise_shape = (cfg.envs_per_actor, spec.action_dim)
        exploration = GaussianExploration(self.actor, cfg, rng, noise_shape)
        obs = tf.TensorSpec([None, spec.obs_dim], tf.float32)
        self._sample = tf.function(
            exploration.sample, input_signature=[obs], jit_compile=cfg.jit_compile
        ).get_concrete_function()

    def set_weights(self, weights: List[np.ndarray]) -> None:
        self.actor.set_weights(weights)

    def sample(self, observation: np.ndarray) -> np.ndarray:
        return self._sample(observation).numpy()


def runner_policy(
    spec: EnvSpec, cfg: SACConfig, actor_fn: Optional[Callable], seed: int, plan=None
):
    """The actor in numpy where its model gave its `numpy_plan`, else in TensorFlow."""
    if plan is not None:
        return NumpyActor(plan, (cfg.log_std_min, cfg.log_std_max), seed)
    return TFPolicy(spec, cfg, actor_fn, seed)


class EnvRunner:
    """Steps `envs_per_actor` env copies with a copy of the actor (plain Python till ray.remote)."""

    def __init__(
        self,
        index: int,
        env_fn: EnvFn,
        spec: EnvSpec,
        config: Dict,
        actor_fn: Optional[Callable] = None,
        resumes: int = 0,
        plan: Optional[List[str]] = None,
    ):
        # Before the env is made, so its imports' notices do not reach the driver from every runner.
        quiet_library_logs()
        self.index = index
        cfg = SACConfig.from_dict(config)
        action_seed, reset_seed, policy_seed = runner_seeds(cfg.seed, index, resumes)
        # Raised by `ready()`: a constructor's error reaches the caller only as text in Ray's.
        self.error: Optional[TfsacError] = None
        try:
            self.collector = Collector(
                env_fn, spec, cfg.envs_per_actor, "sync", action_seed, cfg.gamma
            )
            self.collector.reset(reset_seed)
        except Exception as e:  # noqa: BLE001 - any env error becomes one line
            self.error = self._env_error("could not make or reset its env", e)
            return
        self.policy = runner_policy(spec, cfg, actor_fn, policy_seed, plan)
        self.version = -1

    def _env_error(self, what: str, error: Exception) -> RunnerEnvError:
        if isinstance(error, TfsacError):  # already says what failed
            return RunnerEnvError(f"env runner {self.index}: {first_line(error)}")
        return RunnerEnvError(
            f"env runner {self.index} {what}: {type(error).__name__}: {first_line(error)}"
        )

    def ready(self) -> int:
        """The runner's process id, once its env and policy are built."""
        if self.error is not None:
            raise self.error
        return os.getpid()

    def collect(self, weights: List, num_steps: int, warmup_steps: int) -> Chunk:
        """`num_steps` env steps (all copies counted), the first `warmup_steps` uniform random;
        `weights` = [ObjectRef of the actor's weights, version], fetched when the version is new."""
        import ray

        ref, version = weights
        if version != self.version:
            self.policy.set_weights(ray.get(ref))
            self.version = version
        t0 = time.perf_counter()
        steps = []
        for k in range(0, num_steps, self.collector.num_envs):
            action = None if k < warmup_steps else self.policy.sample(self.collector.observation)
            try:
                steps.append(self.collector.step(action))
            except Exception as e:  # noqa: BLE001 - any env error becomes one line
                raise self._env_error("stopped: its env raised", e) from None
        return Chunk(
            runner=self.index,
            steps=num_steps,
            transitions=_concatenate(steps),
            policy_version=self.version,
            collect_s=time.perf_counter() - t0,
            pid=os.getpid(),
        )


def _concatenate(steps: List[Transitions]) -> Transitions:
    arrays = [np.concatenate(field) for field in zip(*(t.as_tuple() for t in steps), strict=True)]
    episodes = [e for t in steps for e in t.finished_episodes]
    discounted = np.concatenate([t.discounted_return for t in steps])
    known = all(t.ended is not None for t in steps)
    ended = np.concatenate([t.ended for t in steps]) if known else None
    return Transitions(
        *arrays, finished_episodes=episodes, discounted_return=discounted, ended=ended
    )


def _actor_failure(error: Exception, what: str, runner: Optional[int]) -> str:
    """One line for a runner Ray gave up on: the error its creation raised (found in Ray's
    coloured traceback), or its deaths."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    if "creation task" in text:  # its constructor, or unpickling env_fn, raised
        # The traceback's last "<type>: <message>" line (dotted: gymnasium.error.X).
        raised = re.findall(r"^([A-Za-z_][\w.]*): (.+)$", text, re.MULTILINE)
        cause = ": ".join(raised[-1]) if raised else first_line(text)
        hint = ""
        if cause.startswith("ModuleNotFoundError"):
            hint = (
                " (Ray's workers import env_fn's module by name: install it, or start from "
                "its folder, or put that folder on PYTHONPATH)"
            )
        return f"an env runner could not start: {cause}{hint}"
    who = "an env runner" if runner is None else f"env runner {runner}"
    return (
        f"{who} could not {what}: its process died more than {MAX_RESTARTS} times "
        f"({first_line(text)}); "
        "the run stops here: --resume continues it from its last checkpoint"
    )


class RunnerPool:
    """`num_actors` EnvRunners on Ray and the chunks they owe."""

    def __init__(
        self,
        config: SACConfig,
        env_fn: EnvFn,
        spec: EnvSpec,
        actor_fn: Optional[Callable] = None,
        resumes: int = 0,
        plan: Optional[List[str]] = None,
    ):
        """`plan`: the actor model's `numpy_plan()` (None: the runners act with TF)."""
        import ray

        self.config = config
        self.num_runners = config.num_actors
        check_free_cpus(self.num_runners)
        if plan is None:
            logging.info(
                "env runners act with TensorFlow: the actor has no numpy_plan (a custom "
                "actor_fn's, network's or call's)"
            )
        remote = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=-1)
        runner_class = remote(EnvRunner)
        self.runners = [
            runner_class.remote(i, env_fn, spec, config.to_dict(), actor_fn, resumes, plan)
            for i in range(self.num_runners)
        ]
        self._pending: Dict = {}  # ObjectRef -> runner
        try:
            self.pids = self._get([r.ready.remote() for r in self.runners], "start")
        except BaseException:
            self.close()  # the runners that did start
            raise
        self.restarts = 0
        self.weights: Optional[List] = None
        self._assigned = 0
        self._reset_stats()

    # ------------------------------------------------------------------ plumbing
    def _get(self, refs, what: str, runner: Optional[int] = None):
        """ray.get, with a runner's failure as one Fault line."""
        import ray

        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None)
            if isinstance(cause, TfsacError):
                raise Fault(str(cause)) from None
            raise Fault(f"an env runner failed to {what}: {first_line(cause or e)}") from None
        except ray.exceptions.RayActorError as e:
            raise Fault(_actor_failure(e, what, runner)) from None

    def set_weights(self, weights: List[np.ndarray], version: int) -> None:
        import ray

        # In a list, so that Ray passes the reference itself and a runner fetches the
        # weights only when their version is new to it.
        self.weights = [ray.put(weights), version]

    def _submit(self, runner: int):
        """Hands `runner` the next chunk of the budget; its ObjectRef, None once all is out."""
        cfg = self.config
        steps = min(cfg.chunk_steps, cfg.total_steps - self._assigned)
        if steps <= 0:
            return None
        warmup = min(steps, max(0, cfg.learning_starts - self._assigned))
        warmup = -(-warmup // cfg.envs_per_actor) * cfg.envs_per_actor  # whole vector steps
        ref = self.runners[runner].collect.remote(self.weights, steps, warmup)
        self._pending[ref] = runner
        self._assigned += steps
        return ref

    def _take(self, ref) -> Chunk:
        runner = self._pending.pop(ref)
        chunk = self._get(ref, "collect", runner)
        if chunk.pid != self.pids[runner]:
            self.restarts += 1
            logging.warning(
                f"env runner {runner} was restarted (process {self.pids[runner]} ended); its "
                "chunk was collected again"
            )
            self.pids[runner] = chunk.pid
        self._steps[runner] += chunk.steps
        self._seconds[runner] += chunk.collect_s
        return chunk

    # -------------------------------------------------------------------- chunks
    def chunks(self, step: int) -> Iterator[Chunk]:
        """Chunks of the env steps from `step` to `total_steps` (sync: a round of one chunk
        per runner, in runner order; async: as the runners finish them)."""
        import ray

        self._assigned = step
        if self.config.runner_mode == "sync":
            while self._assigned < self.config.total_steps:
                refs = [self._submit(runner) for runner in range(self.num_runners)]
                yield from (self._take(ref) for ref in refs if ref is not None)
            return
        for runner in range(self.num_runners):
            self._submit(runner)
        while self._pending:
            (ref,), _ = ray.wait(list(self._pending), num_returns=1)
            chunk = self._take(ref)
            self._submit(chunk.runner)  # before the learner trains on this one
            yield chunk

    # --------------------------------------------------------------------- stats
    def _reset_stats(self) -> None:
        self._steps = [0] * self.num_runners
        self._seconds = [0.0] * self.num_runners
        self._lags: List[int] = []

    def record_lag(self, chunk: Chunk, updates: int) -> None:
        """Notes how many updates the chunk's policy trailed the learner by."""
        self._lags.append(updates - chunk.policy_version)

    def stats_fields(self) -> List[str]:
        runners = [f"runner{i}_env_steps_per_s" for i in range(self.num_runners)]
        return ["policy_lag", "policy_lag_max", *runners]

    def stats(self) -> Dict[str, Optional[float]]:
        """Since the last call: the mean and largest policy lag (updates) of the chunks taken,
        and each runner's env steps per second of collection."""
        lags = self._lags
        record = {
            "policy_lag": float(np.mean(lags)) if lags else None,
            "policy_lag_max": float(max(lags)) if lags else None,
        }
        for i, (steps, seconds) in enumerate(zip(self._steps, self._seconds, strict=True)):
            record[f"runner{i}_env_steps_per_s"] = steps / seconds if seconds else None
        self._reset_stats()
        return record

    def close(self) -> None:
        import ray

        for runner in self.runners:
            ray.kill(runner, no_restart=True)
        self.runners, self._pending = [], {}
