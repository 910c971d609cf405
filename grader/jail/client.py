"""The trusted side of the jail: a worker process per submission, and proxies for its objects.

Learner code runs only in the worker. The grader sends inputs and receives plain values and
tensors rebuilt from raw bytes (wire.py); a learner object that cannot cross stays in the jail and
is referred to by a handle.
"""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.jail import wire

WORKER = Path(__file__).with_name("worker.py")


@dataclass(frozen=True)
class Limits:
    wall_seconds: float = 120.0        # the whole submission
    call_seconds: float = 60.0         # any single call
    memory_mb: int = 4096
    max_output_bytes: int = 1 << 20


class JailError(Exception):
    """The jail could not answer: it died, ran out of time or memory, or broke the protocol."""
    kind = "crash"
    symptom = "exception"


class JailTimeout(JailError):
    kind, symptom = "timeout", "timeout"


class JailMemory(JailError):
    kind, symptom = "memory", "memory-limit"


class JailCrash(JailError):
    kind, symptom = "crash", "exception"


class LearnerError(Exception):
    """The learner's code raised an exception; its type and message came back as data."""

    def __init__(self, info: dict):
        self.type_name = str(info.get("type", "Exception"))
        self.mro = [str(n) for n in info.get("mro", [])]
        self.learner_message = str(info.get("message", ""))
        self.where = info.get("where")
        super().__init__(f"{self.type_name}: {self.learner_message}")

    def is_a(self, type_name: str) -> bool:
        return type_name in self.mro or self.type_name == type_name


class Jail:
    """One worker process holding one submission's modules."""

    def __init__(self, root: Path, limits: Limits):
        self.root = Path(root)
        self.limits = limits
        self._scratch = tempfile.TemporaryDirectory(prefix="grader-out-")
        self.output_path = Path(self._scratch.name) / "output.txt"
        env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "HOME": str(self.root), "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-u", str(WORKER), str(self.root), str(self.output_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, cwd=str(self.root), start_new_session=True)
        self.isolation = "process"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def request(self, op: str, timeout: float, **fields):
        frame = wire.encode({"op": op, **fields})
        try:
            self.proc.stdin.write(frame)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._death() from None
        prefix = self._read(16, timeout)
        header_len, blob_len = wire.decode_lengths(prefix)
        header = self._read(header_len, timeout)
        blob = self._read(blob_len, timeout)
        reply = wire.decode(header, blob)
        if "error" in reply:
            raise LearnerError(reply["error"])
        return reply["ok"]

    def _read(self, n: int, timeout: float) -> bytes:
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        chunks, got = [], 0
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    self.kill()
                    raise JailTimeout(f"no answer within {timeout:.0f} s")
                chunk = os.read(fd, min(n - got, 1 << 20))
                if not chunk:
                    raise self._death()
                chunks.append(chunk)
                got += len(chunk)
        return b"".join(chunks)

    def _death(self) -> JailError:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            return JailCrash("the jail stopped answering")
        if code < 0:
            sig = signal.Signals(-code).name
            if -code in (signal.SIGKILL,):
                return JailMemory(f"the process was killed ({sig}), most likely for using too much memory")
            return JailCrash(f"the process died with signal {sig}")
        return JailCrash(f"the process exited with code {code} while the grader was waiting")

    def output(self) -> str:
        """What the learner's code printed, capped."""
        try:
            with open(self.output_path, "rb") as f:
                return f.read(self.limits.max_output_bytes).decode("utf-8", "replace")
        except OSError:
            return ""

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._scratch.cleanup()
