# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""Running external commands for probes: argument lists, LANG=C, a timeout, always.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import os
import shutil
import signal
import subprocess
import threading


class ProbeError(Exception):
    """A probe could not read what it reads; its checks become ERROR with this reason."""


class ProbeAbsent(Exception):
    """What a probe reads does not exist on this host; its checks become SKIP with this reason."""


def find_binary(name, override=None):
    """Absolute path of a binary, from an explicit override or PATH; None when absent."""
    if override:
        return override if os.access(override, os.X_OK) else None
    return shutil.which(name)


def run(argv, timeout, env=None, input_text=None):
    """Run argv and return (rc, stdout, stderr) as text.

    Raises ProbeError on timeout or when the binary cannot be executed, naming
    the command: a probe never hangs and never passes silently.
    """
    # LANG=C: output is parsed, so it must not be translated or localised.
    child_env = dict(os.environ, LANG="C", LC_ALL="C")
    child_env.update(env or {})
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env,
            start_new_session=True,  # so a timeout kills the whole process group
        )
    except FileNotFoundError:
        raise ProbeAbsent("%s: not found" % argv[0])
    except PermissionError:
        raise ProbeError("%s: permission denied" % argv[0])
    except OSError as exc:
        raise ProbeError("%s: cannot execute (%s)" % (argv[0], exc))
    try:
        stdout, stderr = proc.communicate(input=input_text.encode() if input_text is not None else None, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise ProbeError("%s timed out after %ss" % (" ".join(argv), _fmt_seconds(timeout)))
    return proc.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")


def call_with_timeout(call, timeout, what):
    """Run an in-process call with a deadline: NVML on a hung GPU, or statvfs on a hung network mount, can block forever.

    The call runs in a daemon thread; past the deadline ProbeError names it, and the stuck thread cannot keep the
    module alive.
    """
    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except Exception as exc:  # pylint: disable=broad-exception-caught
            outcome["error"] = exc

    worker = threading.Thread(target=target, name="hydra-%s" % what)
    worker.daemon = True
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise ProbeError("%s timed out after %ss" % (what, _fmt_seconds(timeout)))
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def _fmt_seconds(value):
    return ("%g" % value) if isinstance(value, float) else str(value)


def read_text(path):
    """Read a small /proc or /sys file; ProbeAbsent when missing, ProbeError when unreadable."""
    try:
        with open(path) as handle:
            return handle.read()
    except (FileNotFoundError, NotADirectoryError):
        raise ProbeAbsent("%s does not exist" % path)
    except PermissionError:
        raise ProbeError("%s: permission denied" % path)
    except UnicodeDecodeError:
        raise ProbeError("%s: not a text file" % path)
    except OSError as exc:
        raise ProbeError("%s: %s" % (path, exc))
