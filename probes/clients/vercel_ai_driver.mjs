// Run one invocation through the Vercel AI SDK's tool loop (npm `ai`, generateText with tools
// and stopWhen, the model from `@ai-sdk/anthropic`) and print it as stream-json lines.
// node vercel_ai_driver.mjs SPEC_JSON  (NODE_PATH: the install's node_modules; both packages
// are ES modules, loaded from there by their package.json's exports)
// The loop gets the loop drivers' three tools: add, fail (always throws) and read_file; one
// "assistant" event per step, then one "result". The step limit is stopWhen: stepCountIs(N),
// 20 when the invocation gives none (the SDK's own default is a single step).
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

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

const spec = JSON.parse(process.argv[2]);
const ai = await load("ai");
const { createAnthropic } = await load("@ai-sdk/anthropic");
const object = (properties, required) => ai.jsonSchema({ type: "object", properties, required });
const tools = {
  add: ai.tool({
    description: "Add two integers.",
    inputSchema: object({ a: { type: "integer" }, b: { type: "integer" } }, ["a", "b"]),
    execute: async ({ a, b }) => String(a + b),
  }),
  fail: ai.tool({
    description: "A tool that always fails with the given reason.",
    inputSchema: object({ reason: { type: "string" } }, ["reason"]),
    execute: async ({ reason }) => { throw new Error(reason); },
  }),
  read_file: ai.tool({
    description: "Read a text file of the workspace.",
    inputSchema: object({ path: { type: "string" } }, ["path"]),
    execute: async ({ path: file }) => fs.readFileSync(path.join(process.cwd(), file), "utf8"),
  }),
};
const anthropic = createAnthropic({
  baseURL: `${process.env.ANTHROPIC_BASE_URL.replace(/\/$/, "")}/v1`,
  apiKey: process.env.ANTHROPIC_API_KEY,
});
const options = spec.options || {};
const settings = {
  model: anthropic(spec.model), system: spec.system, prompt: spec.prompt, tools,
  stopWhen: ai.stepCountIs(spec.max_iterations ?? 20), maxRetries: spec.max_retries,
  maxOutputTokens: options.max_tokens ?? 1024,
  onStepFinish: (step) => out({ type: "assistant", message: {
    role: "assistant", stop_reason: step.finishReason,
    content: (step.content || []).map((part) => ({ ...part })) } }),
};
if (options.thinking) {
  settings.providerOptions = { anthropic: { thinking: {
    type: options.thinking.type, budgetTokens: options.thinking.budget_tokens } } };
}
let turns = 0;
try {
  const result = await ai.generateText(settings);
  turns = result.steps.length;
  out({ type: "result", subtype: "success", is_error: false, num_turns: turns,
        result: result.text, stop_reason: result.finishReason });
} catch (error) {
  out({ type: "result", subtype: "error", is_error: true, num_turns: turns,
        result: `${error && error.name}: ${error && error.message}` });
  process.exit(1);
}
