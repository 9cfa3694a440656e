// The agents' ways out (issue 21, items 7-9) through the official MCP
// TypeScript SDK client (npm @modelcontextprotocol/sdk, pinned in
// package.json here) against the real `wizq mcp`, one case per run:
//
//   release_task        release_task gives the task back uncharged: pending
//                       at once, the attempt refunded (task_reset released)
//   disconnect_charged  a client that closes its session while holding a
//                       task has it failed at once (agent_disconnected), the
//                       attempt charged: a task whose client dies every time
//                       ends failed, long before its 60 s lease would lapse
//   string_response     submit_response takes the array as a JSON string; a
//                       fenced array is refused with a message saying so
//   timeout             a client that keeps heart-beating is refused past
//                       the step's timeout, with "timed out after 2s"
//
// Usage: node sdk_agent_test.mjs WIZQ_BINARY CASE
// (tests/mcp/npm_setup.sh copies it next to the installed SDK; ctest runs
// it as mcp_sdk_<CASE>.)
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

// WIZQ_STORE for `wizq mcp` when the test runs on the PostgreSQL store.
function storeEnv() {
  return process.env.WIZQ_STORE ? { env: { ...process.env } } : {};
}

const [wizq, which] = process.argv.slice(2);
assert.ok(wizq && which, 'usage: node sdk_agent_test.mjs WIZQ CASE');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wizq-mcp-agent-'));
const children = [];

const watchdog = setTimeout(() => {
  console.error('sdk_agent_test: timed out after 100 s');
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
}, 100_000);

// Review (Pool) may spawn Summary (Pool), with `options` for both.
function startRun(options) {
  const wf = path.join(dir, 'wf.json');
  fs.writeFileSync(wf, JSON.stringify({
    entrypoint: 'Review',
    options,
    steps: [
      { name: 'Review', next: ['Summary'],
        action: { kind: 'Pool', instructions: 'Look.' } },
      { name: 'Summary', action: { kind: 'Pool', instructions: 'Sum.' } },
    ],
  }));
  const run = spawn(wizq, ['run', wf, '--dir', path.join(dir, 'run'),
    '--quiet'], { stdio: ['ignore', 'ignore', 'pipe'] });
  children.push(run);
  let stderr = '';
  run.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) =>
    run.on('exit', (code, signal) => resolve({ code, signal, stderr })));
}

async function connect(name) {
  const transport = new StdioClientTransport({
    command: wizq,
    args: ['mcp', '--dir', path.join(dir, 'run')],
    stderr: 'pipe',
    // On a store (tests/pg/with_cluster.cc): the SDK passes a child only
    // a few variables of its own.
    ...storeEnv(),
  });
  transport.stderr?.on('data', (d) => process.stderr.write(d));
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  return client.callTool({ name, arguments: args });
}

// take_task until it hands out a task (the run may not exist yet).
async function take(client) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await call(client, 'take_task', { wait_seconds: 2 });
    if (!r.isError && r.structuredContent.task_id) return r.structuredContent;
    assert.ok(Date.now() < deadline, `no task to take: ${JSON.stringify(r)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

function status() {
  const r = spawnSync(wizq, ['status', '--dir', path.join(dir, 'run'),
    '--json'], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

// The run's events: .wizard/audit.jsonl, or on a store as `wizq export
// --format audit` writes them.
function audit(event) {
  let file = path.join(dir, 'run', '.wizard', 'audit.jsonl');
  if (process.env.WIZQ_STORE) {
    file = path.join(dir, 'exported.jsonl');
    const r = spawnSync(wizq, ['export', '--format', 'audit', '--dir',
      path.join(dir, 'run'), '-o', file], { encoding: 'utf8' });
    assert.equal(r.status, 0, r.stderr);
  }
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim())
    .map((l) => JSON.parse(l)).filter((e) => e.event === event);
}

const cases = {
  async release_task() {
    const runExit = startRun({ max_retries: 0 });
    const client = await connect('releaser');
    const p = await take(client);
    const r = await call(client, 'release_task',
      { task_id: p.task_id, lease: p.lease });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.deepEqual(r.structuredContent,
      { task_id: p.task_id, status: 'released' });
    const t = status().tasks[0];
    assert.equal(t.state, 'pending');
    assert.equal(t.attempts, 0, 'the released attempt was charged');
    const resets = audit('task_reset');
    assert.equal(resets.length, 1);
    assert.equal(resets[0].reason, 'released');
    assert.equal(resets[0].refund, true);
    // Its only attempt is still there: taken again, and completed.
    const p2 = await take(client);
    assert.equal(p2.attempt, 1);
    const d = await call(client, 'submit_response',
      { task_id: p2.task_id, lease: p2.lease, response: [] });
    assert.equal(d.isError, false, JSON.stringify(d));
    await client.close();
    const run = await runExit;
    assert.equal(run.code, 0, run.stderr);
  },

  async disconnect_charged() {
    const runExit = startRun({ max_retries: 1, lease: 60 });
    const started = Date.now();
    for (const attempt of [1, 2]) {
      const client = await connect(`crasher-${attempt}`);
      const p = await take(client);
      assert.equal(p.attempt, attempt);
      await client.close();  // ends wizq mcp's stdin
      const failed = audit('task_failed');
      assert.equal(failed.length, attempt,
        'the session\'s lease was not handed back when its client left');
      assert.equal(failed[attempt - 1].reason, 'agent_disconnected');
      assert.equal(failed[attempt - 1].attempt, attempt);
    }
    const t = status().tasks[0];
    assert.equal(t.state, 'failed', 'a task whose client dies every time');
    assert.equal(t.attempts, 2);
    const run = await runExit;
    assert.equal(run.code, 1, run.stderr);
    assert.ok(Date.now() - started < 50_000, 'waited for the leases to lapse');
  },

  async string_response() {
    startRun({ max_retries: 1 });
    const client = await connect('stringer');
    const p = await take(client);
    const r = await call(client, 'submit_response', {
      task_id: p.task_id, lease: p.lease,
      response: JSON.stringify([{ kind: 'Summary', value: { n: 1 } }]),
    });
    assert.equal(r.isError, false, JSON.stringify(r));
    const child = status().tasks[1];
    assert.equal(child.type, 'Summary');
    assert.deepEqual(child.inputs, { n: 1 });
    const q = await take(client);
    const fenced = await call(client, 'submit_response', {
      task_id: q.task_id, lease: q.lease, response: '```json\n[]\n```',
    });
    assert.equal(fenced.isError, true, JSON.stringify(fenced));
    assert.equal(fenced.structuredContent.exit_code, 1);
    assert.match(fenced.content[0].text,
      /the response is the array inside a ```json fence: send the array alone/);
    await client.close();
  },

  async timeout() {
    startRun({ max_retries: 1, timeout: 2, lease: 60 });
    const client = await connect('slowpoke');
    const p = await take(client);
    const taken = Date.now();
    let hb;
    while (Date.now() - taken < 15_000) {
      hb = await call(client, 'heartbeat', { task_id: p.task_id, lease: p.lease });
      if (hb.isError) break;
      await new Promise((res) => setTimeout(res, 300));
    }
    assert.equal(hb.isError, true, '15 s of heartbeats, never timed out');
    assert.ok(Date.now() - taken >= 1900, 'timed out early');
    assert.equal(hb.structuredContent.exit_code, 3);
    assert.match(hb.content[0].text, /task 1: timed out after 2s/);
    const failed = audit('task_failed');
    assert.equal(failed.length, 1);
    assert.equal(failed[0].reason, 'timeout');
    await client.close();
  },
};

assert.ok(cases[which], `unknown case ${which}: ${Object.keys(cases)}`);
cases[which]().then(() => {
  clearTimeout(watchdog);
  for (const c of children) c.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(`ok - ${which}`);
}, (e) => {
  clearTimeout(watchdog);
  for (const c of children) c.kill('SIGKILL');
  console.error(e);
  console.error(`sdk_agent_test: the install directory is kept: ${dir}`);
  console.log(`not ok - ${which}`);
  process.exit(1);
});
