// jin's HTTP API, as the page uses it. Errors are problem documents: ApiError keeps their code.
import { SSEParser } from "./sse.js";

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail || code || `HTTP ${status}`);
    this.status = status;
    this.code = code || `http_${status}`;
  }
}

export class Api {
  constructor(getKey) {
    this.getKey = getKey;
  }

  headers(extra = {}) {
    const key = this.getKey();
    return key ? { Authorization: `Bearer ${key}`, ...extra } : extra;
  }

  async request(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (err) {
      throw new ApiError(0, "unreachable", `jin did not answer (${err.message})`);
    }
    if (response.status === 204) return null;
    const data = await response.json().catch(() => null);
    if (!response.ok) throw new ApiError(response.status, data?.code, data?.detail);
    return data;
  }

  get(path) { return this.request("GET", path); }
  post(path, body = {}) { return this.request("POST", path, body); }
  patch(path, body) { return this.request("PATCH", path, body); }
  delete(path) { return this.request("DELETE", path); }

  // Run a step and hand each event to onEvent as it arrives. Resolves when the stream ends.
  async step(chatId, content, onEvent, signal) {
    const response = await fetch(`/v1/chats/${chatId}/messages`, {
      method: "POST",
      headers: this.headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ content, idempotency_key: crypto.randomUUID() }),
      signal,
    });
    if (!response.ok) {
      const data = await response.json().catch(() => null);
      throw new ApiError(response.status, data?.code, data?.detail);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const event of parser.feed(value)) onEvent(event);
    }
  }
}
