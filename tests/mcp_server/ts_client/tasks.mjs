// The official MCP TypeScript SDK 2.x (npm @modelcontextprotocol/client) with the tasks extension's
// own client (npm @modelcontextprotocol/ext-tasks), both pinned in package-lock.json, as a client of
// the hub on the 2026-07-28 wire: signs in by dynamic registration like client.mjs (this SDK checks
// RFC 9207's iss itself in finishAuth), lists the tools, runs both knowledge tools, then calls
// request_refund through an ext-tasks session: the hub answers with a task, the session polls
// tasks/get at the task's pollIntervalMs until the approver's decision has been carried out, and the
// outcome is the CallToolResult. Each task status seen is a JSON line ({"step": "task", ...}).
//
// ext-tasks sends the 2026-07-28 task traffic (tools/call declaring the extension, tasks/*) through a
// raw dispatch the host supplies, because the SDK's own codecs do not carry those shapes; here that
// is one JSON-RPC POST with the signed-in bearer and the per-request headers of that wire.
//
//   node tasks.mjs --url <hub>/mcp/<route> --refund '{"order_id": ...}' [--timeout 60]
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient, resultFromTaskOutcome } from "@modelcontextprotocol/ext-tasks/client";

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

const INFO = { name: "bailing-suite-ts-sdk2", version: "1.0.0" };
const OPTIONS = { versionNegotiation: { mode: "auto" } };

async function signIn(url, provider, callback) {
  try {
    await new Client(INFO, OPTIONS).connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    throw new Error("the endpoint answered without asking for a sign-in");
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  const query = checkedRedirect(await callback.wait(), provider);
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await transport.finishAuth(query); // the SDK validates code and iss from the callback's query
  emitToken(provider.tokens());
  const client = new Client(INFO, OPTIONS);
  await client.connect(transport);
  return client;
}

/** The raw dispatch ext-tasks asks for: one JSON-RPC request over HTTP POST, answered in JSON. */
function rawDispatcher(url, provider, protocolVersion) {
  let nextId = 1;
  return async (request, options = {}) => {
    const message = { jsonrpc: "2.0", id: `tasks-${nextId++}`, ...request };
    const params = message.params ?? {};
    const name = message.method === "tools/call" ? params.name : params.taskId;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      Authorization: `Bearer ${provider.tokens().access_token}`,
      "MCP-Protocol-Version": protocolVersion,
      "Mcp-Method": message.method,
      ...(typeof name === "string" ? { "Mcp-Name": name } : {}),
      ...(options.context?.headers ?? {}),
    };
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(message),
      signal: options.signal,
    });
    const body = await response.json();
    emit("dispatch", {
      method: message.method,
      http_status: response.status,
      result_type: body.result?.resultType ?? null,
      status: body.result?.status ?? null,
      error: body.error?.code ?? null,
    });
    return "error" in body ? { kind: "error", error: body.error } : { kind: "result", result: body.result };
  };
}

run(async () => {
  const { url, refund, timeoutMs } = commandLine();
  emit("start", { node: process.version, url: url.href });
  const callback = await loopbackCallback(timeoutMs);
  const provider = new MemoryOAuthProvider(callback.redirectUri, "Bailing Hub suite (MCP TypeScript SDK 2.x)");
  let client;
  let session;
  try {
    client = await withTimeout(signIn(url, provider, callback), timeoutMs, "the sign-in");
    const protocolVersion = client.getNegotiatedProtocolVersion();
    emit("connected", {
      protocol_version: protocolVersion ?? null,
      era: client.getProtocolEra() ?? null,
      tasks_extension: client.getServerCapabilities()?.extensions?.["io.modelcontextprotocol/tasks"] ?? null,
    });
    await knowledgeSteps(client);

    session = createTaskSessionFromClient(client, {
      endpointId: url.href,
      rawDispatch: rawDispatcher(url, provider, protocolVersion),
      v2RequestFraming: { protocolVersion, clientInfo: INFO, clientCapabilities: {} },
    });
    const execution = await session.callTool("request_refund", refund);
    emit("request_refund", { kind: execution.kind, task_id: execution.handle?.taskId ?? null });
    if (execution.kind !== "task") throw new Error("the refund was answered at once, not as a task");

    const { outcome } = await withTimeout(
      execution.settle({
        onEvent: (event) => {
          if (event.type === "task") {
            emit("task", {
              task_id: event.task.taskId,
              status: event.task.status,
              status_message: event.task.statusMessage ?? null,
              poll_interval_ms: event.task.suggestedPollIntervalMs ?? event.task.pollInterval ?? null,
            });
          }
        },
      }),
      timeoutMs,
      "the task to end",
    );
    const result = resultFromTaskOutcome(outcome);
    emit("task_outcome", { status: outcome.status, is_error: Boolean(result.isError), structured: structured(result) });
    emit("done");
  } finally {
    await session?.close();
    await client?.close();
    await callback.close();
  }
});
