// The official MCP TypeScript SDK 1.x (npm @modelcontextprotocol/sdk, pinned in package-lock.json)
// as a generic MCP client of the hub, run by tests/mcp_server/test_sdk_typescript.py with the
// machine's Node.js. Given only the endpoint URL it signs in the standard way (the SDK's OAuth
// client: the 401 challenge, protected-resource and authorization-server discovery, dynamic client
// registration, the authorization code with PKCE; the code arrives on a loopback redirect server of
// its own), lists the tools, runs search_knowledge and ask_knowledge, asks for a refund that waits
// for approval and polls resume_invocation until it ends (this SDK speaks the initialize handshake,
// where the hub offers no tasks). Every step is one JSON line on stdout; the exit status is 0 when
// the script ran to its end, 1 on any error (also a JSON line: {"step": "error", ...}).
//
//   node client.mjs --url <hub>/mcp/<route> --refund '{"order_id": ...}' [--timeout 60] [--poll-ms 200]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import {
  MemoryOAuthProvider,
  checkedRedirect,
  commandLine,
  emit,
  emitToken,
  knowledgeSteps,
  loopbackCallback,
  run,
  structured,
  withTimeout,
} from "./shared.mjs";

const INFO = { name: "bailing-suite-ts-sdk1", version: "1.0.0" };

async function signIn(url, provider, callback) {
  try {
    await new Client(INFO).connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    throw new Error("the endpoint answered without asking for a sign-in");
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  // This SDK generation leaves RFC 9207 to the application: checkedRedirect does it.
  const query = checkedRedirect(await callback.wait(), provider);
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await transport.finishAuth(query.get("code"));
  emitToken(provider.tokens());
  const client = new Client(INFO);
  await client.connect(transport);
  return { client, transport };
}

run(async () => {
  const { url, refund, timeoutMs, pollMs } = commandLine();
  emit("start", { node: process.version, url: url.href });
  const callback = await loopbackCallback(timeoutMs);
  const provider = new MemoryOAuthProvider(callback.redirectUri, "Bailing Hub suite (MCP TypeScript SDK 1.x)");
  let client;
  try {
    const session = await withTimeout(signIn(url, provider, callback), timeoutMs, "the sign-in");
    client = session.client;
    emit("connected", {
      protocol_version: session.transport.protocolVersion ?? null,
      server: client.getServerVersion()?.name ?? null,
    });
    await knowledgeSteps(client);

    const asked = await client.callTool({ name: "request_refund", arguments: refund });
    const waiting = structured(asked);
    emit("request_refund", {
      is_error: Boolean(asked.isError),
      state: waiting.state ?? null,
      approval_id: waiting.approval_id ?? null,
      invocation_id: waiting.invocation_id ?? null,
    });
    if (waiting.state !== "awaiting_approval") throw new Error("the refund did not wait for approval");

    // Poll resume_invocation (what the waiting answer tells the client to call) until it ends.
    const deadline = Date.now() + timeoutMs;
    const resume = () =>
      client.callTool({ name: "resume_invocation", arguments: { invocation_id: waiting.invocation_id } });
    let polls = 0;
    let resumed;
    for (;;) {
      resumed = await resume();
      polls += 1;
      if (structured(resumed).state !== "awaiting_approval") break;
      if (polls === 1) emit("resume_waiting", { state: "awaiting_approval" });
      if (Date.now() > deadline) throw new Error("the approval never came");
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
    const done = structured(resumed);
    emit("resume_invocation", { is_error: Boolean(resumed.isError), state: done.state ?? null, polls, structured: done });

    // Asking again returns the recorded outcome; nothing is sent twice.
    const again = await resume();
    emit("resume_again", { is_error: Boolean(again.isError), structured: structured(again) });
    emit("done");
  } finally {
    await client?.close();
    await callback.close();
  }
});
