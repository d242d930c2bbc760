"""The fork server's own process (started by :class:`testsupport.forkserver.ForkServer`).

``python forkserver_process.py SOCKET MODULE...`` imports each MODULE, prints ``ready``,
then forks a child per request on SOCKET and reports each child's wait status on the
request's connection. It ends when the process that started it is gone. A forked child
leaves the loop and becomes the requested program (:func:`_become`).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import io
import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any

# A request: its JSON length, then the JSON (the child's stdio travel as SCM_RIGHTS).
FRAME = struct.Struct("!I")


def _recv_request(conn: socket.socket) -> tuple[dict[str, Any], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 16, 3)
    if len(data) < FRAME.size:
        raise ConnectionError("short request")
    (size,) = FRAME.unpack_from(data)
    body = data[FRAME.size :]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("short request")
        body += chunk
    return json.loads(body), fds


def _serve(path: str) -> tuple[dict[str, Any], list[int]] | None:
    """Accept requests until the process that started the server is gone (checked each
    second); in a forked child, return its request."""
    children: dict[int, socket.socket] = {}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        ready, _, _ = select.select([listener, wake_r], [], [], 1.0)
        if os.getppid() != parent:
            return None
        if wake_r in ready:
            os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(b"%d\n" % status)
                conn.close()
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        try:
            request, fds = _recv_request(conn)
        except (OSError, ValueError):
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            # The child: drop the server's sockets, pipes and signal plumbing.
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for sock in (listener, conn, *children.values()):
                sock.close()
            os.close(wake_r)
            os.close(wake_w)
            return request, fds
        for fd in fds:
            os.close(fd)
        # A caller gone before its answer must not end the server; the child is still
        # reaped when it exits.
        with contextlib.suppress(OSError):
            conn.sendall(b"%d\n" % pid)
        children[pid] = conn


def _stdio(unbuffered: bool) -> None:
    encoding, _, errors = (os.environ.get("PYTHONIOENCODING") or "utf-8").partition(":")
    encoding = encoding or "utf-8"
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)),
        encoding=encoding,
        errors=errors or "strict",
    )

    def writer(fd: int, line: bool, errs: str) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "w", closefd=False)
        buffered: Any = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffered,
            encoding=encoding,
            errors=errs,
            line_buffering=line or os.isatty(fd),
            write_through=unbuffered,
        )

    sys.stdout = sys.__stdout__ = writer(1, False, errors or "strict")
    sys.stderr = sys.__stderr__ = writer(2, True, "backslashreplace")


def _become(request: dict[str, Any], fds: list[int], base_path: list[str]) -> None:
    """Turn this forked child into the requested program (returns when it ends)."""
    if request["new_session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
    _stdio(unbuffered)
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    import runpy

    if "script" in request:
        script = request["script"]
        sys.path[:] = [os.path.dirname(os.path.realpath(script)), *extra, *base_path]
        sys.argv = [script, *request["args"]]
        runpy.run_path(script, run_name="__main__")
    elif "module" in request:
        sys.path[:] = [os.getcwd(), *extra, *base_path]
        sys.argv = [request["module"], *request["args"]]
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    else:
        sys.path[:] = ["", *extra, *base_path]
        sys.argv = ["-c", *request["args"]]
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        exec(compile(request["code"], "<string>", "exec"), namespace)


def load(modules: list[str]) -> None:
    """Import ``modules``; one named after "?" is left out where it does not exist."""
    for module in modules:
        try:
            importlib.import_module(module.removeprefix("?"))
        except ModuleNotFoundError:
            if not module.startswith("?"):
                raise


def _main() -> None:
    path, preload = sys.argv[1], sys.argv[2:]
    own = {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path[1:] if p not in own]
    # The imported heap is shared with every child until one writes to it. A collection
    # in a child writes to every object it walks, so each child would copy the whole
    # preloaded heap at its first full collection, and walk it at each one after: no
    # collection while importing (no holes in the pages), then everything frozen, out of
    # the server's and the children's collections.
    gc.disable()
    load(preload)
    gc.freeze()
    gc.enable()
    child = _serve(path)
    if child is not None:
        _become(*child, base_path)


if __name__ == "__main__":
    _main()
