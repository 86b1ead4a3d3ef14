// The rows of a chat as the page shows them: messages, summary and "start over" lines, the
// memory actions of an answer, and the answer that is streaming now.
import { h, formatMs, formatNumber } from "./dom.js";
import { renderMarkdown } from "./markdown.js";

// What the page measured, for bench/page.py and the tests: chunks seen, frames drawn, time.
export const stats = { chunks: 0, chars: 0, renders: 0, renderMs: 0 };

const WHO = { user: "you", assistant: "jin", tool: "tool", system: "system" };
const STATUS_NOTE = {
  interrupted: "stopped",
  failed: "failed",
  streaming: "still running, or cut off",
};

export function rowElement(row, onRetry) {
  if (row.kind === "summary") return summaryLine(row);
  if (row.kind === "marker") return h("div", { class: "line marker", dataset: ids(row) },
    row.content || "marker");
  const node = messageShell(row.kind, ids(row));
  const view = new MessageView(node);
  view.fill(row, onRetry);
  return node;
}

function ids(row) {
  return { id: row.id, position: String(row.position), kind: row.kind };
}

export function summaryLine(row) {
  const meta = row.meta || {};
  const reset = Boolean(meta.reset);
  const label = reset
    ? "started over here: the model sees nothing above this line"
    : `earlier conversation summarised: ${formatNumber(meta.messages ?? 0)} messages`;
  const body = reset
    ? h("p", { class: "quiet" }, "An empty summary: nothing before this line reaches the model.")
    : h("div", { class: "md" }, renderMarkdown(row.content));
  const facts = reset ? null : summaryFacts(meta, row);
  return h("details", { class: `line ${reset ? "reset" : "summary"}`, dataset: ids(row) },
    h("summary", {}, label), body, facts);
}

function summaryFacts(meta, row) {
  const v = meta.verification || {};
  const parts = [
    meta.covers && `covers positions ${meta.covers[0]}–${meta.covers[1]}`,
    `${formatNumber(row.token_count)} tokens`,
    meta.helper_model ? `by ${meta.helper_model}` : meta.fallback ? "extractive (helper down)" : null,
    v.coverage !== undefined && `verified coverage ${(v.coverage * 100).toFixed(0)}%`,
  ];
  return h("p", { class: "quiet" }, parts.filter(Boolean).join(" · "));
}

function messageShell(kind, dataset) {
  return h("article", { class: `msg ${kind}`, dataset },
    h("div", { class: "who" }, WHO[kind] || kind),
    h("div", { class: "body" }));
}

// One message's element, filled from a stored row or chunk by chunk from a stream.
export class MessageView {
  constructor(node) {
    this.node = node;
    this.body = node.querySelector(".body");
    this.text = "";
    this.reasoning = "";
    this.brain = "";  // the brain's own words, when its answer is translated back
    this.pending = false;
  }

  static create(kind) {
    return new MessageView(messageShell(kind, { kind, live: "" }));
  }

  fill(row, onRetry) {
    this.text = row.content;
    this.reasoning = row.reasoning || "";
    this.brain = row.meta?.answer_translation?.source || "";
    for (const action of row.meta?.actions || []) this.action(action);
    this.draw();
    if (row.status === "failed") this.error("failed", "the answer failed", onRetry);
    const loop = row.meta?.loop;
    if (loop) this.error("loop_detected", loopText(loop), onRetry, loop.preview);
    this.end(row.status, row.usage);
  }

  addThinking(chunk) {
    this.reasoning += chunk;
    this.schedule();
  }

  // JIN_TRANSLATE_ANSWER: the brain's words stream first; the translation is the message.
  addBrain(chunk) {
    this.brain += chunk;
    this.schedule();
  }

  addChunk(chunk) {
    this.text += chunk;
    stats.chars += chunk.length;
    this.schedule();
  }

  // Chunks arrive faster than frames: draw at most once a frame, from all the text so far.
  schedule() {
    stats.chunks++;
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.draw();
    });
  }

  draw() {
    const started = performance.now();
    const stick = atBottom(this.node.parentElement);
    if (this.reasoning) this.reasoningBlock().querySelector(".reasoning-text").textContent =
      this.reasoning;
    if (this.brain) this.brainBlock().querySelector(".brain-text").textContent = this.brain;
    if (this.text || this.body.querySelector(".content")) {
      this.contentBlock().replaceChildren(renderMarkdown(this.text));
      for (const live of this.body.querySelectorAll("details[data-live]")) {
        live.open = false;
        delete live.dataset.live;
      }
    }
    if (stick) toBottom(this.node.parentElement);
    stats.renders++;
    stats.renderMs += performance.now() - started;
  }

  reasoningBlock() {
    let block = this.body.querySelector(".reasoning:not(.brain)");
    if (!block) {
      const live = this.node.dataset.live !== undefined && !this.text;
      block = h("details", { class: "reasoning", open: live, dataset: live ? { live: "" } : {} },
        h("summary", {}, "reasoning"), h("div", { class: "reasoning-text" }));
      this.body.prepend(block);
    }
    return block;
  }

  // Open while the brain writes (the translation comes once it is done), folded after.
  brainBlock() {
    let block = this.body.querySelector(".brain");
    if (!block) {
      const live = this.node.dataset.live !== undefined && !this.text;
      const mark = live ? { live: "" } : {};
      block = h("details", { class: "reasoning brain", open: live, dataset: mark },
        h("summary", {}, "the brain's answer, before its translation"),
        h("div", { class: "reasoning-text brain-text" }));
      this.body.insertBefore(block, this.body.querySelector(".content, .error, .note"));
    }
    return block;
  }

  contentBlock() {
    let block = this.body.querySelector(".content");
    if (!block) {
      block = h("div", { class: "content md" });
      const errorLine = this.body.querySelector(".error");
      this.body.insertBefore(block, errorLine || this.body.querySelector(".note"));
    }
    return block;
  }

  action(data) {
    const verb = { remember: "remembered", forget: "forgot", web_search: "searched",
      save_session: "saved session" }[data.action] || data.action;
    const result = data.result ? ` ${data.result}` : "";
    // A runtime action (a web search) streams `started`, then `done` or `failed`: one line.
    const key = data.via ? data.id : null;
    const line = h("div", { class: "action", title: data.id || "", dataset: key ? { key } : {} },
      h("span", { class: "verb" }, verb), " ", data.text || data.id || "",
      h("span", { class: "quiet" },
        ` · ${data.status}${result}${data.error ? `: ${data.error}` : ""}`));
    let list = this.body.querySelector(".actions");
    if (!list) {
      list = h("div", { class: "actions" });
      this.body.insertBefore(list, this.body.querySelector(".content, .error, .note"));
    }
    const earlier = key && [...list.children].find((l) => l.dataset.key === key);
    if (earlier) earlier.replaceWith(line);
    else list.append(line);
  }

  // An error under the answer, with a retry; a loop's error quotes what repeated.
  error(code, text, onRetry, preview) {
    this.body.querySelector(".error")?.remove();
    const retry = onRetry && h("button", { class: "retry", type: "button", onclick: onRetry },
      "retry");
    this.body.insertBefore(
      h("div", { class: "error", role: "alert" }, h("code", {}, code), " ", text, " ", retry,
        preview ? h("blockquote", { class: "preview", title: "the repeated text" }, preview)
          : null),
      this.body.querySelector(".note, .telemetry"));
  }

  // The step's time and tokens per node (the `telemetry` event), folded under the answer.
  telemetry(t) {
    this.body.querySelector(".telemetry")?.remove();
    const row = (name, ms, n = {}) => h("tr", { dataset: { node: name } },
      h("td", {}, name), h("td", { class: "num ms" }, formatMs(ms)),
      h("td", { class: "num in" }, formatNumber(n.prompt_tokens)),
      h("td", { class: "num out" }, formatNumber(n.completion_tokens)));
    this.body.append(h("details", { class: "telemetry" },
      h("summary", {}, `step ${formatMs(t.total_ms)}: ` +
        t.nodes.map((n) => `${n.node} ${formatMs(n.ms)}`).join(", ")),
      h("table", {},
        h("thead", {}, h("tr", {}, ["node", "time", "in", "out"].map((k) => h("th", {}, k)))),
        h("tbody", {}, t.nodes.map((n) => row(n.node, n.ms, n)),
          row("overhead", t.overhead_ms), row("total", t.total_ms)))));
  }

  end(status, usage) {
    this.draw();
    this.node.dataset.status = status || "";
    this.body.querySelector(".note")?.remove();
    const parts = [STATUS_NOTE[status]];
    if (usage?.completion_tokens !== undefined && this.node.classList.contains("assistant")) {
      const n = usage.completion_tokens;
      parts.push(`${formatNumber(n)} ${n === 1 ? "token" : "tokens"}`);
    }
    const note = parts.filter(Boolean).join(" · ");
    if (note) this.body.insertBefore(h("div", { class: "note" }, note),
      this.body.querySelector(".telemetry"));
  }
}

function loopText(loop) {
  return `the ${loop.where || "answer"} began to repeat itself (${loop.rule}: ` +
    `${loop.repeats} times in a row); the model was stopped`;
}

export function atBottom(scroller) {
  return !scroller || scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 48;
}

export function toBottom(scroller) {
  if (scroller) scroller.scrollTop = scroller.scrollHeight;
}
