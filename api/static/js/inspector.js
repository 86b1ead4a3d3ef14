// The context inspector: what the next step would send, section by section, against the
// budget; what recall found and its scores; what compaction decided last and will do next.
import { h, clear, formatMs, formatNumber } from "./dom.js";

const LABELS = {
  system: "system prompt", head: "first exchange", summary: "summary", history: "older history",
  tail: "tail", memory: "recalled memory", recovery: "recovery note", new_message: "new message",
};
// Each search's own measure and its rank in that list (cosine similarity; BM25), what rank
// fusion made of them, then recency, weight and the total the fence is ordered by.
const SCORES = ["dense", "dense_rank", "keyword", "keyword_rank", "fused", "recency", "weight",
  "total"];
const HEADS = { dense_rank: "#", keyword_rank: "#" };

export class Inspector {
  constructor(api, node) {
    this.api = api;
    this.node = node;
    this.context = null;
  }

  async load(chatId, draft) {
    if (!chatId) return clear(this.node).append(h("p", { class: "quiet" }, "No chat open."));
    const params = new URLSearchParams();
    if (draft && draft.length <= 4000) params.set("message", draft);
    const context = await this.api.get(`/v1/chats/${chatId}/context?${params}`);
    this.context = context;
    clear(this.node).append(
      overview(context), sectionList(context), translation(context), recalled(context),
      compaction(context));
    return context;
  }
}

function percent(part, whole) {
  return whole ? Math.min(100, (100 * part) / whole) : 0;
}

function overview(context) {
  const { budget, total_tokens: total } = context;
  const bar = h("div", { class: "bar stacked", role: "img",
    "aria-label": `${total} of ${budget.total} tokens` });
  for (const s of context.sections) {
    if (s.tokens) bar.append(h("span", { class: `seg s-${s.name}`, title: `${s.name}: ${s.tokens}`,
      style: { width: `${percent(s.tokens, budget.total)}%` } }));
  }
  bar.append(trigger(budget));
  return h("section", { class: "overview" },
    h("h3", {}, "Next step"),
    h("p", {}, `${formatNumber(total)} of ${formatNumber(budget.total)} tokens `,
      h("span", { class: "quiet" },
        `(${percent(total, budget.total).toFixed(0)}%; window ${formatNumber(budget.context_window)}` +
        `, ${formatNumber(budget.answer_reserve)} kept for the answer; compacts at ` +
        `${formatNumber(budget.trigger)})`)),
    bar,
    context.left_out ? h("p", { class: "warn" },
      `${context.left_out} older rows do not fit and are left out.`) : null);
}

function trigger(budget) {
  return h("span", { class: "trigger", title: `compaction trigger: ${budget.trigger} tokens`,
    style: { left: `${percent(budget.trigger, budget.total)}%` } });
}

// One row per section: its bar against the budget, and its exact text on demand.
function sectionList(context) {
  const list = h("ol", { class: "sections" });
  let offset = 0;
  for (const s of context.sections) {
    const messages = context.messages.slice(offset, offset + s.messages);
    offset += s.messages;
    list.append(sectionRow(s, messages, context.budget));
  }
  return h("section", {}, h("h3", {}, "Sections"), list);
}

function sectionRow(section, messages, budget) {
  const label = LABELS[section.name] || section.name;
  const text = h("div", { class: "section-text", hidden: true });
  // The system section is the chat's system prompt snapshot, as every step sends it.
  const none = section.name === "system" ? "this chat has no system prompt" : "empty";
  const toggle = h("button", { type: "button", class: "link", disabled: !messages.length,
    title: messages.length ? "the exact text" : none, "aria-expanded": "false", onclick: () => {
      if (!text.childElementCount) text.append(...messages.map(promptMessage));
      text.hidden = !text.hidden;
      toggle.setAttribute("aria-expanded", String(!text.hidden));
      toggle.textContent = text.hidden ? "text" : "hide";
    } }, "text");
  return h("li", { class: "section", dataset: { name: section.name } },
    h("div", { class: "section-head" },
      h("span", { class: "name" }, label),
      h("span", { class: "tokens" }, `${formatNumber(section.tokens)} tok`),
      h("span", { class: "quiet" }, `${section.messages} msg`), toggle),
    h("div", { class: "bar", role: "meter", "aria-label": `${label} tokens`,
      "aria-valuemin": "0", "aria-valuemax": String(budget.total),
      "aria-valuenow": String(section.tokens) },
      h("span", { class: `fill s-${section.name}`,
        style: { width: `${percent(section.tokens, budget.total)}%` } }), trigger(budget)),
    text);
}

function promptMessage(m) {
  const body = m.tool_calls ? `${m.content || ""}\n${JSON.stringify(m.tool_calls, null, 2)}`
    : typeof m.content === "string" ? m.content : JSON.stringify(m.content, null, 2);
  return h("div", { class: "prompt-message" },
    h("div", { class: "role" }, m.role, m.tool_call_id ? ` · ${m.tool_call_id}` : ""),
    h("pre", {}, body));
}

// The planner's route, and what the translator made of the newest translated user message:
// the brain read that English text, not the user's words (the system prompt and every other
// section's text are in the section list above).
function translation(context) {
  const route = (context.route || []).join(" → ");
  const t = context.translation;
  const head = h("h3", {}, "Translation");
  const about = h("p", { class: "quiet route" }, `route: ${route || "–"}`);
  if (!t) return h("section", { class: "translation" }, head, about,
    h("p", { class: "quiet" }, "The newest message went to the brain in the user's words."));
  const usage = t.usage || {};
  return h("section", { class: "translation" }, head, about,
    h("p", { class: "quiet" }, `translated to ${t.target || "en"} in ${formatMs(t.ms)}` +
      (usage.prompt_tokens !== undefined
        ? `, ${formatNumber(usage.prompt_tokens)} in, ${formatNumber(usage.completion_tokens)} out`
        : "")),
    h("details", { class: "translator-text" }, h("summary", {}, "translator's text"),
      h("div", { class: "role" }, "the user wrote"), h("pre", { class: "original" }, t.source),
      h("div", { class: "role" }, "the brain read"), h("pre", { class: "translated" }, t.text)));
}

function recalled(context) {
  const recall = context.recall || {};
  const head = h("h3", {}, "Recalled");
  if (!recall.enabled) return h("section", {}, head, h("p", { class: "quiet" }, "Recall is off."));
  const about = [recall.mode && `mode ${recall.mode}`,
    recall.candidates !== undefined && `${recall.candidates} candidates`,
    recall.query && `for “${recall.query.slice(0, 80)}”`].filter(Boolean).join(" · ");
  const items = context.recalled;
  const table = items.length ? h("table", { class: "recalled" },
    h("thead", {}, h("tr", {}, h("th", {}, "item"), SCORES.map((k) => h("th", {}, HEADS[k] || k)))),
    h("tbody", {}, items.map(recalledRow))) : h("p", { class: "quiet" }, "Nothing recalled.");
  return h("section", {}, head, h("p", { class: "quiet" }, about),
    recall.error ? h("p", { class: "warn" }, recall.error) : null, table);
}

function recalledRow(item) {
  return h("tr", { class: "recalled-item", dataset: { id: item.id } },
    h("td", { title: item.text },
      h("span", { class: "source" }, item.source === "fact" ? "fact" : item.role || item.source),
      " ", item.text.length > 160 ? `${item.text.slice(0, 160)}…` : item.text),
    SCORES.map((k) => h("td", { class: `num ${k}` }, score(k, item.scores?.[k]))));
}

function score(name, value) {
  if (value === undefined || value === null) return "–";  // not in that list
  return name.endsWith("_rank") ? String(value) : Number(value).toFixed(3);
}

function compaction(context) {
  const c = context.compaction || {};
  const rows = [];
  if (!c.enabled) rows.push(h("p", { class: "quiet" }, "Compaction is off."));
  else rows.push(h("p", { class: "decision" },
    h("strong", {}, c.next === "compact" ? "would compact" : "would not compact"),
    ` (${c.reason})`));
  const state = c.state || {};
  rows.push(h("p", { class: "quiet" }, `${state.passes ?? 0} passes · ` +
    `${state.helper_calls ?? 0} helper calls · ${state.helper_failures ?? 0} failures in a row`));
  if (context.summary) rows.push(lastSummary(context.summary));
  return h("section", {}, h("h3", {}, "Compaction"), rows);
}

function lastSummary(row) {
  const meta = row.meta || {};
  if (meta.reset) return h("p", {}, "Last: a start-over line; nothing before it is sent.");
  const v = meta.verification || {};
  const missing = (v.missing || []).map((m) => h("li", {}, `${m.kind}: ${m.text}`));
  return h("div", { class: "last-summary" },
    h("p", {}, `Last pass: ${meta.messages ?? "?"} messages (${meta.reason || "?"}), ` +
      `${formatNumber(meta.tokens_before)} → ${formatNumber(meta.tokens_after)} tokens, ` +
      (meta.helper_model ? `by ${meta.helper_model}` : "extractive")),
    h("p", { class: "coverage" }, `verification coverage ${pct(v.coverage)} ` +
      `(${v.covered ?? "?"} of ${v.items ?? "?"} items; the helper alone ${pct(v.summary_coverage)})`),
    missing.length ? h("details", {}, h("summary", {}, "kept verbatim"), h("ul", {}, missing)) : null);
}

function pct(value) {
  return value === undefined || value === null ? "–" : `${(value * 100).toFixed(0)}%`;
}
