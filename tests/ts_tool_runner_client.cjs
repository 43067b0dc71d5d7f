// Run the official TypeScript SDK's tool runner (client.beta.messages.toolRunner) once.
// node tests/ts_tool_runner_client.cjs SPEC_JSON  (NODE_PATH: where @anthropic-ai/sdk is)
// Prints one JSON object: each message the runner yielded (id, content, stop_reason) and
// each tool call it ran, in order; the same shape as tool_runner_client.py.
const Anthropic = require("@anthropic-ai/sdk").default;
const { betaTool } = require("@anthropic-ai/sdk/helpers/beta/json-schema");

(async () => {
  const spec = JSON.parse(process.argv[2]);
  const calls = [];
  const add = betaTool({
    name: "add",
    description: "Add two integers.",
    inputSchema: {
      type: "object",
      properties: { a: { type: "integer" }, b: { type: "integer" } },
      required: ["a", "b"],
    },
    run: async ({ a, b }) => {
      calls.push(["add", a, b]);
      await new Promise((done) => setTimeout(done, (spec.tool_seconds || 0) * 1000));
      return String(a + b);
    },
  });
  const client = new Anthropic({
    baseURL: spec.url, apiKey: "sk-loopprobe", maxRetries: spec.max_retries ?? 2, timeout: 30000,
  });
  const params = {
    model: "claude-sonnet-4-5", max_tokens: 2048, system: "You add numbers.", tools: [add],
    messages: [{ role: "user", content: spec.prompt }],
  };
  if (spec.stream) params.stream = true;
  if ("thread" in spec) params.thread = spec.thread;
  if (spec.thinking) params.thinking = { type: "enabled", budget_tokens: 1024 };
  const messages = [];
  for await (const item of client.beta.messages.toolRunner(params)) {
    const message = spec.stream ? await item.finalMessage() : item;
    messages.push({ id: message.id, stop_reason: message.stop_reason, content: message.content });
  }
  console.log(JSON.stringify({ messages, calls }));
})().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
