"""The asyncio client and its synchronous wrapper against a real
`shellvisor serve` (real bash, real processes, real terminals)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import shellvisor
from shellvisor import Backgrounded, RunResult, ShellvisorError
from conftest import marker_env, processes_with_env, wait_until_gone

README_SCRIPT = textwrap.dedent("""\
    import asyncio, shellvisor
    async def main():
        async with shellvisor.Client() as sv:
            s = await sv.session("demo"); await s.run("cd /tmp && export A=1")
            print((await s.run("echo $A $PWD")).output, end="")
    asyncio.run(main())
""")


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


def readme_script_prints_and_leaves_nothing(marker: str, prefix: list[str]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(README_SCRIPT)
    os.chmod(script.name, 0o644)
    try:
        done = subprocess.run([*prefix, sys.executable, script.name], capture_output=True, text=True, timeout=60,
                              env={**os.environ, **marker_env(marker)}, cwd="/")
    finally:
        os.unlink(script.name)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 /tmp\n", done.stdout
    wait_until_gone(marker)


def test_the_readme_script_prints_and_leaves_no_process(marker):
    readme_script_prints_and_leaves_nothing(marker, [])


def test_the_readme_script_as_an_unprivileged_user(marker):
    # Run as root (as CI does) to switch to uid 65534; the package and the
    # binary must be readable by that user.
    assert os.geteuid() == 0, "run the tests as root (README): this one switches to uid 65534"
    readme_script_prints_and_leaves_nothing(marker, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])


def test_state_errors_and_codes(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            s = await sv.session("state")
            work = tempfile.mkdtemp()
            await s.run(f"cd {work} && export KEPT=yes && f() {{ echo fn; }}")
            result = await s.run("pwd; echo $KEPT; f")
            assert isinstance(result, RunResult)
            assert result.output == f"{os.path.realpath(work)}\nyes\nfn\n", result.output
            assert result.exit_code == 0 and not result.is_error and result.cwd == os.path.realpath(work)
            failed = await s.run("echo out; exit 3")
            assert failed.exit_code == 3 and failed.is_error and failed.output == "out\n"
            assert (await s.run("echo $X", env={"X": "per call"})).output == "per call\n"
            with pytest.raises(ShellvisorError) as bad_env:
                await s.run("true", env={"1BAD": "x"})
            assert bad_env.value.code == "invalid_env_name", bad_env.value
            with pytest.raises(ShellvisorError) as bad_cwd:
                await s.run("true", cwd="/does/not/exist")
            assert bad_cwd.value.code == "invalid_cwd", bad_cwd.value
            with pytest.raises(ShellvisorError) as unknown:
                await s.job("job_nope").info()
            assert unknown.value.code == "job_not_found"
            # Binary output is byte-exact through the job's output.
            binary = await s.run("printf '\\x00\\xff\\xfe'")
            assert (await s.job(binary.job_id).read_all()) == b"\x00\xff\xfe"
            info = await sv.info()
            assert info.version and info.running_jobs == 0
    run(scenario())
    wait_until_gone(marker)


def test_a_session_init_and_the_runtime_warnings(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            s = await sv.session("venv", init="export VIRTUAL=on; activated() { echo yes; }")
            assert (await s.run("echo $VIRTUAL; activated")).output == "on\nyes\n"
            bad = await sv.session("bad", init="false")
            result = await bad.run("echo fine")
            assert result.output == "fine\n" and any("status 1" in n for n in result.notices), result
            info = await sv.info()
            assert len(info.warnings) == 1 and info.warnings[0].startswith("session bad: "), info

    run(scenario())
    wait_until_gone(marker)


def test_a_timeout_kills_the_process_tree(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            s = await sv.session("timeouts")
            result = await s.run("sleep 120 & sleep 120; echo never", timeout=1)
            assert isinstance(result, RunResult) and result.timed_out, result
            assert "sleep 120" not in " ".join(cmd for _, cmd in processes_with_env(marker))
            assert (await s.run("echo still here")).output == "still here\n"
    run(scenario())


def test_background_jobs_output_wait_kill_completions_and_events(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            s = await sv.session("jobs", subscribe=True)
            started = await s.run("echo one; sleep 0.3; echo two", background=True)
            assert isinstance(started, Backgrounded) and started.reason == "requested"
            job = s.job(started.job_id)
            result = await job.wait(timeout=20)
            assert result is not None and result.output == "one\ntwo\n"
            chunk = await job.output(offset=4)
            assert chunk.data == b"two\n" and chunk.total_bytes == 8
            # The completion of a background job arrives once.
            other = await s.run("echo done", background=True)
            async for completion in s.completions(poll=20):
                if completion.job_id == other.job_id:
                    assert completion.output == "done\n"
                    break
            # Output and job events of a subscribed session.
            events = []
            third = await s.run("echo evented", background=True)
            async for event in s.events():
                events.append(event)
                if event.method == "job.finished" and event.params["job_id"] == third.job_id:
                    break
            printed = b"".join(e.params["data"] for e in events
                               if e.method == "output" and e.params["job_id"] == third.job_id)
            assert printed == b"evented\n", events
            # Kill a server left running; the first one's result stays readable.
            server = await s.run("sleep 300", background=True)
            await s.job(server.job_id).kill()
            assert (await s.job(server.job_id).info()).state == "killed"
            states = {j.job_id: j.state for j in await s.jobs()}
            assert states[started.job_id] == "completed" and states[server.job_id] == "killed", states
            first = await s.wait_any([started.job_id], timeout=5)
            assert first is None or first.job_id == started.job_id
    run(scenario())
    wait_until_gone(marker)


def test_a_terminal_program_is_driven(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            s = await sv.session("pty")
            pty = await s.start_pty("python3 -q")
            deadline = time.monotonic() + 20
            while (await pty.state())["state"] != "awaiting_input":
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            await pty.write("print(6 * 7)\n")
            while "42" not in (await pty.screen()).text:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert (await pty.resize(100, 30)) == {"cols": 100, "rows": 30}
            await pty.key("C-d")
            result = await pty.wait(timeout=20)
            assert result is not None and result.exit_code == 0
    run(scenario())


def test_parallel_calls_on_many_sessions(marker):
    async def scenario():
        async with shellvisor.Client(env=marker_env(marker)) as sv:
            sessions = [await sv.session(f"p{i}") for i in range(8)]
            await asyncio.gather(*(s.run(f"export N={i}") for i, s in enumerate(sessions)))
            results = await asyncio.gather(*(s.run("sleep 0.2; echo $N") for s in sessions for _ in range(3)))
            assert [r.output for r in results] == [f"{i}\n" for i in range(8) for _ in range(3)]
    run(scenario())


def test_the_sync_wrapper(marker):
    with shellvisor.SyncClient(env=marker_env(marker)) as sv:
        s = sv.session("sync")
        s.run("cd / && export S=1")
        assert s.run("echo $S $PWD").output == "1 /\n"
        started = s.run("echo bg", background=True)
        assert s.job(started.job_id).wait(timeout=20).output == "bg\n"
        with pytest.raises(ShellvisorError):
            s.run("true", env={"a b": "x"})
    wait_until_gone(marker)


def test_a_killed_python_process_takes_the_server_with_it(marker):
    script = textwrap.dedent("""\
        import asyncio, shellvisor
        async def main():
            sv = shellvisor.Client()
            await sv.start()
            s = await sv.session("orphan")
            await s.run("sleep 300 &")
            print("ready", flush=True)
            await asyncio.sleep(300)
        asyncio.run(main())
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, **marker_env(marker)})
    try:
        assert process.stdout.readline() == "ready\n"
        assert any("sleep 300" in cmd for _, cmd in processes_with_env(marker))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        wait_until_gone(marker, within=15)
    finally:
        if process.poll() is None:
            process.kill()


def test_a_unix_socket_server(marker, tmp_path):
    path = str(tmp_path / "sv.sock")
    server = subprocess.Popen([shellvisor.find_binary(), "serve", "--socket", path],
                              env={**os.environ, **marker_env(marker), "SHELLVISOR_LOG": "error"})
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(path):
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.02)

        async def first():
            async with shellvisor.Client(socket=path) as sv:
                await (await sv.session("kept")).run("export K=stays")

        async def second():
            async with shellvisor.Client(socket=path) as sv:
                return (await (await sv.session("kept")).run("echo $K")).output

        run(first())
        assert run(second()) == "stays\n"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=20)
    wait_until_gone(marker)
