"""A FastMCP tool server with one slow tool, for the gateway's progress and cancellation tests
(tests/tests/proxy_cancellation.rs).

`wait(steps)` reports progress once a step (every 100 ms) and returns after `steps` steps;
`burst(count)` sends `count` progress notifications and log messages at once, then returns. The
server appends one JSON line per event to the file named by `SLOW_SERVER_LOG`: the progress
token it was handed, and whether the call finished or was cancelled, so a test sees what reached
the upstream.
"""

import json
import os
import sys

import anyio
from mcp.server.fastmcp import Context, FastMCP

LOG = os.environ["SLOW_SERVER_LOG"]

mcp = FastMCP("slow")


def log(event: dict) -> None:
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(json.dumps(event) + "\n")


@mcp.tool()
async def wait(steps: int, ctx: Context) -> str:
    """Waits `steps` tenths of a second, reporting progress after each."""
    meta = ctx.request_context.meta
    token = getattr(meta, "progressToken", None) if meta else None
    log({"event": "started", "progress_token": token})
    try:
        for step in range(steps):
            await anyio.sleep(0.1)
            await ctx.report_progress(step + 1, steps)
    except anyio.get_cancelled_exc_class():
        log({"event": "cancelled"})
        raise
    log({"event": "finished"})
    return f"waited {steps} steps"


@mcp.tool()
async def burst(count: int, ctx: Context) -> str:
    """Sends `count` progress notifications and `count` log messages at once, then returns."""
    for step in range(count):
        await ctx.report_progress(step + 1, count)
        await ctx.info(f"step {step + 1}")
    return f"sent {count}"


if __name__ == "__main__":
    print("slow server on stdio", file=sys.stderr)
    mcp.run("stdio")
