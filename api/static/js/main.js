// The page: wires the chat list, the history, the composer, the panel and the status line.
import { $, h, formatMs, formatNumber } from "./dom.js";
import { Api } from "./api.js";
import { ChatList } from "./chats.js";
import { History } from "./history.js";
import { Inspector } from "./inspector.js";
import { Facts } from "./facts.js";
import { RuntimeMemory } from "./runtime_memory.js";
import { RuntimePatterns } from "./runtime_patterns.js";
import { Snapshots } from "./snapshots.js";
import { Turn } from "./turn.js";
import { stats } from "./thread.js";
import { setupIfNeeded, openSetup } from "./setup.js";

const store = {
  get user() { return localStorage.getItem("jin.user") || ""; },
  get key() { return localStorage.getItem("jin.key") || ""; },
};
const api = new Api(() => store.key);
const log = $("#log");
const input = $("#input");
const state = { chat: null, turn: null, panel: null };

const history = new History(api, log, (row) => retryRow(row));
const inspector = new Inspector(api, $("#context-view"));
const facts = new Facts(api, $("#facts"), () => store.user);
const runtimeMemory = new RuntimeMemory(api, $("#runtime-memory"));
const runtimePatterns = new RuntimePatterns(api, $("#runtime-patterns"));
const chats = new ChatList(api, $("#chat-list"), {
  userId: () => store.user,
  onSelect: (chat) => openChat(chat),
});
const snapshots = new Snapshots(api, $("#snapshots"), {
  userId: () => store.user,
  onStart: (chat) => chats.adopt(chat),
  guard: (promise) => guard(promise),
});

async function openChat(chat) {
  state.chat = chat;
  $("#chat-title").textContent = chat ? chat.title || "untitled" : "jin";
  showContext(null);
  await guard(history.open(chat?.id ?? null));
  refreshPanel();
  input.focus();
}

// Send the message box's text (Enter), or stop the answer when a step runs.
async function send(content = input.value) {
  if (state.turn) return state.turn.stop();
  if (!content.trim()) return undefined;
  if (!state.chat) await guard(chats.create(""));
  if (!state.chat) return undefined;
  if (!state.chat.title) nameAfter(state.chat, content);
  input.value = "";
  const turn = new Turn({ api, log, chatId: state.chat.id, content, onRetry: (c) => send(c),
    onContext: showContext, onMemory: (d) => showMemory(d.chat_id),
    onPatterns: (d) => showMemory(d.chat_id, runtimePatterns) });
  running(turn);
  await turn.run();
  running(null);
  await afterTurn(turn);
  return turn;
}

function nameAfter(chat, content) {
  const title = content.trim().split("\n")[0].slice(0, 60);
  guard(api.patch(`/v1/chats/${chat.id}`, { title }).then((saved) => {
    Object.assign(chats.find(saved.id) || {}, saved);
    chats.draw();
    if (state.chat?.id === saved.id) $("#chat-title").textContent = saved.title;
  }));
}

function running(turn) {
  state.turn = turn;
  const button = $("#send");
  button.textContent = turn ? "stop" : "send";
  button.classList.toggle("stop", Boolean(turn));
  button.title = turn ? "stop the answer (Esc)" : "send (Enter)";
  document.body.classList.toggle("busy", Boolean(turn));
}

async function afterTurn(turn) {
  if (turn.chatId !== state.chat?.id) return;
  if (turn.refused) turn.question.node.remove();
  else await guard(history.newer());
  for (const c of turn.compactions) await guard(history.after(c.through));
  if (turn.timings) showStep(turn);
  if (turn.failure) showModels(); // after an error: does each role still answer?
  refreshPanel();
}

function retryRow(row) {
  const question = history.questionOf(row.id);
  if (question) send(question);
}

function showContext(context) {
  const budget = typeof context?.budget === "object" ? context.budget.total : context?.budget;
  const share = context && budget ? Math.min(1, context.total_tokens / budget) : 0;
  $("#fullness-bar").style.width = `${(share * 100).toFixed(1)}%`;
  $("#fullness").textContent = context
    ? `context ${formatNumber(context.total_tokens)}/${formatNumber(budget)}` : "";
}

function showStep(turn) {
  const usage = stepTokens(turn.telemetry) || turn.usage || {};
  const tokens = `${formatNumber(usage.prompt_tokens)} in, ${formatNumber(usage.completion_tokens)} out`;
  const last = $("#last-step");
  last.textContent = `last step: ${tokens}, ${formatMs(turn.timings.total_ms)}` +
    (turn.timings.model_ms !== undefined ? ` (model ${formatMs(turn.timings.model_ms)})` : "");
  // Per node on hover here; the answer itself folds the full table.
  last.title = (turn.telemetry?.nodes || []).map((n) => `${n.node}: ${formatMs(n.ms)}` +
    (n.prompt_tokens !== undefined ? `, ${n.prompt_tokens} in, ${n.completion_tokens} out` : ""))
    .join("\n");
}

// The step's tokens: every node's that its server counted (translator, brain, ...).
function stepTokens(telemetry) {
  const counted = (telemetry?.nodes || []).filter((n) => n.prompt_tokens !== undefined);
  if (!counted.length) return null;
  const sum = (side) => counted.reduce((total, n) => total + (n[side] || 0), 0);
  return { prompt_tokens: sum("prompt_tokens"), completion_tokens: sum("completion_tokens") };
}

// Each model role: its model, its context window, and whether its server answers now.
async function showModels() {
  const node = $("#models");
  try {
    const status = await api.get("/v1/status");
    node.replaceChildren(...Object.entries(status.roles).map(([name, r]) => role(name, r)));
    if (status.banner) banner(status.banner);
  } catch (err) {
    node.textContent = err.status === 403 ? "models: admin key needed" : "";
  }
}

function role(name, r) {
  const up = r.answers !== false;
  const size = r.context_window ? ` · ${formatNumber(r.context_window)}` : "";
  const where = r.embedded ? "built in" : r.url;
  return h("span", { class: `role ${up ? "up" : "down"}`, dataset: { role: name },
    title: `${name}: ${r.model ?? "–"} at ${where ?? "–"}, window ${formatNumber(r.context_window)}` +
      ` tokens; ${up ? "answers" : `does not answer${r.error ? `: ${r.error}` : ""}`}` },
  h("span", { class: "dot", "aria-label": up ? "answers" : "does not answer" }, up ? "●" : "○"),
  ` ${name}: ${r.model ?? "–"}${size}`);
}

function banner(text) {
  const node = $("#banner");
  node.textContent = text;
  node.hidden = !text;
}

// The side panel: the context inspector or the memory, for the chat open now.
function togglePanel(name) {
  state.panel = state.panel === name ? null : name;
  $("#panel").hidden = !state.panel;
  for (const tab of ["context", "memory"]) {
    $(`#toggle-${tab}`).setAttribute("aria-pressed", String(state.panel === tab));
    $(`#tab-${tab}`).setAttribute("aria-selected", String(state.panel === tab));
    $(`#${tab}-view`).hidden = state.panel !== tab;
  }
  refreshPanel();
}

function refreshPanel() {
  if (state.panel === "context") {
    guard(inspector.load(state.chat?.id, input.value).then((c) => c && showContext(c)));
  } else if (state.panel === "memory") {
    guard(runtimeMemory.load(state.chat?.id ?? null));
    guard(runtimePatterns.load(state.chat?.id ?? null));
    guard(facts.load());
    guard(snapshots.load(state.chat?.id ?? null));
  } else if (state.chat) {
    guard(api.get(`/v1/chats/${state.chat.id}/context`).then(showContext));
  }
}

// A turn's L1 update or L2 pass, as it arrives: the panel shows it if it is open on that chat.
function showMemory(chatId, layer = runtimeMemory) {
  if (state.panel === "memory" && state.chat?.id === chatId) guard(layer.load(chatId));
}

async function startOver() {
  if (!state.chat || state.turn) return;
  await guard(api.post(`/v1/chats/${state.chat.id}/reset`).then(() => history.newer()));
  refreshPanel();
}

// Failures of the page's own requests show in the banner; they never go unseen.
async function guard(promise) {
  try {
    return await promise;
  } catch (err) {
    banner(`${err.code ? `${err.code}: ` : ""}${err.message}`);
    return undefined;
  }
}

function onComposerKey(e) {
  if (e.key !== "Enter" || e.isComposing) return;
  if (e.shiftKey) return; // the textarea's own new line
  if (e.ctrlKey) { // a textarea does nothing on Ctrl+Enter by itself
    e.preventDefault();
    insertNewline();
    return;
  }
  e.preventDefault();
  if (!state.turn) send();
}

function insertNewline() {
  const { selectionStart: start, selectionEnd: end, value } = input;
  input.value = `${value.slice(0, start)}\n${value.slice(end)}`;
  input.selectionStart = input.selectionEnd = start + 1;
}

const SHORTCUTS = {
  n: () => guard(chats.create("")),
  ArrowUp: () => chats.step(-1),
  ArrowDown: () => chats.step(1),
  r: () => state.chat && chats.rename(state.chat.id),
  i: () => togglePanel("context"),
  m: () => togglePanel("memory"),
};

function onKey(e) {
  const typing = e.target.matches("input, textarea");
  if (e.key === "Escape" && state.turn) { e.preventDefault(); state.turn.stop(); return; }
  if (e.altKey && !e.ctrlKey && !e.metaKey) {
    const action = SHORTCUTS[e.key.length === 1 ? e.key.toLowerCase() : e.key];
    if (action) { e.preventDefault(); action(); }
    return;
  }
  if (typing) return;
  if (e.key === "/") { e.preventDefault(); input.focus(); }
  if (e.key === "?") { e.preventDefault(); $("#help").showModal(); }
}

function wire() {
  $("#composer").addEventListener("submit", (e) => { e.preventDefault(); send(); });
  input.addEventListener("keydown", onComposerKey);
  document.addEventListener("keydown", onKey);
  $("#new-chat").addEventListener("click", () => guard(chats.create("")));
  $("#start-over").addEventListener("click", startOver);
  $("#toggle-context").addEventListener("click", () => togglePanel("context"));
  $("#toggle-memory").addEventListener("click", () => togglePanel("memory"));
  $("#tab-context").addEventListener("click", () => togglePanel("context"));
  $("#tab-memory").addEventListener("click", () => togglePanel("memory"));
  $("#panel-refresh").addEventListener("click", refreshPanel);
  $("#settings").addEventListener("click", () => openSetup(api, store).then(boot));
  $("#help-open").addEventListener("click", () => $("#help").showModal());
}

async function boot() {
  banner("");
  const list = await guard(setupIfNeeded(api, store, () => chats.load()));
  $("#user-label").textContent = store.user;
  if (!list) return;
  showModels();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("chat");
  const first = list.find((c) => c.id === wanted) || list[0];
  await (first ? chats.select(first.id) : openChat(null));
}

// For bench/page.py and the tests: what the page measured, and its readiness.
window.jin = { stats, ready: false };
wire();
boot().then(() => {
  window.jin.ready = true;
  document.body.dataset.ready = "";
  performance.mark("jin-ready");
});
