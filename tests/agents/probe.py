"""What an agent inside `virgo launch`'s sandbox can reach, printed as JSON (run by the tests).

argv: a JSON object with `read` (paths to try to read) and `write` (paths to try to create). It
prints what it found, the environment and command line of every process it can see included;
the test, which alone knows the secrets, decides what is allowed.
"""

import json
import os
import sys
from pathlib import Path

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def attempt_read(path: str) -> str:
    try:
        target = Path(path)
        if target.is_dir():
            return "listed: " + ",".join(sorted(os.listdir(target)))
        return "read: " + target.read_text(errors="replace")
    except OSError as exc:
        return f"refused: {type(exc).__name__}"


def attempt_write(path: str) -> str:
    try:
        Path(path).write_text("written by the agent")
    except OSError as exc:
        return f"refused: {type(exc).__name__}"
    return "written"


def processes() -> dict[str, dict[str, str]]:
    """The environment and command line of every process this agent can see."""
    seen: dict[str, dict[str, str]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        seen[pid] = {}
        for part in ("environ", "cmdline"):
            try:
                seen[pid][part] = Path(f"/proc/{pid}/{part}").read_bytes().decode(errors="replace")
            except OSError as exc:
                seen[pid][part] = f"refused: {type(exc).__name__}"
    return seen


async def mcp_tools(config: dict) -> dict[str, object]:
    server = config["mcpServers"]["virgo"]
    headers = server["headers"]
    async with (
        httpx.AsyncClient(headers=headers) as client,
        streamable_http_client(server["url"], http_client=client) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = [tool.name for tool in (await session.list_tools()).tools]
    unauthorised = httpx.post(server["url"], json={}, headers={"Authorization": "Bearer forged"})
    return {"listed": listed, "forged_token_status": unauthorised.status_code}


def main() -> None:
    asked = json.loads(sys.argv[1])
    config = json.loads(Path(os.environ["VIRGO_MCP_CONFIG"]).read_text())
    report = {
        "read": {path: attempt_read(path) for path in asked["read"]},
        "write": {path: attempt_write(path) for path in asked["write"]},
        "processes": processes(),
        "environment": dict(os.environ),
        "cwd": os.getcwd(),
        "mcp": anyio.run(mcp_tools, config),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
