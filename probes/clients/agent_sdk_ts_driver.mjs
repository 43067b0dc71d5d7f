// Run one invocation through the TypeScript Claude Agent SDK (npm @anthropic-ai/claude-agent-sdk,
// query()) and print every message it yields as one JSON line: they already have the shapes of
// Claude Code's stream-json (system, assistant, user, result), so the same checks read them.
// node agent_sdk_ts_driver.mjs SPEC_JSON  (NODE_PATH: the install's node_modules; the SDK is an
// ES module, loaded from there by its package.json's exports, as ESM import reads no NODE_PATH)
// node agent_sdk_ts_driver.mjs --check    prints what the install offers (typeof query)
// The spec is the Python SDK driver's (agent_sdk_driver.py) plus `cli`, the Claude Code the SDK
// is told to run (the file whose SHA-256 the reports cite), and `plugin_dirs`. A streamed run
// reads the CLI's stream-json input protocol on stdin and turns each line into the SDK call
// that writes it; the SDK's canUseTool is put to the harness as the CLI puts it.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";

const PACKAGE = "@anthropic-ai/claude-agent-sdk";
const out = (event) => process.stdout.write(JSON.stringify(event) + "\n");

function entryOf(exported) {
  if (typeof exported === "string") return exported;
  if (!exported || typeof exported !== "object") return null;
  for (const key of ["import", "node", "default", "require"]) {
    const found = entryOf(exported[key]);
    if (found) return found;
  }
  return null;
}

async function load(name) {
  const dir = path.join(process.env.NODE_PATH, name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const exported = pkg.exports && (pkg.exports["."] ?? pkg.exports);
  const entry = entryOf(exported) || pkg.module || pkg.main || "index.js";
  return import(pathToFileURL(path.join(dir, entry)).href);
}

// ["--fallback-model", "x", "--flag"] -> {"fallback-model": "x", "flag": null}
function extraArgs(args) {
  const extra = {};
  args.forEach((arg, position) => {
    if (!arg.startsWith("--")) return;
    const following = args[position + 1];
    extra[arg.slice(2)] = following !== undefined && !following.startsWith("--") ? following : null;
  });
  return extra;
}

// the prompt of a streamed run: the user lines the harness writes, until it closes stdin
function inputQueue() {
  const items = [];
  let wake = null;
  let done = false;
  const notify = () => { if (wake) { wake(); wake = null; } };
  return {
    push(item) { items.push(item); notify(); },
    end() { done = true; notify(); },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (items.length) { yield items.shift(); continue; }
        if (done) return;
        await new Promise((resolve) => { wake = resolve; });
      }
    },
  };
}

class Relay {
  constructor() {
    this.input = inputQueue();
    this.answers = new Map();
    this.asked = 0;
    this.query = null;
    this.pending = Promise.resolve();
  }

  async canUseTool(tool, input, context) {
    this.asked += 1;
    const requestId = `driver-${this.asked}`;
    const answer = new Promise((resolve) => this.answers.set(requestId, resolve));
    out({ type: "control_request", request_id: requestId, request: {
      subtype: "can_use_tool", tool_name: tool, input,
      tool_use_id: (context && context.toolUseID) ?? null } });
    const decided = await answer;
    if (decided.behavior === "allow") {
      return { behavior: "allow", updatedInput: decided.updatedInput ?? input };
    }
    return { behavior: "deny", message: String(decided.message ?? "") };
  }

  async act(line) {
    if (line.type === "user") {
      this.input.push(line); // the line as written, uuid included
      return;
    }
    if (line.type === "control_response") {
      const response = line.response || {};
      const waiting = this.answers.get(String(response.request_id));
      if (waiting) {
        this.answers.delete(String(response.request_id));
        waiting(response.response || {});
      }
      return;
    }
    const request = line.request || {};
    const calls = {
      interrupt: () => this.query.interrupt(),
      set_model: () => this.query.setModel(request.model),
      set_permission_mode: () => this.query.setPermissionMode(request.mode),
    };
    let reply = { subtype: "success", request_id: line.request_id };
    try {
      if (!(request.subtype in calls)) {
        throw new Error(`the driver has no SDK call for ${JSON.stringify(request.subtype)}`);
      }
      await calls[request.subtype]();
    } catch (error) { // reported to the harness as the CLI reports a failure
      reply = { subtype: "error", request_id: line.request_id,
                error: `${error && error.name}: ${error && error.message}` };
    }
    out({ type: "control_response", response: reply });
  }

  readStdin() {
    const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    lines.on("line", (raw) => {
      if (!raw.trim()) return;
      const line = JSON.parse(raw);
      this.pending = this.pending.then(() => this.act(line));
    });
    // the harness closed our input: no more prompts once what was read is done
    lines.on("close", () => { this.pending = this.pending.then(() => this.input.end()); });
  }
}

function options(spec, relay) {
  const asks = relay !== null && spec.streamed.permissions !== null;
  const env = { ...process.env };
  delete env.NODE_PATH; // the driver's way to its packages, not the client's environment
  const chosen = {
    cwd: process.cwd(), env, pathToClaudeCodeExecutable: spec.cli, model: spec.model,
    permissionMode: asks ? "default" : "bypassPermissions",
    allowDangerouslySkipPermissions: !asks,
    extraArgs: { ...extraArgs(spec.extra_args),
                 ...(spec.mcp_config ? { "strict-mcp-config": null } : {}) },
    stderr: (data) => process.stderr.write(data.endsWith("\n") ? data : data + "\n"),
  };
  // a JavaScript CLI (cli.js) runs on the node running this driver, not one found on PATH
  if (/\.(c|m)?js$/.test(spec.cli)) chosen.executable = process.execPath;
  if (spec.tools !== null) chosen.tools = spec.tools;
  if (spec.max_turns !== null) chosen.maxTurns = spec.max_turns;
  if (spec.resume !== null) chosen.resume = spec.resume;
  if (spec.fork) chosen.forkSession = true;
  if (spec.session_id !== null) chosen.sessionId = spec.session_id;
  if (spec.settings !== null) chosen.settings = spec.settings;
  if (spec.mcp_config !== null) {
    chosen.mcpServers = JSON.parse(fs.readFileSync(spec.mcp_config, "utf8")).mcpServers;
  }
  if (spec.plugin_dirs.length) {
    chosen.plugins = spec.plugin_dirs.map((folder) => ({ type: "local", path: folder }));
  }
  if (asks) chosen.canUseTool = (tool, input, context) => relay.canUseTool(tool, input, context);
  return chosen;
}

async function run(spec) {
  const { query } = await load(PACKAGE);
  const relay = spec.streamed ? new Relay() : null;
  const q = query({ prompt: relay ? relay.input : spec.prompt, options: options(spec, relay) });
  if (relay) {
    relay.query = q;
    relay.readStdin();
  }
  let results = 0;
  try {
    for await (const message of q) {
      if (message.type === "result") results += 1;
      out(message);
    }
  } catch (error) { // the SDK throws when the CLI exits with an error
    const text = `${error && error.name}: ${error && error.message}`;
    process.stderr.write(`agent-sdk-ts: ${text}\n`);
    // the CLI's own result, when it printed one, stays the last result event
    if (!results) out({ type: "result", subtype: "error", is_error: true, result: text });
    return 1;
  }
  return 0;
}

async function check() {
  const sdk = await load(PACKAGE);
  out({ query: typeof sdk.query });
  return 0;
}

let code = 1;
try {
  code = process.argv[2] === "--check" ? await check() : await run(JSON.parse(process.argv[2]));
} catch (error) { // before the SDK ran: a spec or an install the driver cannot use
  const text = `${error && error.name}: ${error && error.message}`;
  process.stderr.write(`agent-sdk-ts: ${text}\n`);
  out({ type: "result", subtype: "error", is_error: true, result: text });
}
process.exit(code);
