"""Planner-side code: keep the big data in working memory, send only its key.

Stores a vehicle's full record (service history and all) in the plan's working memory,
then asks the parts checker about it with an event that carries just the key.

    python planner.py V-42
"""

from __future__ import annotations

import sys
import uuid

from soorma import PlatformContext, run_client


def vehicle_record(vehicle_id: str) -> dict:
    """A deliberately large record (~100 KB): too much to push through every event."""
    history = [
        {"km": 1_000 * n, "work": "inspection", "notes": f"visit {n}: all checks passed " * 3}
        for n in range(600)
    ]
    return {
        "vehicle_id": vehicle_id,
        "model": "Transit 350",
        "required_parts": ["brake_pads", "oil_filter", "wiper_blades"],
        "service_history": history,
    }


async def main(vehicle_id: str) -> int:
    plan_id = f"maintenance-{uuid.uuid4()}"
    key = f"plan:{plan_id}:vehicle"
    async with PlatformContext.from_env() as context:
        # 1. The large context goes to working memory, scoped to this plan.
        await context.memory.store(key, vehicle_record(vehicle_id), plan_id=plan_id)
        try:
            # 2. The event carries only ids and the key.
            answer = await context.bus.call(
                "parts.check.requested",
                {"vehicle_id": vehicle_id, "plan_id": plan_id, "memory_key": key},
                response_event="parts.check.completed",
                timeout=30,
            )
        finally:
            await context.memory.clear(plan_id)
    if not answer.data.get("success"):
        print(f"parts check failed: {answer.data.get('error')}", file=sys.stderr)
        return 1
    result = answer.data["result"]
    print(
        f"vehicle {result['vehicle_id']}: {result['history_entries']} history entries; "
        f"in stock: {', '.join(result['in_stock']) or '-'}; "
        f"to order: {', '.join(result['to_order']) or '-'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(run_client(main(sys.argv[1] if len(sys.argv) > 1 else "V-42")))
