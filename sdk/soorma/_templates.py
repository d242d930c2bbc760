"""Skeletons written by ``soorma init NAME --type tool|worker|planner``."""

from __future__ import annotations

import re
from pathlib import Path

AGENT_TYPES = ("tool", "worker", "planner")
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,62}$")

_TOOL = '''"""{name}: a Soorma tool (request/response).

Run the platform with `soorma dev`, then `python agent.py`, then try it:

    soorma call {prefix}.requested --data '{{"text": "hello"}}'
"""

import logging

from soorma import Tool

tool = Tool(name="{name}", description="Describe what {name} does.")


@tool.on_invoke("{prefix}.requested")
async def handle(request, context):
    """Answer one request; the return value is sent as the caller's response_event."""
    text = request.data.get("text", "")
    return {{"echo": text}}


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    tool.run()
'''

_WORKER = '''"""{name}: a Soorma worker (asynchronous tasks with delegation).

Needs the Worker layer of the SDK (`soorma.agents.Worker`).
Run the platform with `soorma dev`, then `python agent.py`.
"""

import logging

from soorma import Worker

worker = Worker(name="{name}", description="Describe what {name} does.")


@worker.on_task("{prefix}.requested")
async def handle_task(task, context):
    """Start a task: delegate a sub-task, or complete it right away."""
    await task.complete({{"done": True, "input": task.data}})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    worker.run()
'''

_PLANNER = '''"""{name}: a Soorma planner (goals driven by a state machine).

Needs the Planner layer of the SDK (`soorma.agents.Planner`).
Run the platform with `soorma dev`, then `python agent.py`.
"""

import logging

from soorma import Planner

planner = Planner(name="{name}", description="Describe the goals {name} pursues.")


@planner.on_goal("{prefix}.goal")
async def plan_goal(goal, context):
    """Create a plan for the goal and start executing it."""
    await goal.complete({{"accepted": True}})


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    planner.run()
'''

_README = """# {name}

A Soorma {agent_type} created with `soorma init {name} --type {agent_type}`.

```bash
soorma dev                                # in another terminal: the platform on localhost
export SOORMA_URL=http://127.0.0.1:8080   # the address `soorma dev` prints
python agent.py                           # this agent
```

Configuration comes from the environment (`SOORMA_URL`, `SOORMA_API_TOKEN`, ...);
see docs/sdk.md.
"""

_TEMPLATES = {"tool": _TOOL, "worker": _WORKER, "planner": _PLANNER}


def write_skeleton(target: Path, *, name: str, agent_type: str, force: bool = False) -> list[Path]:
    """Write an agent folder at ``target``; return the files written.

    Raises:
        ValueError: bad name or type, or ``target`` exists and is not empty.
    """
    if not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"agent name {name!r} must be lowercase letters, digits and '-', starting with a "
            "letter (e.g. 'order-checker')"
        )
    if agent_type not in _TEMPLATES:
        raise ValueError(f"--type must be one of {', '.join(AGENT_TYPES)}")
    if target.exists() and any(target.iterdir()) and not force:
        raise ValueError(f"{target} already exists and is not empty (use --force to overwrite)")
    target.mkdir(parents=True, exist_ok=True)
    prefix = name.replace("-", "_")
    files = {
        target / "agent.py": _TEMPLATES[agent_type].format(name=name, prefix=prefix),
        target / "README.md": _README.format(name=name, agent_type=agent_type),
    }
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)
