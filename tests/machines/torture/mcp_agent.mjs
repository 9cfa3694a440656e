// A Pool agent of the machines torture over MCP, through the official
// TypeScript SDK client against the real `wizq mcp` (stdio): take_task,
// the task body on the payload while it heart-beats every second, then
// submit_response with the body's output. Nothing ends the body when the
// lease is lost (an MCP agent has no local deadline): an attempt of it
// that outlives its lease is a `late_agent`, not an overlap
// (tests/machines/torture/history.h). Its ledger records say `via: mcp`.
//
//   node mcp_agent.mjs WIZQ RUN_ID BODY LEDGER_DIR      (WIZQ_STORE set)
//
// Runs in a machine (tests/machines/machines.sh) with the run's files in
// /mnt, from the build's node/ (where the SDK is installed; the torture
// copies it there). Exits 0 once the run finished, 3 when its session
// with `wizq mcp` ends otherwise (the supervisor starts it again).
import { spawn } from 'node:child_process';
import os from 'node:os';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [wizq, run, body, ledger] = process.argv.slice(2);
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

// The body on `payload`: its stdout, once it exited.
function runBody(payload) {
  const child = spawn(body, [ledger], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: {
      ...process.env,
      WIZQ_RUN_ID: run,
      WIZQ_TASK_ID: String(payload.task_id),
      WIZQ_ATTEMPT: String(payload.attempt),
      WIZQ_TORTURE_VIA: 'mcp',
    },
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stdin.end(JSON.stringify(payload) + '\n');
  return new Promise((res) => child.on('close', () => res(out)));
}

// submit_response, asked again while the store cannot be reached (a
// database restart, a dropped session) for up to 5 s, as `agent serve`
// does; a refusal (the lease was lost meanwhile: the store drops the late
// result) ends it.
const refused =
  /lease lost|already|held by another|never taken|timed out|gave it back|invalid/;
async function deliver(call, p, response) {
  const until = Date.now() + 5000;
  for (;;) {
    const r = await call('submit_response',
      { task_id: p.task_id, lease: p.lease, response });
    const text = (r.content ?? []).map((c) => c.text ?? '').join(' ');
    if (!r.isError || refused.test(text) || Date.now() > until) return;
    await sleep(300);
  }
}

async function main() {
  const transport = new StdioClientTransport({
    command: wizq,
    args: ['mcp', '--run-id', run, '--dir', '/mnt'],
    env: { ...process.env },
    stderr: 'inherit',
  });
  const client = new Client({ name: `${os.hostname()}.mcp`, version: '1.0.0' },
    { capabilities: {} });
  await client.connect(transport);
  const call = (name, args) => client.callTool({ name, arguments: args });
  for (;;) {
    const r = await call('take_task', { wait_seconds: 3 });
    const p = r.structuredContent ?? {};
    if (p.status === 'finished') break;
    if (r.isError || !p.task_id) {  // idle; no run yet; the store away
      if (r.isError) await sleep(500);
      continue;
    }
    let working = true;
    const done = runBody(p).finally(() => (working = false));
    while (working) {
      await Promise.race([done, sleep(1000)]);
      if (working) await call('heartbeat', { task_id: p.task_id, lease: p.lease });
    }
    await deliver(call, p, await done);
  }
  await client.close();
}

main().then(() => process.exit(0), (e) => {
  console.error(`mcp_agent: ${e.message}`);
  process.exit(3);
});
