"""``run_client``: a client script's entry point, quiet about what a user can fix."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TextIO

from soorma_common.errors import SoormaError

# The shell's code for a process stopped by SIGINT.
INTERRUPTED = 130


def run_client(main: Coroutine[Any, Any, int | None], *, err: TextIO | None = None) -> int:
    """Run a client's ``main()`` and return its exit code.

    Expected failures (the platform unreachable, no answer, a payload its schema
    refuses: a :class:`~soorma.SoormaError` or a ``TimeoutError``) are printed in one
    line, and Ctrl-C ends it without a traceback. Anything else is a bug and keeps
    its traceback. Use as ``raise SystemExit(run_client(main()))``.
    """
    out = err or sys.stderr
    try:
        return asyncio.run(main) or 0
    except KeyboardInterrupt:
        print("interrupted", file=out)
        return INTERRUPTED
    except (SoormaError, TimeoutError) as exc:
        print(f"error: {exc}", file=out)
        return 1


__all__ = ["run_client"]
