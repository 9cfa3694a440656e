// The official MCP TypeScript SDK client (npm @modelcontextprotocol/sdk,
// pinned in package.json here) works a whole wizq run through `wizq mcp`:
// handshake, tools/list, take_task -> submit_response until the run has
// finished, a heartbeat, refused calls (a wrong lease, wrong arguments, an
// unknown tool), run_status. `wizq run` starts the run beside it and must
// finish it, completed.
//
// Usage: node sdk_client_test.mjs WIZQ_BINARY WORKFLOW
// (tests/mcp/npm_setup.sh copies it next to the installed SDK; ctest runs
// it as mcp_sdk_client_test.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

// WIZQ_STORE for `wizq mcp` when the test runs on the PostgreSQL store.
function storeEnv() {
  return process.env.WIZQ_STORE ? { env: { ...process.env } } : {};
}

const [wizq, workflow] = process.argv.slice(2);
assert.ok(wizq && workflow, 'usage: node sdk_client_test.mjs WIZQ WORKFLOW');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'wizq-mcp-sdk-'));
const children = [];
let passed = 0;

function check(name, fn) {
  fn();
  passed++;
  console.log(`ok ${passed} - ${name}`);
}

const watchdog = setTimeout(() => {
  console.error('sdk_client_test: timed out after 150 s');
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
}, 150_000);

function startRun() {
  const run = spawn(wizq, ['run', workflow, '--dir', dir, '--quiet'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(run);
  let stderr = '';
  run.stderr.on('data', (d) => (stderr += d));
  const exited = new Promise((resolve) =>
    run.on('exit', (code, signal) => resolve({ code, signal, stderr })));
  return exited;
}

async function call(client, name, args) {
  return client.callTool({ name, arguments: args });
}

// take_task until it hands out a task or says the run finished. Errors are
// retried for a while: the run may not exist yet when the client starts.
async function take(client) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await call(client, 'take_task', { wait_seconds: 2 });
    if (!r.isError) {
      const sc = r.structuredContent;
      assert.deepEqual(JSON.parse(r.content[0].text), sc,
        'text content carries the same JSON as structuredContent');
      if (sc.status === 'idle') continue;
      return sc;
    }
    if (Date.now() > deadline) {
      throw new Error(`take_task kept failing: ${r.content[0].text}`);
    }
    await new Promise((res) => setTimeout(res, 200));
  }
}

async function main() {
  const runExit = startRun();
  const transport = new StdioClientTransport({
    command: wizq,
    args: ['mcp', '--dir', dir],
    stderr: 'pipe',
    // On a store (tests/pg/with_cluster.cc): the SDK passes a child only
    // a few variables of its own.
    ...storeEnv(),
  });
  transport.stderr?.on('data', (d) => process.stderr.write(d));
  const client = new Client({ name: 'wizq-sdk-test', version: '1.0.0' },
    { capabilities: {} });
  await client.connect(transport);

  check('initialize: server info and the tools capability', () => {
    assert.equal(client.getServerVersion().name, 'wizq');
    assert.ok(client.getServerCapabilities().tools);
  });
  await client.ping();

  const { tools } = await client.listTools();
  check('tools/list: the six tools, each with an object schema', () => {
    assert.deepEqual(tools.map((t) => t.name).sort(), ['fail_task',
      'heartbeat', 'release_task', 'run_status', 'submit_response',
      'take_task']);
    for (const t of tools) assert.equal(t.inputSchema.type, 'object');
  });

  await assert.rejects(call(client, 'no_such_tool', {}),
    (e) => e.code === -32602, 'an unknown tool is -32602');
  const wrong = await call(client, 'take_task', { wait_seconds: 'soon' });
  check('wrong arguments are a tool error naming the argument', () => {
    assert.equal(wrong.isError, true);
    assert.match(wrong.content[0].text, /wait_seconds/);
  });

  const done = { Review: 0, Summary: 0 };
  let heartbeats = 0;
  let finished;
  for (let i = 0; i < 50 && !finished; i++) {
    const p = await take(client);
    if (p.status === 'finished') {
      finished = p;
      break;
    }
    assert.ok(Number.isInteger(p.task_id) && p.lease, JSON.stringify(p));
    assert.match(p.instructions, new RegExp(`# Current Step: ${p.task.kind}`));
    if (heartbeats === 0) {
      const hb = await call(client, 'heartbeat',
        { task_id: p.task_id, lease: p.lease });
      assert.equal(hb.isError, false, JSON.stringify(hb));
      const bad = await call(client, 'heartbeat',
        { task_id: p.task_id, lease: p.lease + 'x' });
      check('a heartbeat with a wrong lease is refused (isError)', () => {
        assert.equal(bad.isError, true);
        assert.ok(bad.content[0].text.length > 0);
      });
      const stray = await call(client, 'submit_response',
        { task_id: p.task_id, lease: 'not-the-lease', response: [] });
      assert.equal(stray.isError, true, 'submit with a wrong lease');
      heartbeats++;
    }
    const response = p.task.kind === 'Review'
      ? [{ kind: 'Summary', value: { file: p.task.value.file, ok: true } }]
      : [];
    const r = await call(client, 'submit_response',
      { task_id: p.task_id, lease: p.lease, response });
    assert.equal(r.isError, false, JSON.stringify(r));
    done[p.task.kind]++;
    const late = await call(client, 'heartbeat',
      { task_id: p.task_id, lease: p.lease });
    assert.equal(late.isError, true, 'a heartbeat after done is refused');
  }
  check('the whole run was worked through MCP', () => {
    assert.deepEqual(done, { Review: 3, Summary: 3 });
    assert.equal(finished?.run_status, 'completed', JSON.stringify(finished));
  });
  const status = await call(client, 'run_status', {});
  check('run_status: the run completed', () => {
    assert.equal(status.isError, false, JSON.stringify(status));
    assert.equal(status.structuredContent.status, 'completed');
  });
  await client.close();
  const run = await runExit;
  check('wizq run finished the run, exit 0', () => {
    assert.equal(run.code, 0, run.stderr);
  });
}

main().then(() => {
  clearTimeout(watchdog);
  fs.rmSync(dir, { recursive: true, force: true });
  console.log(`${passed} passed, 0 failed`);
}, (e) => {
  clearTimeout(watchdog);
  for (const c of children) c.kill('SIGKILL');
  console.error(e);
  console.log(`${passed} passed, 1 failed`);
  console.error(`sdk_client_test: the install directory is kept: ${dir}`);
  process.exit(1);
});
