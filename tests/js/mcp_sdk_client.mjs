// Drives a toolguard MCP server with the official TypeScript MCP SDK client over stdio.
//
// Usage: node mcp_sdk_client.mjs <server-binary>
//
// `listTools` parses the list with the SDK's own schema validation (every property schema must be
// an object) and compiles each output schema with its Ajv validator on the first `callTool`. The
// script prints one JSON document with what it saw; the Rust test (`tests/mcp_sdk.rs`) asserts on
// it. Any SDK error makes the script exit non-zero with the error on stderr.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const server = process.argv[2];
if (!server) {
  console.error("usage: node mcp_sdk_client.mjs <server-binary>");
  process.exit(2);
}

const transport = new StdioClientTransport({
  command: server,
  args: [],
  env: {
    ...process.env,
    TOOLGUARD_TENANT: "tenant-a",
    TOOLGUARD_SUBJECT: "alice",
    TOOLGUARD_ROLES: "user",
  },
  stderr: "inherit",
});
const client = new Client({ name: "toolguard-sdk-test", version: "1.0.0" });
await client.connect(transport);

const listed = await client.listTools();

// The model-facing JSON of a result (its single text block).
const payload = (result) => JSON.parse(result.content[0].text);

const balance = await client.callTool({
  name: "get_balance",
  arguments: { account: "ACC001" },
});

const scheduled = await client.callTool({
  name: "schedule_payment",
  arguments: {
    from_account: "ACC001",
    payee: { name: "Dana Scully", account: "ACC002" },
    amount: 2500,
    frequency: "monthly",
    tags: ["rent", "flat"],
    metadata: { source: "sdk-test", ids: [1, 2, 3], nested: { ok: true } },
  },
});

const invalid = await client.callTool({
  name: "get_balance",
  arguments: { account: "ACC 001; DROP" },
});

let unknown = null;
try {
  await client.callTool({ name: "drop_tables", arguments: {} });
} catch (error) {
  unknown = { code: error.code, message: String(error.message) };
}

console.log(
  JSON.stringify({
    server: client.getServerVersion(),
    tools: listed.tools,
    balance: {
      isError: balance.isError ?? false,
      structuredContent: balance.structuredContent ?? null,
      payload: payload(balance),
    },
    scheduled: {
      isError: scheduled.isError ?? false,
      structuredContent: scheduled.structuredContent ?? null,
      payload: payload(scheduled),
    },
    invalid: { isError: invalid.isError ?? false, payload: payload(invalid) },
    unknown,
  }),
);
await client.close();
