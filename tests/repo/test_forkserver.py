"""The fork server starts a program as ``python ...`` would: argv, environment, working
directory, standard streams, exit code; a SIGKILL ends it like any process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from testsupport import forkserver
from testsupport.forkserver import ForkedPopen, ForkedProcess

PROGRAM = """\
import os, sys
print("argv", sys.argv[1:], flush=True)
print("env", os.environ.get("FORK_TEST"), "cwd", os.getcwd(), flush=True)
print("path0", sys.path[0], "extra", os.environ.get("PYTHONPATH", "") in sys.path, flush=True)
print("to stderr", file=sys.stderr, flush=True)
if sys.argv[1:] == ["wait"]:
    print("waiting", flush=True)
    sys.stdin.readline()
sys.exit(int(os.environ.get("FORK_EXIT", "0")))
"""


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog" / "program.py"
    path.parent.mkdir()
    path.write_text(PROGRAM)
    return path


@pytest.mark.asyncio
async def test_a_script_gets_its_argv_env_cwd_and_streams_and_exit_code(
    program: Path, tmp_path: Path
) -> None:
    extra = str(tmp_path / "extra")
    env = {**os.environ, "FORK_TEST": "yes", "FORK_EXIT": "7", "PYTHONPATH": extra}
    proc = await ForkedProcess.start(sys.executable, str(program), "a", "b", env=env, cwd="/")
    assert proc.stdout is not None
    out = (await proc.stdout.read()).decode()
    assert await proc.wait() == 7
    assert "argv ['a', 'b']" in out
    assert "env yes cwd /" in out
    assert f"path0 {program.parent} extra True" in out
    assert "to stderr" in out  # merged into stdout, as the tests' Proc does
    assert proc.pid != os.getpid()


@pytest.mark.asyncio
async def test_a_module_and_code_and_a_console_script_run(tmp_path: Path) -> None:
    code = await ForkedProcess.start(
        sys.executable, "-u", "-c", "import sys; print('code', sys.argv)", "x", env=None
    )
    assert code.stdout is not None
    assert "code ['-c', 'x']" in (await code.stdout.read()).decode()
    assert await code.wait() == 0
    module = await ForkedProcess.start(sys.executable, "-m", "json.tool", "--help", env=None)
    assert module.stdout is not None
    assert "usage" in (await module.stdout.read()).decode()
    assert await module.wait() == 0
    soorma = str(Path(sys.executable).with_name("soorma"))
    cli = await ForkedProcess.start(soorma, "--help", env=None)
    assert cli.stdout is not None
    assert "soorma" in (await cli.stdout.read()).decode()
    assert await cli.wait() == 0


@pytest.mark.asyncio
async def test_sigkill_ends_the_child_and_stdin_reaches_it(program: Path) -> None:
    proc = await ForkedProcess.start(sys.executable, str(program), "wait", env=None, stdin=True)
    assert proc.stdout is not None
    while b"waiting" not in await proc.stdout.readline():
        pass
    proc.kill()
    assert await proc.wait() == -signal.SIGKILL
    again = await ForkedProcess.start(sys.executable, str(program), "wait", env=None, stdin=True)
    assert again.stdin is not None and again.stdout is not None
    again.stdin.write(b"go\n")
    await again.stdin.drain()
    assert await asyncio.wait_for(again.wait(), 30) == 0


def test_the_threaded_form_polls_waits_and_kills(program: Path) -> None:
    proc = ForkedPopen(
        [sys.executable, str(program), "wait"], env=None, cwd=None, stdout=None, stderr=2
    )
    assert proc.stdout is not None
    while "waiting" not in proc.stdout.readline():
        pass
    assert proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    assert proc.poll() == -signal.SIGKILL
    proc.stdout.close()


def test_a_caller_gone_before_its_answer_leaves_the_server_serving(tmp_path: Path) -> None:
    import json
    import socket

    from testsupport.forkserver_process import FRAME

    fork = forkserver.server()
    request = forkserver.parse([sys.executable, "-c", "pass"])
    assert request is not None
    data = json.dumps(
        {**request, "env": dict(os.environ), "cwd": "/", "new_session": False}
    ).encode()
    fork._ensure()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.connect(fork.path)
        socket.send_fds(gone, [FRAME.pack(len(data)) + data], [0, 1, 2])
    # The server wrote the pid to a closed connection; it still forks the next program.
    proc = ForkedPopen(
        [sys.executable, "-c", "print('still here')"], env=None, cwd=None, stdout=None, stderr=2
    )
    assert proc.stdout is not None
    assert proc.stdout.read().strip() == "still here"
    assert proc.wait(30) == 0
    proc.stdout.close()


def test_what_cannot_be_forked_is_said() -> None:
    env = dict(os.environ)
    assert forkserver.supported([sys.executable, "x.py"], env)
    assert not forkserver.supported([sys.executable, "-X", "importtime", "x.py"], env)
    assert not forkserver.supported(["/bin/echo", "x"], env)
    assert not forkserver.supported([sys.executable, "x.py"], {**env, "PYTHONHASHSEED": "1"})
    with pytest.raises(ValueError, match="not a Python program"):
        forkserver.server().spawn(["/bin/echo"], env=None, cwd=None, fds=(0, 1, 2))


@pytest.mark.asyncio
async def test_a_child_leaves_the_preloaded_heap_out_of_its_collections() -> None:
    # Frozen in the server, the imported modules' objects are neither walked nor written
    # by a child's collections, so children keep sharing those pages (docs/testing.md).
    code = (
        "import gc, sys; gc.collect(); "
        "print('frozen', gc.get_freeze_count(), 'enabled', gc.isenabled(), "
        "'soorma' in sys.modules)"
    )
    proc = await ForkedProcess.start(sys.executable, "-u", "-c", code, env=None)
    assert proc.stdout is not None
    out = (await proc.stdout.read()).decode()
    assert await proc.wait() == 0
    frozen = int(out.split()[1])
    assert frozen > 100_000, out  # the SDK and its libraries: ~200,000 objects
    assert "enabled True True" in out, out


def test_run_captures_what_the_program_writes_and_its_exit_code(program: Path) -> None:
    env = {**os.environ, "FORK_TEST": "ran", "FORK_EXIT": "3"}
    done = forkserver.run([sys.executable, str(program), "a"], env=env, timeout=30)
    assert done.returncode == 3
    assert "argv ['a']" in done.stdout and "env ran" in done.stdout
    assert done.stderr.strip() == "to stderr"


def test_run_kills_a_program_past_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run([sys.executable, "-c", code], timeout=2)
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_file.read_text()), 0)


def test_an_optional_preload_is_left_out_where_it_does_not_exist() -> None:
    from testsupport.forkserver_process import load

    load(["json", "?soorma_no_such_module"])
    with pytest.raises(ModuleNotFoundError):
        load(["soorma_no_such_module"])
