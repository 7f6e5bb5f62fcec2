"""The wrapper the local backend runs each job under: contain, drop, run, record.

The backend copies this file into its private data directory (root's, 0700) and
runs it as ``python -I <data>/runner.py ...``: isolated mode, so neither the
job's working directory, a user site directory nor a ``PYTHON*`` variable reaches
``sys.path``, and it imports nothing but the standard library. Nothing a job's
user controls is ever read with the service's privileges.

It forks the job. The child, still root, joins the job's cgroup (``--cgroup``,
so cancel, preemption and end reach every process it makes, ``setsid`` or not)
and mounts a private ``/proc`` with ``hidepid`` (``--hide-proc``: a job sees
only its own user's processes); then it drops groups, gid and uid, and only
then enters the job's directory and runs the command. The parent stays (root, in
``/``) to copy the job's output into its logs, each capped (``--max-log-bytes``:
the head kept, then a rolling tail, with the cut noted in the file and its size
in ``<log>.cut``), and to write the job's exit code to ``--exit`` when it ends,
so a restarted service can read how a job it did not start ended.

Stop signals go to the runner's process group (the job's main process is in it);
the runner ignores them and stays alive to record the exit.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import os
import selectors
import signal
import sys
import time

__all__ = ["CappedLog", "main"]

#: the most bytes of a log's rolling tail (the rest of the cap keeps its head)
MAX_TAIL_BYTES = 8 << 20
#: how often a cut log's tail is rewritten, s
TAIL_FLUSH_S = 1.0
#: how long output is still copied after the job's main process ended, s
DRAIN_S = 1.0

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 2, 4, 8
_MS_REC, _MS_SLAVE = 0x4000, 0x80000


class CappedLog:
    """A log of at most about ``cap`` bytes: its head, then a note of what was cut,
    then a rolling tail of the newest output."""

    def __init__(self, path: str, cap: int) -> None:
        self.path = path
        self.cut_path = path + ".cut"
        self.cap = cap
        self.tail_limit = min(cap // 2, MAX_TAIL_BYTES)
        self.head_limit = cap - self.tail_limit
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        self.handle = os.fdopen(os.open(path, flags, 0o600), "r+b", buffering=0)
        size = self.handle.seek(0, os.SEEK_END)
        self.cut = 0
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_bytes = 0
        self.dirty = False
        #: past the head: new output goes to the rolling tail
        self.tailing = size > self.head_limit
        if self.tailing:  # an earlier launch's log, already cut: go on with it
            self.cut = self._read_cut()
            self.handle.seek(self.head_limit)
            rest = self.handle.read()
            note_end = rest.find(b"]\n") + 2 if self.cut else 0
            self.cut += self._keep(rest[note_end:] if note_end > 1 else rest)
            self.dirty = True

    def _read_cut(self) -> int:
        try:
            with open(self.cut_path, encoding="utf-8") as handle:
                return int(handle.read().strip() or 0)
        except (OSError, ValueError):
            return 0

    def _keep(self, data: bytes) -> int:
        """Add ``data`` to the tail; the bytes that fell out of it."""
        self.tail.append(data)
        self.tail_bytes += len(data)
        dropped = 0
        while self.tail_bytes > self.tail_limit:
            over = self.tail_bytes - self.tail_limit
            first = self.tail[0]
            if len(first) <= over:
                self.tail.popleft()
                self.tail_bytes -= len(first)
                dropped += len(first)
            else:
                self.tail[0] = first[over:]
                self.tail_bytes -= over
                dropped += over
        return dropped

    def write(self, data: bytes) -> None:
        if not self.tailing:
            room = self.head_limit - self.handle.seek(0, os.SEEK_END)
            if len(data) <= room:
                self.handle.write(data)
                return
            self.handle.write(data[:room])
            data = data[room:]
            self.tailing = True
        self.cut += self._keep(data)
        self.dirty = True

    def flush(self) -> None:
        """Rewrite what follows the head: the note of the cut, then the tail."""
        if not self.dirty:
            return
        self.handle.seek(self.head_limit)
        if self.cut:
            self.handle.write(
                f"\n[ilucid: {self.cut:,} bytes cut here (--max-log-mb): this log keeps its"
                f" first {self.head_limit:,} bytes and its last {self.tail_bytes:,}]\n".encode()
            )
        for chunk in self.tail:
            self.handle.write(chunk)
        self.handle.truncate()
        if self.cut:
            temporary = self.cut_path + ".tmp"
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.write(str(self.cut))
            os.replace(temporary, self.cut_path)
        self.dirty = False

    def close(self) -> None:
        self.flush()
        self.handle.close()


def _private_proc() -> None:
    """A mount namespace of the job's own whose ``/proc`` hides other users' processes
    (their command lines and environments with them); raises OSError where it cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    if libc.unshare(_CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    if libc.mount(None, b"/", None, _MS_REC | _MS_SLAVE, None) != 0:
        raise OSError(ctypes.get_errno(), "mount --make-rslave /")
    flags = _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
    for option in (b"hidepid=invisible", b"hidepid=2"):
        if libc.mount(b"proc", b"/proc", b"proc", flags, option) == 0:
            return
    raise OSError(ctypes.get_errno(), "mount proc -o hidepid")


def _run_child(args: argparse.Namespace, command: list[str], out: int, err: int) -> None:
    """In the forked child: contain, drop privileges, enter the directory, exec. Never
    returns; a failure is told on the job's stderr and ends it with 127."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        stops = (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, *stops):
            signal.signal(sig, signal.SIG_DFL)
        if args.cgroup:
            with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as procs:
                procs.write("0")
        if args.hide_proc:
            try:
                _private_proc()
            except OSError as exc:
                os.write(2, f"ilucid: /proc stays shared for this job: {exc}\n".encode())
        if args.uid is not None:
            groups = [int(g) for g in args.groups.split(",") if g] if args.groups else []
            os.setgroups(groups)
            os.setresgid(args.gid, args.gid, args.gid)
            os.setresuid(args.uid, args.uid, args.uid)
        os.umask(0o022)
        os.chdir(args.cwd)  # as the job's user: a directory it cannot enter fails here
        os.execvpe(command[0], command, os.environ)
    except BaseException as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        where = f" in {args.cwd!r}" if isinstance(exc, OSError) and exc.filename else ""
        with contextlib.suppress(OSError):
            os.write(2, f"ilucid: cannot start {command[0]!r}{where}: {why}\n".encode())
    os._exit(127)


def _copy_output(child: int, logs: dict[int, CappedLog]) -> int:
    """Copy the job's output into its logs until its main process ended (then for at
    most :data:`DRAIN_S` more: a process it left behind may hold the pipe open)."""
    selector = selectors.DefaultSelector()
    for fd in logs:
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ)
    code: int | None = None
    drain_until = 0.0
    next_flush = time.monotonic() + TAIL_FLUSH_S
    while True:
        for key, _ in selector.select(timeout=0.2):
            fd = int(key.fd)
            try:
                data = os.read(fd, 1 << 20)
            except BlockingIOError:
                continue
            if data:
                logs[fd].write(data)
            else:
                selector.unregister(fd)
        now = time.monotonic()
        if now >= next_flush:
            for log in logs.values():
                log.flush()
            next_flush = now + TAIL_FLUSH_S
        if code is None:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                code = os.waitstatus_to_exitcode(status)
                drain_until = now + DRAIN_S
        if code is not None and (not selector.get_map() or now >= drain_until):
            selector.close()
            return code


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: runner.py --exit FILE --stdout FILE --stderr FILE ... -- command")
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="runner.py")
    parser.add_argument("--exit", required=True)
    parser.add_argument("--stdout", required=True)
    parser.add_argument("--stderr", required=True)
    parser.add_argument("--max-log-bytes", type=int, default=100 << 20)
    parser.add_argument("--cwd", default="/")
    parser.add_argument("--uid", type=int)
    parser.add_argument("--gid", type=int)
    parser.add_argument("--groups", default="")
    parser.add_argument("--cgroup")
    parser.add_argument("--hide-proc", action="store_true")
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        raise SystemExit("runner.py: no command")
    if args.uid is not None and (args.uid == 0 or args.gid is None or args.gid == 0):
        raise SystemExit("runner.py: a job never runs as root (uid and gid must be > 0)")
    return args, command


def main(argv: list[str]) -> int:
    args, command = _parse(argv)
    # the job's process group receives stop signals itself; stay alive to record
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(sig, lambda *_: None)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    logs = {
        out_read: CappedLog(args.stdout, args.max_log_bytes),
        err_read: CappedLog(args.stderr, args.max_log_bytes),
    }
    child = os.fork()
    if child == 0:
        _run_child(args, command, out_write, err_write)
    os.close(out_write)
    os.close(err_write)
    code = _copy_output(child, logs)
    for log in logs.values():
        log.close()
    temporary = args.exit + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(str(code))
    os.replace(temporary, args.exit)
    return 0 if code >= 0 else 1


def probe_private_proc() -> bool:
    """Whether a job's private ``/proc`` can be mounted here (tried in a child)."""
    child = os.fork()
    if child == 0:
        try:
            _private_proc()
        except OSError:
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--probe-proc"]:
        sys.exit(0 if probe_private_proc() else 1)
    sys.exit(main(sys.argv[1:]))
