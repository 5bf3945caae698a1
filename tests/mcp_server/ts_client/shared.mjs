// What both TypeScript clients of the suite share and no SDK provides: the JSON-lines output, bounded
// waits, the loopback redirect server, and an in-memory OAuthClientProvider (both SDK generations
// call the same provider methods) that registers dynamically — no clientMetadataUrl, so never a
// Client ID Metadata Document.
import http from "node:http";
import { parseArgs } from "node:util";

export const SCOPE = "knowledge:read tools:read tools:call";
export const PAGE_TEXT = "The TypeScript MCP client is signed in.";

export function commandLine() {
  const { values } = parseArgs({
    options: {
      url: { type: "string" },
      refund: { type: "string" },
      timeout: { type: "string", default: "60" },
      "poll-ms": { type: "string", default: "200" },
    },
  });
  return {
    url: new URL(values.url),
    refund: JSON.parse(values.refund),
    timeoutMs: Number(values.timeout) * 1000,
    pollMs: Number(values["poll-ms"]),
  };
}

export function emit(step, fields = {}) {
  process.stdout.write(`${JSON.stringify({ step, ...fields })}\n`);
}

export function withTimeout(promise, timeoutMs, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/** A one-shot http://127.0.0.1:<port>/callback listener; resolves with the redirect's query. */
export async function loopbackCallback(timeoutMs) {
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
    response.end(`<!doctype html><title>Signed in</title><p>${PAGE_TEXT}</p>`);
    deliver(url.searchParams);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    redirectUri: `http://127.0.0.1:${port}/callback`,
    wait: () => withTimeout(arrived, timeoutMs, "the authorization redirect"),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** The OAuthClientProvider of one run, in memory. */
export class MemoryOAuthProvider {
  constructor(redirectUri, clientName) {
    this.redirectUri = redirectUri;
    this.clientName = clientName;
    this.information = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.expectedState = undefined;
    this.discovery = undefined;
  }
  get redirectUrl() {
    return this.redirectUri;
  }
  get clientMetadata() {
    return {
      client_name: this.clientName,
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

/** The redirect's query checked as a client must: no error, our state; RFC 9207's `iss` where the
 * authorization server's metadata says it sends one, and when sent it must be the discovered issuer.
 * Emits the `redirected` step; returns the query. */
export function checkedRedirect(query, provider) {
  if (query.get("error")) throw new Error(`the sign-in was refused: ${query.get("error")}`);
  if (query.get("state") !== provider.expectedState) throw new Error("the redirect's state does not match");
  const metadata = provider.discoveryState()?.authorizationServerMetadata ?? {};
  const issRequired = metadata.authorization_response_iss_parameter_supported === true;
  const issuer = query.get("iss");
  if (issRequired && issuer === null) throw new Error("the redirect carries no iss");
  if (issuer !== null && issuer !== metadata.issuer) throw new Error("the redirect's iss is not the issuer");
  emit("redirected", { has_code: Boolean(query.get("code")), iss: issuer, iss_required: issRequired });
  return query;
}

export function emitToken(tokens) {
  emit("token", {
    token_type: tokens.token_type,
    scope: tokens.scope ?? null,
    refresh: Boolean(tokens.refresh_token),
  });
}

export function structured(result) {
  return result.structuredContent ?? {};
}

/** The knowledge steps both clients run: emits `tools`, `search_knowledge`, `ask_knowledge`. */
export async function knowledgeSteps(client) {
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
}

/** Runs `main` and exits: 0 when it ran to its end, 1 after an `error` step. */
export function run(main) {
  main().then(
    () => process.exit(0),
    (error) => {
      emit("error", { name: error?.name ?? "Error", message: String(error?.message ?? error) });
      process.exit(1);
    },
  );
}
