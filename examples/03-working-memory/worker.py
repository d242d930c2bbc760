"""Parts checker: reads the vehicle record from working memory by the key in the event."""

from __future__ import annotations

import logging

from soorma import Worker

IN_STOCK = {"brake_pads", "wiper_blades", "air_filter"}

worker = Worker(name="parts-checker", description="Checks a vehicle's required parts.")


@worker.on_task("parts.check.requested")
async def check_parts(task, context):
    plan_id, key = task.data.get("plan_id"), task.data.get("memory_key")
    if not plan_id or not key:
        await task.fail("data.plan_id and data.memory_key are required")
        return
    vehicle = await context.memory.retrieve(key, plan_id=plan_id)
    if vehicle is None:
        await task.fail(f"no vehicle record in working memory under {key!r}")
        return
    required = vehicle["required_parts"]
    await task.complete(
        {
            "vehicle_id": vehicle["vehicle_id"],
            "history_entries": len(vehicle["service_history"]),
            "in_stock": [p for p in required if p in IN_STOCK],
            "to_order": [p for p in required if p not in IN_STOCK],
        }
    )


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker.run()
