"""Start an agent script's process ahead of time: the imports now, the script when told.

``python warm_start.py SCRIPT`` imports what the crash tests' agents import (the SDK and,
for the ChoreographyPlanner, litellm: about four seconds of CPU), prints ``warm``, then
reads one line from stdin: a JSON object of environment variables. It sets them and runs
SCRIPT as ``__main__``, as ``python SCRIPT`` would. A test starts the next life of an
agent this way while the current one works, so a restart after a SIGKILL costs no import.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

import litellm  # noqa: F401  (imported ahead: the point of this launcher)

import soorma.ai  # noqa: F401

script = sys.argv[1]
print("warm", flush=True)
line = sys.stdin.readline()
if not line:  # the test ended without needing this life
    sys.exit(0)
os.environ.update(json.loads(line))
sys.argv = [script]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
