"""Rendering in a worker process (`python -m tfsac.run.rendering`) that never loads TensorFlow:
Mesa's llvmpipe and TensorFlow each carry an LLVM and crash together. It answers pickled
requests on stdin/stdout and streams its frames to ffmpeg itself."""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import signal
import subprocess
import sys
from typing import Optional

import gymnasium as gym
import numpy as np

from tfsac.data.envs import make_env
from tfsac.errors import Fault

# MuJoCo's 4096x4096 shadow map and 4x multisampling dominate a software renderer's frame;
# a smaller map without them looks nearly the same (docs/performance.md).
SOFTWARE_GL_SHADOW_SIZE = 1024


class RenderedEnv:
    """An env in a worker process that records each episode as an MP4 file."""

    def __init__(self, env_id: str, env_kwargs: Optional[dict] = None):
        env = os.environ.copy()
        if not env.get("DISPLAY"):
            env.setdefault("MUJOCO_GL", "egl")
            if not env.get("WAYLAND_DISPLAY"):
                # Else pygame probes SDL's Wayland driver, which prints XDG_RUNTIME_DIR errors.
                env.setdefault("SDL_VIDEODRIVER", "dummy")
        # Videos have no sound; without a sound card SDL's audio start-up prints ALSA errors.
        env.setdefault("SDL_AUDIODRIVER", "dummy")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tfsac.run.rendering"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.fps, self.max_episode_steps = self._request(("make", env_id, dict(env_kwargs or {})))

    def _request(self, message):
        try:
            pickle.dump(message, self._proc.stdin)
            self._proc.stdin.flush()
            status, payload = pickle.load(self._proc.stdout)
        except (OSError, EOFError, pickle.UnpicklingError):
            raise Fault(
                f"the render worker died (exit status {self._proc.wait()}); rendering needs "
                "a working OpenGL: on a headless machine, EGL (apt-get install libegl1 "
                "libgl1-mesa-dri) with MUJOCO_GL=egl"
            ) from None
        if status == "error":
            raise Fault(f"rendering failed: {payload}")
        return payload

    def reset(self, video_path: str, seed=None):
        """Starts an episode recorded to `video_path`; returns the flat observation."""
        return self._request(("reset", seed, video_path))

    def step(self, action):
        """Returns (flat observation, reward, terminated, truncated)."""
        return self._request(("step", np.asarray(action)))

    def end_video(self) -> int:
        """Finishes the episode's MP4 file; returns the number of frames in it."""
        return self._request(("end",))

    def close(self):
        if self._proc.poll() is None:
            with contextlib.suppress(Fault):
                self._request(("close",))
            self._proc.wait(timeout=30)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _fit_to_software_gl(env: gym.Env) -> None:
    """Cheaper MuJoCo rendering settings where it renders through Mesa's software
    rasterizer; before the first frame, which creates the render context."""
    if "mujoco" not in sys.modules:  # not a MuJoCo env
        return
    import mujoco

    model = getattr(env.unwrapped, "model", None)
    backend = os.environ.get("MUJOCO_GL", "glfw").lower()
    if not isinstance(model, mujoco.MjModel) or backend not in ("egl", "glfw", "osmesa"):
        return
    renderer = b"swrast"  # OSMesa's
    if backend != "osmesa":
        try:
            context = importlib.import_module(f"mujoco.{backend}").GLContext(1, 1)
            try:
                context.make_current()
                from OpenGL import GL

                renderer = (GL.glGetString(GL.GL_RENDERER) or b"").lower()
            finally:
                context.free()
        except Exception:  # the env's own first render reports a broken OpenGL
            return
    if any(name in renderer for name in (b"llvmpipe", b"softpipe", b"swrast")):
        quality = model.vis.quality
        quality.shadowsize = min(quality.shadowsize, SOFTWARE_GL_SHADOW_SIZE)
        quality.offsamples = 0


class _Video:
    """An MP4 file fed frame by frame to ffmpeg (H.264), encoding in its own process."""

    def __init__(self, path: str, fps: float, first_frame: np.ndarray):
        import imageio_ffmpeg

        height, width = first_frame.shape[:2]
        self.path, self.frames = path, 0
        command = [
            imageio_ffmpeg.get_ffmpeg_exe(),
            *"-y -loglevel error -f rawvideo -pix_fmt rgb24".split(),
            *("-s", f"{width}x{height}", "-r", str(fps), "-i", "-"),
            # yuv420p, which players expect, needs even sizes: pad odd ones by a pixel.
            *"-an -vcodec libx264 -vf pad=ceil(iw/2)*2:ceil(ih/2)*2 -pix_fmt yuv420p".split(),
            path,
        ]
        # In a session of its own, out of reach of a terminal's Ctrl-C (see __main__).
        self._ffmpeg = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True
        )
        self.add(first_frame)

    def add(self, frame: np.ndarray) -> None:
        try:
            self._ffmpeg.stdin.write(np.ascontiguousarray(frame, np.uint8).tobytes())
        except BrokenPipeError:
            self._ffmpeg.wait()
            raise OSError(f"ffmpeg stopped writing {self.path}") from None
        self.frames += 1

    def close(self) -> int:
        """Waits for ffmpeg to finish the file; returns the number of frames."""
        try:
            self._ffmpeg.stdin.close()
        except BrokenPipeError:
            pass
        if self._ffmpeg.wait() != 0:
            raise OSError(f"ffmpeg could not write {self.path}")
        return self.frames


class _Worker:
    def __init__(self):
        self.env = self.video = None
        self.fps = 30

    def make(self, env_id: str, kwargs: dict):
        self.env = make_env(env_id, render_mode="rgb_array", env_kwargs=kwargs)
        _fit_to_software_gl(self.env)
        self.fps = self.env.metadata.get("render_fps") or 30
        spec = self.env.spec
        return self.fps, spec.max_episode_steps if spec is not None else None

    def frame(self) -> np.ndarray:
        frame = self.env.render()
        if not isinstance(frame, np.ndarray):
            raise Fault(f"{self.env.spec.id} renders no rgb_array frames")
        return frame

    def reset(self, seed, video_path: str):
        with contextlib.suppress(OSError):  # a video the parent gave up on
            self.end()
        obs, _ = self.env.reset(seed=seed)
        self.video = _Video(video_path, self.fps, self.frame())
        return obs

    def step(self, action):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        return obs, float(reward), bool(terminated), bool(truncated)

    def end(self) -> int:
        video, self.video = self.video, None
        return video.close() if video is not None else 0


def _serve(stdin, stdout) -> None:
    worker = _Worker()
    handlers = {"make": worker.make, "reset": worker.reset, "step": worker.step, "end": worker.end}
    # An error in the work done after the last reply (a step's frame), for the next one.
    failure = None

    def reply(status, payload):
        pickle.dump((status, payload), stdout)
        stdout.flush()

    while True:
        try:
            kind, *args = pickle.load(stdin)
        except EOFError:
            return
        if kind == "close":
            # After an error in the parent: keep what the video has, report nothing more.
            with contextlib.suppress(Exception):
                worker.end()
            if worker.env is not None:
                worker.env.close()
            reply("ok", None)
            return
        try:
            if failure is not None:
                raise failure
            payload = handlers[kind](*args)
        except Exception as e:  # reported to the parent, which raises a Fault
            failure = None
            reply("error", f"{type(e).__name__}: {e}")
            continue
        reply("ok", payload)
        if kind == "step":
            # Rendered after the reply, so that the parent picks the next action meanwhile.
            try:
                worker.video.add(worker.frame())
            except Exception as e:
                failure = e


if __name__ == "__main__":
    # Ctrl-C reaches the whole process group: the parent decides, then closes the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Replies go over a private copy of stdout; whatever an env or library prints, to stderr.
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    # MuJoCo's notices about the envs' own model files, quiet as in the training process.
    from tfsac.logs import quiet_library_logs

    quiet_library_logs()
    _serve(sys.stdin.buffer, replies)
