"""The scripted OpenAI-compatible model of the chaos run, on loopback.

``POST /v1/chat/completions`` answers with the next decision for the plan described in
the prompt: the ``Plan:`` block the ChoreographyPlanner writes (goal data and results so
far) is read back and handed to examples/05's ``scripted_decision`` (fetch, analyze,
report, complete). The same prompt always gets the same answer. Every call is counted per
goal topic (topics are unique per plan in the chaos run).

Like a provider or LLM gateway that honours idempotency keys, a request whose
``Idempotency-Key`` header was seen before gets the stored response of the first one and
is not billed again: ``calls`` counts billed calls (first requests of a key, and requests
without a key), ``requests`` every HTTP request that reached the server.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _scripted_decision() -> Any:
    spec = importlib.util.spec_from_file_location(
        "chaos_offline", ROOT / "examples" / "05-choreography" / "offline.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.scripted_decision


def plan_from_prompt(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``Plan:`` JSON block of the first user message."""
    for message in messages:
        content = message.get("content") or ""
        if message.get("role") == "user" and "Plan:\n" in content:
            block = content.split("Plan:\n", 1)[1].split("\n\n", 1)[0]
            return dict(json.loads(block))
    raise ValueError("no Plan: block in the prompt")


IDEMPOTENCY_HEADER = "Idempotency-Key"


class ScriptedModel:
    """A ThreadingHTTPServer serving the scripted model.

    ``calls`` counts billed calls per topic, ``requests`` raw HTTP requests per topic,
    ``replayed`` the requests answered from a stored response (a repeated key).
    """

    def __init__(self, port: int = 0, log: Path | None = None) -> None:
        self.calls: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.replayed = 0
        # Idempotency key -> the response body sent for it first.
        self.answers: dict[str, bytes] = {}
        self.log = log.open("a") if log is not None else None
        self.errors = 0
        self._lock = threading.Lock()
        decide = _scripted_decision()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                key = self.headers.get(IDEMPOTENCY_HEADER)
                try:
                    plan = plan_from_prompt(body["messages"])
                    goal = plan.get("goal_data") or {}
                    topic = str(goal.get("topic"))
                    with model._lock:
                        model.requests[topic] += 1
                        stored = model.answers.get(key) if key else None
                        replay = stored is not None
                        if stored is not None:
                            model.replayed += 1
                        else:
                            decision = decide(
                                SimpleNamespace(goal_data=goal, results=plan.get("results") or {})
                            )
                            model.calls[topic] += 1
                            stored = self._answer(body, decision)
                            if key:
                                model.answers[key] = stored
                        if model.log is not None:
                            trigger = body["messages"][-1]["content"].split("\n", 1)[0]
                            action = json.loads(
                                json.loads(stored)["choices"][0]["message"]["content"]
                            )["next_action"]
                            model.log.write(
                                f"{topic}\t{len(body['messages'])}\t"
                                f"{trigger}\t{action['action']} "
                                f"{action.get('event_type', '')}\t"
                                f"{'replayed' if replay else 'billed'}\t{key or '-'}\n"
                            )
                            model.log.flush()
                except (ValueError, KeyError) as exc:
                    with model._lock:
                        model.errors += 1
                    self.send_response(400)
                    self.end_headers()
                    self.wfile.write(json.dumps({"error": {"message": str(exc)}}).encode())
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(stored)))
                self.end_headers()
                self.wfile.write(stored)

            def _answer(self, body: dict[str, Any], decision: dict[str, Any]) -> bytes:
                answer = {
                    "id": f"chatcmpl-{time.monotonic_ns()}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": json.dumps(decision)},
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
                return json.dumps(answer).encode()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.api_base = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
