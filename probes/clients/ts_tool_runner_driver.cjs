// Run one invocation through the TypeScript SDK's tool runner (@anthropic-ai/sdk,
// client.beta.messages.toolRunner) and print it as stream-json lines.
// node ts_tool_runner_driver.cjs SPEC_JSON  (NODE_PATH: the install's node_modules)
// The runner gets the loop drivers' three tools: add, fail (always throws) and read_file (a
// file of the workspace); one "assistant" event per message it yields, then one "result".
const fs = require("fs");
const path = require("path");
const Anthropic = require("@anthropic-ai/sdk").default;
const { betaTool } = require("@anthropic-ai/sdk/helpers/beta/json-schema");

const out = (event) => process.stdout.write(JSON.stringify(event) + "\n");
const object = (properties, required) => ({ type: "object", properties, required });

const tools = [
  betaTool({
    name: "add", description: "Add two integers.",
    inputSchema: object({ a: { type: "integer" }, b: { type: "integer" } }, ["a", "b"]),
    run: async ({ a, b }) => String(a + b),
  }),
  betaTool({
    name: "fail", description: "A tool that always fails with the given reason.",
    inputSchema: object({ reason: { type: "string" } }, ["reason"]),
    run: async ({ reason }) => { throw new Error(reason); },
  }),
  betaTool({
    name: "read_file", description: "Read a text file of the workspace.",
    inputSchema: object({ path: { type: "string" } }, ["path"]),
    run: async ({ path: file }) => fs.readFileSync(path.join(process.cwd(), file), "utf8"),
  }),
];

(async () => {
  const spec = JSON.parse(process.argv[2]);
  const client = new Anthropic({
    baseURL: process.env.ANTHROPIC_BASE_URL, apiKey: process.env.ANTHROPIC_API_KEY,
    maxRetries: spec.max_retries, timeout: 60000,
  });
  const params = {
    model: spec.model, max_tokens: 1024, system: spec.system, tools,
    messages: [{ role: "user", content: spec.prompt }], ...spec.options,
  };
  if (spec.max_iterations !== null) params.max_iterations = spec.max_iterations;
  let turns = 0;
  let last = null;
  try {
    for await (const message of client.beta.messages.toolRunner(params)) {
      turns += 1;
      last = message;
      out({ type: "assistant", message });
    }
  } catch (error) {
    out({ type: "result", subtype: "error", is_error: true, num_turns: turns,
          result: `${error && error.name}: ${error && error.message}` });
    process.exit(1);
  }
  const text = last ? last.content.filter((b) => b.type === "text").map((b) => b.text).join("")
    : null;
  out({ type: "result", subtype: "success", is_error: false, num_turns: turns, result: text,
        stop_reason: last ? last.stop_reason : null });
})();
