"""Runs scripts/<name>.py as a user's command line does (a process of its own: its exit
code, its stdout and stderr), each forked from a server that has already imported what
every script imports first (`_cli`: absl and tfsac's TF-free start). A run then costs its
own work, not a new interpreter and those imports again.

What the server printed while it imported is handed back, and the caller prepends it to
every run's stderr, so that a line a fresh process would print cannot go unseen."""

import atexit
import json
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import threading
import traceback

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO_ROOT, "scripts")
TIMEOUT_S = 300


class ForkedScripts:
    """One server; `run` is called from one thread at a time."""

    def __init__(self, output_dir):
        self.output_dir = output_dir
        self.runs = 0
        self.server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        started = json.loads(self.server.stdout.readline())
        assert "error" not in started, started["error"]
        self.startup_output, self.tfsac_file = started["output"], started["tfsac"]

    def run(self, name, args, cwd):
        """scripts/<name>.py with `args` in `cwd`: the finished process."""
        self.runs += 1
        out = os.path.join(self.output_dir, f"run{self.runs}")
        request = dict(
            script=os.path.join(SCRIPTS, f"{name}.py"),
            args=list(args),
            cwd=str(cwd),
            stdout=f"{out}.out",
            stderr=f"{out}.err",
        )
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        reply = self.server.stdout.readline()
        assert reply, "the script server died"
        returncode = json.loads(reply)["returncode"]
        with open(request["stdout"]) as f, open(request["stderr"]) as g:
            stdout, stderr = f.read(), self.startup_output + g.read()
        return subprocess.CompletedProcess([name, *args], returncode, stdout, stderr)

    def close(self):
        self.server.stdin.close()
        self.server.wait(timeout=60)


def _serve():
    requests = os.fdopen(os.dup(0), "r")
    replies = os.fdopen(os.dup(1), "w")
    try:
        started = _start()
    except BaseException:
        started = dict(error=traceback.format_exc())
    replies.write(json.dumps(started) + "\n")
    replies.flush()
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            requests.close()
            replies.close()
            _run_as_main(request)
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps(dict(returncode=os.waitstatus_to_exitcode(status))) + "\n")
        replies.flush()


def _start():
    """The common imports, with what they print kept; stdin and stdout go nowhere."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    # A script's folder and the checkout come first on sys.path, as each script puts them.
    sys.path[:1] = [SCRIPTS, REPO_ROOT]
    with tempfile.TemporaryFile() as said:
        os.dup2(said.fileno(), 1)
        os.dup2(said.fileno(), 2)
        import _cli  # noqa: F401 - what every script imports first

        import tfsac

        sys.stdout.flush()
        sys.stderr.flush()
        said.seek(0)
        output = said.read().decode(errors="replace")
    os.dup2(null, 1)
    os.dup2(null, 2)
    # TensorFlow's threads would not survive a fork: scripts import it after their checks.
    assert "tensorflow" not in sys.modules
    # A fork copies only the thread that calls it: there must be no other.
    assert threading.active_count() == 1, threading.enumerate()
    return dict(output=output, tfsac=tfsac.__file__)


def _run_as_main(request):
    """In the forked child: what `python <script> <args>` does, then the interpreter's exit
    (an uncaught exception's traceback, SystemExit's code, atexit, flushed streams)."""
    code = 1
    try:
        signal.alarm(TIMEOUT_S)
        os.chdir(request["cwd"])
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(opened, fd)
            os.close(opened)
        sys.argv = [request["script"], *request["args"]]
        sys.path[0] = os.path.dirname(request["script"])
        try:
            runpy.run_path(request["script"], run_name="__main__")
            code = 0
        except SystemExit as e:
            code = _exit_code(e.code)
        except BaseException:
            traceback.print_exc()
        threading._shutdown()  # the interpreter waits for non-daemon threads, then atexit
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _exit_code(value):
    """The process's exit code for SystemExit(value), as the interpreter sets it."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value & 0xFF
    print(value, file=sys.stderr)
    return 1


if __name__ == "__main__":
    _serve()
