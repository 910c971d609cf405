"""The trusted side of a jail: one forked jail per submission, and the errors it can end with.

Learner code runs only in the jail. The grader sends inputs and receives plain values and tensors
rebuilt from raw bytes (wire.py); a learner object that cannot cross stays in the jail and is
referred to by a handle. Every wait on the jail has a deadline; a jail that misses it is killed
with its whole PID namespace, and the reason it ended becomes an error the grade can report.
"""

from __future__ import annotations

import os
import re
import select
import signal
import tempfile
import time
from pathlib import Path

from grader.errors import (
    JailCrash,
    JailError,
    JailMemory,
    JailSandbox,
    JailTimeout,
    LearnerError,
)
from grader.jail import launcher, sandbox, wire
from grader.limits import JAIL_READY_SECONDS, STACK_FRAMES, STACK_SAMPLE_BYTES, STACK_SAMPLE_SECONDS, Limits
from grader.limits import SUBMISSION_BYTES as MAX_SUBMISSION_BYTES
from grader.locale import Message, message_of, msg

SIGNAL_WORDS = {
    signal.SIGSEGV: msg("a segmentation fault (SIGSEGV)"),
    signal.SIGBUS: msg("a bus error (SIGBUS)"),
    signal.SIGABRT: msg("an abort (SIGABRT)"),
    signal.SIGILL: msg("an illegal instruction (SIGILL)"),
    signal.SIGFPE: msg("an arithmetic fault (SIGFPE)"),
}


def read_submission_files(root: Path) -> dict[str, bytes]:
    files, total = {}, 0
    for p in sorted(Path(root).iterdir()):
        if p.is_file() and not p.is_symlink():
            data = p.read_bytes()
            total += len(data)
            if total > MAX_SUBMISSION_BYTES:
                raise JailSandbox(msg("the submission's files are larger than the jail accepts"))
            files[p.name] = data
    return files


class Jail:
    """One submission's jail: a process forked from the warm zygote, alone in its namespaces."""

    def __init__(
        self,
        root: Path | None,
        limits: Limits,
        output=None,
        zygote=None,
        files=None,
        cpu: int | None = None,
        modules=(),
        names: dict | None = None,
        wait: bool = True,
        timeout: float | None = None,
    ):
        """root: the folder holding the submission's files, or None with `files` given instead.
        cpu: the one CPU the jail runs on once ready (see CpuShare), or None for any.
        modules, names: import these learner modules as the jail starts, and list which of
        `names` ({module: [name]}) each lacks; the results are in `info` once ready.
        wait=False: return once the jail has its files; `wait_ready()` (or the first request)
        waits for it, so the jail's start-up overlaps whatever the grader does meanwhile."""
        self.root = Path(root) if root is not None else None
        self.limits = limits
        self.zygote = zygote or default_zygote()
        self.isolation = self.zygote.isolation
        self.ended: dict | None = None  # how the jail ended, once it has
        self.info: dict | None = None  # the ready reply
        self._own_output = output is None
        self.output_file = output if output is not None else output_file()
        if files is None:
            assert self.root is not None, "a jail given no files reads them from its root"
            files = read_submission_files(self.root)
        # learner files whose frames a stack sample may name (the text itself is the learner's)
        self.learner_files = frozenset(name for name in files if name.endswith(".py"))
        self.id, uid, gid = launcher.next_identity()
        self.uid = uid
        to_jail_r, self._to_jail = os.pipe()
        self._from_jail, from_jail_w = os.pipe()
        self._stack, stack_w = os.pipe()  # the jail's faulthandler writes its stack sample here
        os.set_blocking(self._stack, False)
        try:
            self.zygote.spawn(
                self.id,
                uid,
                gid,
                limits.for_jail(),
                [to_jail_r, from_jail_w, self.output_file.fileno(), stack_w],
                cpu,
            )
        except launcher.ZygoteError as exc:
            for fd in (self._to_jail, self._from_jail, self._stack):
                os.close(fd)
            self._to_jail = self._from_jail = self._stack = -1
            self.ended = {"error": message_of(exc)}
            raise JailSandbox(msg("no jail could be started: {detail}", detail=message_of(exc))) from None
        finally:
            os.close(to_jail_r)
            os.close(from_jail_w)
            os.close(stack_w)
        os.set_blocking(self._to_jail, False)
        self._inbox = bytearray()
        self._poll_in, self._poll_out = select.poll(), select.poll()
        self._poll_in.register(self._from_jail, select.POLLIN)
        self._poll_out.register(self._to_jail, select.POLLOUT)
        self._ready_timeout = timeout if timeout is not None else min(limits.call_seconds, JAIL_READY_SECONDS)
        try:
            setup = {
                "files": {name: bytes(data) for name, data in files.items()},
                "modules": list(modules),
                "names": dict(names or {}),
            }
            self._send(wire.encode(setup), self._ready_timeout)
        except BaseException:
            self.close()
            raise
        if wait:
            self.wait_ready()

    def wait_ready(self, timeout: float | None = None) -> dict:
        """The ready reply: the jail is closed around the learner's code, which has been imported."""
        if self.info is None:
            try:
                if self.ended is not None:
                    raise self._classify(self.ended)
                reply = self._receive(timeout if timeout is not None else self._ready_timeout)
                if "error" in reply:
                    raise JailSandbox(
                        msg(
                            "the jail could not be set up: {detail}",
                            detail=str(reply["error"].get("message", "")),
                        )
                    )
                if not isinstance(reply["ok"], dict):
                    raise JailCrash(
                        msg(
                            "the jail broke the protocol ({detail})",
                            detail=msg("a ready reply that is not a record"),
                        )
                    )
            except BaseException:
                self.close()
                raise
            self.info = reply["ok"]
        return self.info

    @property
    def alive(self) -> bool:
        return self.ended is None

    def drop_if_broken(self) -> bool:
        """Between requests a jail has nothing to say: one that has sent something unasked, or
        closed its end, broke the protocol. It is killed here, before the next check starts, so
        that check runs in a fresh jail rather than failing for what this one did. True if so."""
        if self.ended is not None or self.info is None:
            return False
        if self._inbox or self._poll_in.poll(0):
            self.kill()
            return True
        return False

    # -- requests -------------------------------------------------------------------------------------
    def request(self, op: str, timeout: float, **fields):
        if self.ended is not None:
            raise self._classify(self.ended)
        if self.info is None:
            self.wait_ready(timeout)
        self._send(wire.encode({"op": op, **fields}), timeout)
        reply = self._receive(timeout)
        if "error" in reply:
            error = LearnerError(reply["error"])
            if error.memory:
                self.kill()  # a process that ran out of memory is not trusted with the next check
                text = error.learner_message
                raise JailMemory(
                    msg(
                        "the submission ran out of memory (limit {mb} MiB): {type}: {message}",
                        mb=self.limits.memory_mb,
                        type=error.type_name,
                        message=text if isinstance(text, Message) else text[:500],
                    )
                )
            raise error
        return reply["ok"]

    def _send(self, frame: bytes, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        view = memoryview(frame)
        while view:
            try:
                view = view[os.write(self._to_jail, view) :]
                continue
            except BlockingIOError:
                pass
            except OSError:  # EPIPE: the jail is gone
                raise self._death() from None
            left = deadline - time.monotonic()
            if left <= 0 or not self._poll_out.poll(left * 1000):
                raise self._over_time(
                    msg("the jail did not read its input within {seconds:.0f} s", seconds=timeout)
                )

    def _receive(self, timeout: float) -> dict:
        """The next reply: {"ok": value} or {"error": a learner's exception as a record}.

        Whatever the jail sent is decoded within wire's bounds; a frame or record that breaks the
        protocol kills the jail (the next check gets a fresh one) and is the learner's crash."""
        deadline = time.monotonic() + timeout
        try:
            length = wire.frame_length(self._read(wire.PREFIX_BYTES, deadline, timeout))
            reply = wire.decode(self._read(length, deadline, timeout))
            if not isinstance(reply, dict) or not ({"ok", "error"} & set(reply)):
                raise wire.WireError("a reply that is neither ok nor error")
            if "error" in reply and not is_error_record(reply["error"]):
                raise wire.WireError("a malformed error")
            return reply
        except wire.WireError as exc:
            detail = f"{type(exc).__name__}: {str(exc)[:200]}"
        # raised out here, with no context: the WireError's traceback would keep the frame (up to
        # 64 MiB) alive for as long as the check's result holds this error
        self.kill()
        raise JailCrash(msg("the jail broke the protocol ({detail})", detail=detail))

    def _read(self, n: int, deadline: float, timeout: float) -> bytes | bytearray:
        """n bytes from the jail; what it sent beyond them stays buffered for the next frame.

        A frame longer than what is buffered is read straight into a buffer of its own size:
        however large, it is held once (the grader's peak memory stays near its size)."""
        buf = self._inbox
        while len(buf) < n <= _SMALL_FRAME:  # one read takes a prefix and its body together
            left = deadline - time.monotonic()
            if left <= 0 or not self._poll_in.poll(left * 1000):
                raise self._over_time(msg("no answer within {seconds:.0f} s", seconds=timeout))
            chunk = os.read(self._from_jail, _SMALL_FRAME)
            if not chunk:
                raise self._death()
            buf += chunk
        if len(buf) >= n:
            with memoryview(buf) as view, view[:n] as head:
                data = bytes(head)
            del buf[:n]
            return data
        out = bytearray(n)
        got = len(buf)
        out[:got] = buf
        buf.clear()
        with memoryview(out) as view:
            while got < n:
                left = deadline - time.monotonic()
                if left <= 0 or not self._poll_in.poll(left * 1000):
                    raise self._over_time(msg("no answer within {seconds:.0f} s", seconds=timeout))
                with view[got:] as rest:
                    count = os.readv(self._from_jail, [rest])
                if not count:
                    raise self._death()
                got += count
        return out

    # -- the end of a jail ----------------------------------------------------------------------------
    def _over_time(self, message) -> JailTimeout:
        """A wait ran out: ask the jail where its code is, then kill it (the next check gets a
        fresh one). The error carries the learner's frames of that stack sample."""
        where = self.stack_sample()
        self.kill()
        return JailTimeout(message, where=where)

    def stack_sample(self) -> list[tuple[str, str, int]]:
        """The learner's frames, innermost first, of the stack the jail's faulthandler writes on
        the stack signal (registered before learner code runs, so it answers from inside a
        `while True: pass`). Waits at most STACK_SAMPLE_SECONDS, reads at most
        STACK_SAMPLE_BYTES; [] if the jail does not answer (it may have replaced the handler)."""
        if self.ended is not None or self._stack < 0:
            return []
        send = getattr(self.zygote, "signal", None)  # a stand-in zygote of a test may have none
        if send is None:
            return []
        try:
            send(self.id, STACK_SIGNAL)
        except launcher.ZygoteError:
            return []
        text = bytearray()
        deadline = time.monotonic() + STACK_SAMPLE_SECONDS
        poll = select.poll()
        poll.register(self._stack, select.POLLIN)
        while len(text) < STACK_SAMPLE_BYTES:
            left = deadline - time.monotonic()
            # the dump comes in one burst: once some has come, a short pause ends it
            wait = min(left, 0.02) if text else left
            if wait <= 0 or not poll.poll(wait * 1000):
                break
            try:
                chunk = os.read(self._stack, STACK_SAMPLE_BYTES - len(text))
            except BlockingIOError:
                continue
            if not chunk:
                break
            text += chunk
        root = (self.info or {}).get("root")
        return learner_frames(
            text.decode("utf-8", "replace"),
            self.learner_files,
            root if isinstance(root, str) else None,
        )

    def _death(self) -> JailError:
        """The jail closed its end: find out from the zygote how (exit code, signal, CPU used)."""
        if self.ended is None:
            try:
                self.ended = self.zygote.reap(self.id, grace=2.0) or {"exit": None}
            except launcher.ZygoteError as exc:
                self.ended = {"error": message_of(exc)}
        return self._classify(self.ended)

    def _classify(self, ended: dict) -> JailError:
        cpu_limit = self.limits.for_jail()["cpu_seconds"]
        if "error" in ended:
            return JailSandbox(msg("the jail's zygote failed: {detail}", detail=ended["error"]))
        if ended.get("alive"):
            return JailCrash(msg("the submission closed its connection to the grader and was stopped"))
        sig = ended.get("signal")
        if sig is not None:
            if sig == signal.SIGKILL and ended.get("killed"):
                return JailCrash(msg("the jail was stopped by the grader"))
            if sig == signal.SIGXCPU or (sig == signal.SIGKILL and ended.get("cpu", 0) >= cpu_limit - 1):
                return JailTimeout(
                    msg("the submission used up its {seconds:.0f} s of CPU time", seconds=cpu_limit)
                )
            if sig == signal.SIGKILL:
                return JailMemory(
                    msg(
                        "the process was killed (SIGKILL) by the kernel, most likely for "
                        "using too much memory"
                    )
                )
            if sig == signal.SIGSYS:
                return JailSandbox(
                    msg(
                        "the submission made a system call the jail forbids (such as "
                        "mount, ptrace, unshare or bpf) and was stopped"
                    )
                )
            if sig == signal.SIGXFSZ:
                return JailCrash(
                    msg(
                        "the submission wrote more than {mb} MiB (printed output or a file) and was stopped",
                        mb=self.limits.file_size_mb,
                    )
                )
            words = SIGNAL_WORDS.get(sig) or msg(
                "signal {name}", name=signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
            )
            return JailCrash(msg("the process died with {signal}", signal=words))
        return JailCrash(
            msg(
                "the process exited (code {code}) while the grader was waiting for an "
                "answer: exit(), os._exit() or a fatal error in the submission",
                code=str(ended.get("exit")),
            )
        )

    def output(self):
        """What the learner's code printed, capped: a models.Printed."""
        return read_output(self.output_file, self.limits.output_bytes)

    def kill(self, wait: bool = False) -> None:
        """SIGKILL the jail's PID 1, and with it every process of its PID namespace.

        The kill is done when this returns: no process of the jail runs learner code again. With
        wait=False the zygote reaps them while the grader goes on (`launcher.collect()` waits)."""
        if self.ended is None:
            try:
                self.ended = self.zygote.kill(self.id, wait=wait) or {"signal": signal.SIGKILL}
            except launcher.ZygoteError as exc:
                self.ended = {"error": str(exc)}
            self.ended.setdefault("killed", True)

    def close(self) -> None:
        self.kill()
        for fd in (self._to_jail, self._from_jail, self._stack):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_jail = self._from_jail = self._stack = -1
        if self._own_output:
            self.output_file.close()


STACK_SIGNAL = signal.SIGUSR2  # = worker.STACK_SIGNAL (the jail's side cannot import this module)
# one line of faulthandler's dump: `  File "/submission/data.py", line 12 in make_xy`
_FRAME_LINE = re.compile(
    r'^\s*File "([^"\n]{1,1000})", line (\d{1,9}) in ([A-Za-z_<][A-Za-z0-9_.<>]{0,199})\s*$'
)


def learner_frames(
    dump: str, learner_files, root: str | None = None, limit: int = STACK_FRAMES
) -> list[tuple[str, str, int]]:
    """(function, file, line) of the learner's frames in a faulthandler dump, innermost first.

    The dump is the learner's text (its code could write anything there): only lines of the
    exact frame format are read, only files of the submission (in `root`, when known) kept, at
    most `limit`. Of several threads, the one the signal interrupted ("Current thread") if it
    was in learner code, else the first that was."""
    blocks: list[tuple[bool, list[tuple[str, str, int]]]] = []
    for line in dump.splitlines()[:2000]:
        if line.startswith(("Current thread", "Thread", "Stack")):
            blocks.append((line.startswith("Current thread"), []))
            continue
        found = _FRAME_LINE.match(line)
        if found is None:
            continue
        path, number, function = found.groups()
        folder, _, name = path.rpartition("/")
        if name not in learner_files or (root is not None and folder != root.rstrip("/")):
            continue
        if not blocks:
            blocks.append((False, []))
        frames = blocks[-1][1]
        if len(frames) < limit:
            frames.append((function, name, int(number)))
    with_frames = [b for b in blocks if b[1]]
    for current, frames in with_frames:
        if current:
            return frames
    return with_frames[0][1] if with_frames else []


_SMALL_FRAME = 1 << 16  # frames up to this are read in chunks that may hold the next one's start


def is_error_record(error) -> bool:
    """An error reply as the worker's `describe` makes it: what LearnerError reads is typed."""
    return (
        isinstance(error, dict)
        and isinstance(error.get("type", ""), str)
        and isinstance(error.get("message", ""), str)
        and isinstance(error.get("mro", []), list)
        and all(isinstance(n, str) for n in error.get("mro", []))
        and (error.get("where") is None or isinstance(error.get("where"), str))
    )


class CpuShare:
    """The grader's thread and one jail on one CPU, for as long as the jail lives.

    They take turns: each request wakes the jail while the grader waits, and each reply the other
    way round. Left to itself the scheduler wakes the sleeper on an idle CPU, and waking an idle
    virtual CPU costs about 0.1 ms, every round trip; on a shared CPU it is a context switch.
    Nothing runs in parallel between them, so nothing is lost. Off in a pool of grading workers,
    where the CPUs are busy anyway and pinning could stack two workers on one."""

    enabled = True

    def __init__(self):
        self.cpu: int | None = None
        self._mask: set[int] | None = None
        self._threads = 1

    def take(self) -> int | None:
        if not CpuShare.enabled or self.cpu is not None:
            return self.cpu
        try:
            mask = os.sched_getaffinity(0)
            cpu = sandbox.libc.sched_getcpu()  # -1 on failure: not in the mask
            if len(mask) < 2 or cpu not in mask:
                return None
            os.sched_setaffinity(0, {cpu})  # 0: this thread only
        except OSError:
            return None
        self.cpu, self._mask = cpu, mask
        # torch's helper threads could only compete with this thread and the jail for that CPU
        # (measured: day45 graded in 0.43 s with two threads, 0.15 s with one)
        import torch

        self._threads = torch.get_num_threads()
        if self._threads > 1:
            torch.set_num_threads(1)
        return cpu

    def release(self) -> None:
        if self._mask is not None:
            try:
                os.sched_setaffinity(0, self._mask)
            except OSError:
                pass
            if self._threads > 1:
                import torch

                torch.set_num_threads(self._threads)
        self.cpu = self._mask = None


def output_file():
    """An unlinked file for what a jail prints; in memory (/dev/shm) where there is one."""
    shm = "/dev/shm"
    where = shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None
    return tempfile.TemporaryFile(prefix="grader-out-", dir=where)


def default_zygote():
    try:
        return launcher.default_zygote()
    except launcher.ZygoteError as exc:
        raise JailSandbox(msg("no jail could be started: {detail}", detail=message_of(exc))) from None


def read_output(file, cap: int):
    """What the jail printed (stdout and stderr share the file, as they interleaved), within `cap`
    bytes: all of it, or its first and its last `cap // 2` bytes and how many were cut between
    (pieces cut at a character's boundary); nothing from a closed file. The zygote runs Python
    unbuffered (-u), so what the learner's code printed is in the file even when its jail was
    killed or called os._exit."""
    from grader.models import Printed

    if file is None or file.closed:
        return Printed()
    try:
        fd = file.fileno()
        size = os.fstat(fd).st_size
        if size <= cap:
            return Printed(start=os.pread(fd, cap, 0).decode("utf-8", "replace"))
        head = os.pread(fd, cap // 2, 0)
        tail = os.pread(fd, cap - cap // 2, size - (cap - cap // 2))
    except (OSError, ValueError):
        return Printed()
    head, tail = _whole_characters(head), _whole_characters(tail, at_start=True)
    return Printed(
        start=head.decode("utf-8", "replace"),
        end=tail.decode("utf-8", "replace"),
        cut_bytes=size - len(head) - len(tail),
    )


def _whole_characters(data: bytes, at_start: bool = False) -> bytes:
    """`data` without the part of a UTF-8 character cut off at its end (or at its start)."""
    if at_start:
        skip = 0
        while skip < min(3, len(data)) and (data[skip] & 0xC0) == 0x80:
            skip += 1
        return data[skip:]
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: look further back
        need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
        return data[:-back] if need > back else data
    return data
