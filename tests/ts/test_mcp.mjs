// Drives `shellvisor mcp` with the official TypeScript MCP SDK over stdio and
// over streamable HTTP, then smoke-runs the MCP Inspector CLI against both.
// Usage: node test_mcp.mjs <path to the shellvisor binary>
// Exits non-zero on the first failure; every wait has a deadline.

import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const BINARY = process.argv[2];
const TOKEN = randomUUID();
const run = promisify(execFile);

/** Live processes whose environment holds `needle` (NAME=value). */
function processesWithEnv(needle) {
  const found = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const environ = readFileSync(`/proc/${pid}/environ`).toString().split("\0");
      const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(")").pop().trim()[0];
      if (environ.includes(needle) && state !== "Z") {
        found.push(readFileSync(`/proc/${pid}/cmdline`).toString().replaceAll("\0", " "));
      }
    } catch {
      // The process ended while being read.
    }
  }
  return found;
}

async function until(what, check, within = 20_000) {
  const deadline = Date.now() + within;
  while (!(await check())) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const text = (result) => result.content.filter((b) => b.type === "text").map((b) => b.text).join("");

async function scenarios(client, marker, label) {
  const step = async (name, body) => {
    const started = Date.now();
    await Promise.race([
      body(),
      new Promise((_, reject) => setTimeout(() => reject(new Error(`${name} took over 60 s`)), 60_000)),
    ]);
    console.log(`ok   ${label} ${name} (${((Date.now() - started) / 1000).toFixed(2)} s)`);
  };
  await step("echo", async () => {
    const tools = await client.listTools();
    assert.ok(tools.tools.some((t) => t.name === "bash"));
    const result = await client.callTool({ name: "bash", arguments: { command: "echo hi" } });
    assert.ok(text(result).startsWith("hi\n"), text(result));
    assert.equal(result.structuredContent.exit_code, 0);
  });
  await step("cwd and env persist", async () => {
    const work = realpathSync(mkdtempSync(join(tmpdir(), "shellvisor-ts-")));
    await client.callTool({ name: "bash", arguments: { command: `cd ${work} && export KEPT=ts` } });
    const result = await client.callTool({ name: "bash", arguments: { command: "pwd; echo $KEPT" } });
    assert.ok(text(result).startsWith(`${work}\nts\n`), text(result));
  });
  await step("a timeout leaves no process", async () => {
    const result = await client.callTool({ name: "bash", arguments: { command: "sleep 77 & sleep 77", timeout: 1 } });
    assert.equal(result.structuredContent.timed_out, true, JSON.stringify(result.structuredContent));
    await until("the sleeps to end", () => !processesWithEnv(marker).some((cmd) => cmd.includes("sleep 77")));
  });
  await step("async job and wait", async () => {
    const started = await client.callTool({ name: "bash", arguments: { command: "sleep 0.5; echo later", async: true } });
    assert.equal(started.structuredContent.status, "background");
    const waited = await client.callTool({ name: "job_wait", arguments: { job_id: started.structuredContent.job_id, timeout: 20 } });
    assert.ok(text(waited).startsWith("later\n"), text(waited));
  });
  await step("pty input", async () => {
    const started = await client.callTool({ name: "bash", arguments: { command: "read -p 'name? ' n; echo hello $n", pty: true } });
    assert.equal(started.structuredContent.status, "background", JSON.stringify(started.structuredContent));
    const answered = await client.callTool({
      name: "write_stdin",
      arguments: { job_id: started.structuredContent.job_id, text: "ts\n", wait_ms: 5000 },
    });
    assert.ok(text(answered).includes("hello ts"), text(answered));
  });
}

async function overStdio() {
  const marker = `SHELLVISOR_TS_TEST=${randomUUID()}`;
  const transport = new StdioClientTransport({
    command: BINARY,
    args: ["mcp"],
    env: { ...process.env, SHELLVISOR_LOG: "error", SHELLVISOR_TS_TEST: marker.split("=")[1] },
    stderr: "inherit",
  });
  const client = new Client({ name: "shellvisor-ts-test", version: "1.0.0" });
  await client.connect(transport);
  await scenarios(client, marker, "stdio");
  await client.close();
  await until("the stdio server and its shells to end", () => processesWithEnv(marker).length === 0);
  console.log("ok   stdio: nothing left after the client closed");
}

function startHttp(marker) {
  const server = spawn(BINARY, ["mcp", "--http", "0"], {
    env: { ...process.env, SHELLVISOR_LOG: "error", SHELLVISOR_MCP_TOKEN: TOKEN, SHELLVISOR_TS_TEST: marker.split("=")[1] },
    stdio: ["ignore", "ignore", "pipe"],
  });
  return new Promise((resolve, reject) => {
    let seen = "";
    const timer = setTimeout(() => reject(new Error(`no address from the HTTP server: ${seen}`)), 20_000);
    server.stderr.on("data", (chunk) => {
      seen += chunk;
      // The whole line: a chunk may end in the middle of the address.
      const found = seen.match(/MCP on (http:\/\/\S+)\n/);
      if (found) {
        clearTimeout(timer);
        resolve({ server, url: found[1] });
      }
    });
    server.on("exit", (code) => reject(new Error(`the HTTP server exited (${code}): ${seen}`)));
  });
}

async function overHttp() {
  const marker = `SHELLVISOR_TS_TEST=${randomUUID()}`;
  const { server, url } = await startHttp(marker);
  try {
    // Without the token the SDK's connect is refused, with 401 (not for
    // want of a server).
    const refused = new Client({ name: "no-token", version: "1.0.0" });
    await assert.rejects(refused.connect(new StreamableHTTPClientTransport(new URL(url))), /401|nauthorized/);
    console.log("ok   http: refused without the bearer token");
    const client = new Client({ name: "shellvisor-ts-test", version: "1.0.0" });
    await client.connect(new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
    }));
    await scenarios(client, marker, "http");
    await client.close();
    await inspector([url, "--header", `Authorization: Bearer ${TOKEN}`], "http");
  } finally {
    server.kill("SIGTERM");
  }
  await until("the HTTP server and its shells to end", () => processesWithEnv(marker).length === 0);
  console.log("ok   http: nothing left after SIGTERM");
}

async function inspector(target, label) {
  const cli = ["node_modules/.bin/mcp-inspector", "--cli"];
  const options = { timeout: 60_000, env: { ...process.env, SHELLVISOR_LOG: "off" }, maxBuffer: 16 << 20 };
  const listed = JSON.parse((await run(cli[0], [cli[1], ...target, "--method", "tools/list"], options)).stdout);
  assert.ok(listed.tools.some((tool) => tool.name === "bash"), JSON.stringify(listed));
  const called = JSON.parse((await run(cli[0], [
    cli[1], ...target, "--method", "tools/call", "--tool-name", "bash", "--tool-arg", "command=echo inspected $((6*7))",
  ], options)).stdout);
  assert.ok(text(called).startsWith("inspected 42\n"), JSON.stringify(called));
  console.log(`ok   ${label}: the MCP Inspector CLI lists the tools and calls bash`);
}

await overStdio();
await inspector(["-e", "SHELLVISOR_LOG=off", BINARY, "mcp"], "stdio");
await overHttp();
