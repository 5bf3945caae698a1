// The official MCP TypeScript SDK (npm @modelcontextprotocol/sdk, pinned in package-lock.json) as a
// generic MCP client of the hub, run by tests/mcp_server/test_sdk_typescript.py with the machine's
// Node.js. Given only the endpoint URL it signs in the standard way (the SDK's OAuth client: the 401
// challenge, protected-resource and authorization-server discovery, dynamic client registration, the
// authorization code with PKCE; the code arrives on a loopback redirect server of its own), lists the
// tools, runs search_knowledge and ask_knowledge, asks for a refund that waits for approval and polls
// resume_invocation until it ends. Every step is one JSON line on stdout; the exit status is 0 when
// the script ran to its end, 1 on any error (also a JSON line: {"step": "error", ...}).
//
//   node client.mjs --url <hub>/mcp/<route> --refund '{"order_id": ...}' [--timeout 60]
import http from "node:http";
import { parseArgs } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { values: options } = parseArgs({
  options: {
    url: { type: "string" },
    refund: { type: "string" },
    timeout: { type: "string", default: "60" },
    "poll-ms": { type: "string", default: "200" },
  },
});
const TIMEOUT_MS = Number(options.timeout) * 1000;
const POLL_MS = Number(options["poll-ms"]);
const SCOPE = "knowledge:read tools:read tools:call";

function emit(step, fields = {}) {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

function withTimeout(promise, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), TIMEOUT_MS);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** A one-shot http://127.0.0.1:<port>/callback listener for the authorization redirect. */
async function loopbackCallback() {
  let deliver;
  const arrived = new Promise((resolve) => {
    deliver = resolve;
  });
  const server = http.createServer((request, response) => {
    const url = new URL(request.url, "http://127.0.0.1");
    if (url.pathname !== "/callback") {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "Content-Type": "text/html; charset=utf-8" });
    response.end("<!doctype html><title>Signed in</title><p>The TypeScript MCP client is signed in.</p>");
    deliver(Object.fromEntries(url.searchParams));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    redirectUri: `http://127.0.0.1:${port}/callback`,
    wait: () => withTimeout(arrived, "the authorization redirect"),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** The SDK's OAuthClientProvider, in memory for this run: registers itself dynamically (no
 * clientMetadataUrl, so never a Client ID Metadata Document) with the loopback redirect. */
class MemoryOAuthProvider {
  constructor(redirectUri) {
    this.redirectUri = redirectUri;
    this.information = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.expectedState = undefined;
    this.authorizationUrl = undefined;
    this.discovery = undefined;
  }
  get redirectUrl() {
    return this.redirectUri;
  }
  get clientMetadata() {
    return {
      client_name: "Bailing Hub suite (MCP TypeScript SDK)",
      redirect_uris: [this.redirectUri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      scope: SCOPE,
    };
  }
  state() {
    this.expectedState = crypto.randomUUID();
    return this.expectedState;
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information) {
    this.information = information;
    emit("registered", { client_id: information.client_id });
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    // What a desktop client would open in the browser; the test drives the consent page.
    this.authorizationUrl = url;
    emit("authorize", { url: url.href });
  }
  saveDiscoveryState(state) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
  saveCodeVerifier(verifier) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
}

function structured(result) {
  return result.structuredContent ?? {};
}

async function signIn(url, provider, callback) {
  const client = new Client({ name: "bailing-suite-ts", version: "1.0.0" });
  try {
    await client.connect(new StreamableHTTPClientTransport(url, { authProvider: provider }));
    throw new Error("the endpoint answered without asking for a sign-in");
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  const query = await callback.wait();
  if (query.error) throw new Error(`the sign-in was refused: ${query.error}`);
  if (query.state !== provider.expectedState) throw new Error("the redirect's state does not match");
  // RFC 9207 (this SDK version leaves it to the application): an authorization server whose
  // metadata says it sends `iss` must send it, and an `iss` that is sent must be the discovered issuer.
  const metadata = provider.discoveryState()?.authorizationServerMetadata ?? {};
  const issRequired = metadata.authorization_response_iss_parameter_supported === true;
  const issuer = query.iss ?? null;
  if (issRequired && issuer === null) throw new Error("the redirect carries no iss");
  if (issuer !== null && issuer !== metadata.issuer) throw new Error("the redirect's iss is not the issuer");
  emit("redirected", { has_code: Boolean(query.code), iss: issuer, iss_required: issRequired });
  const transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
  await transport.finishAuth(query.code);
  const tokens = provider.tokens();
  emit("token", { token_type: tokens.token_type, scope: tokens.scope ?? null, refresh: Boolean(tokens.refresh_token) });
  const signedIn = new Client({ name: "bailing-suite-ts", version: "1.0.0" });
  await signedIn.connect(transport);
  return { client: signedIn, transport };
}

async function main() {
  const url = new URL(options.url);
  const refund = JSON.parse(options.refund);
  emit("start", { node: process.version, url: url.href });
  const callback = await loopbackCallback();
  const provider = new MemoryOAuthProvider(callback.redirectUri);
  let client;
  try {
    const session = await withTimeout(signIn(url, provider, callback), "the sign-in");
    client = session.client;
    emit("connected", {
      protocol_version: session.transport.protocolVersion ?? null,
      server: client.getServerVersion()?.name ?? null,
    });

    const { tools } = await client.listTools();
    emit("tools", { names: tools.map((tool) => tool.name) });

    const search = await client.callTool({ name: "search_knowledge", arguments: { query: "refund", limit: 2 } });
    const results = structured(search).results ?? [];
    emit("search_knowledge", {
      is_error: Boolean(search.isError),
      count: results.length,
      document_ids: results.map((hit) => hit.document_id),
    });

    const ask = await client.callTool({ name: "ask_knowledge", arguments: { query: "How do refunds work?" } });
    emit("ask_knowledge", {
      is_error: Boolean(ask.isError),
      sources: (structured(ask).sources ?? []).length,
      cites: /\[\d+\]/.test(ask.content?.[0]?.text ?? ""),
    });

    const asked = await client.callTool({ name: "request_refund", arguments: refund });
    const waiting = structured(asked);
    emit("request_refund", {
      is_error: Boolean(asked.isError),
      state: waiting.state ?? null,
      approval_id: waiting.approval_id ?? null,
      invocation_id: waiting.invocation_id ?? null,
    });
    if (waiting.state !== "awaiting_approval") throw new Error(`the refund did not wait for approval`);

    // Poll resume_invocation (what the waiting answer tells the client to call) until it ends.
    const deadline = Date.now() + TIMEOUT_MS;
    let polls = 0;
    let resumed;
    for (;;) {
      resumed = await client.callTool({
        name: "resume_invocation",
        arguments: { invocation_id: waiting.invocation_id },
      });
      polls += 1;
      if (structured(resumed).state !== "awaiting_approval") break;
      if (polls === 1) emit("resume_waiting", { state: "awaiting_approval" });
      if (Date.now() > deadline) throw new Error("the approval never came");
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const done = structured(resumed);
    emit("resume_invocation", { is_error: Boolean(resumed.isError), state: done.state ?? null, polls, structured: done });

    // Asking again returns the recorded outcome; nothing is sent twice.
    const again = await client.callTool({
      name: "resume_invocation",
      arguments: { invocation_id: waiting.invocation_id },
    });
    emit("resume_again", { is_error: Boolean(again.isError), structured: structured(again) });
    emit("done");
  } finally {
    await client?.close();
    await callback.close();
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    emit("error", { name: error?.name ?? "Error", message: String(error?.message ?? error) });
    process.exit(1);
  },
);
