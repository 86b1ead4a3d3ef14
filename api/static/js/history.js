// A chat's history in the log: the newest page first, older pages as the reader scrolls up,
// rows kept in position order (a summary row lands between messages already shown).
import { h, clear } from "./dom.js";
import { rowElement, toBottom } from "./thread.js";

const PAGE = 50;
const NEWEST = "9223372036854775807"; // positions are bigint: before the largest, the newest

export class History {
  constructor(api, log, onRetry) {
    this.api = api;
    this.log = log;
    this.onRetry = onRetry;
    this.sentinel = h("div", { class: "sentinel", "aria-hidden": "true" });
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((e) => e.isIntersecting)) this.older();
    }, { root: log, rootMargin: "400px 0px 0px 0px" });
    this.chatId = null;
    this.rows = new Map(); // id -> the stored row shown
  }

  async open(chatId) {
    this.chatId = chatId;
    this.first = null;
    this.last = null;
    this.hasMore = false;
    this.loading = null;
    this.rows.clear();
    this.observer.disconnect();
    clear(this.log).append(this.sentinel);
    if (!chatId) return;
    const page = await this.page({ before: NEWEST });
    if (this.chatId !== chatId) return;
    this.place(page.messages);
    this.hasMore = page.has_more;
    this.first = page.first_position;
    toBottom(this.log);
    this.observer.observe(this.sentinel);
  }

  page(query) {
    const params = new URLSearchParams({ limit: String(PAGE), ...query });
    return this.api.get(`/v1/chats/${this.chatId}/messages?${params}`);
  }

  // The page before the oldest row shown, keeping the rows in view where they are.
  older() {
    if (!this.hasMore || this.loading || this.first === null) return this.loading;
    const chatId = this.chatId;
    this.loading = this.page({ before: String(this.first) }).then((page) => {
      if (this.chatId !== chatId) return;
      const fromBottom = this.log.scrollHeight - this.log.scrollTop;
      this.place(page.messages);
      this.log.scrollTop = this.log.scrollHeight - fromBottom;
      this.hasMore = page.has_more;
      this.first = page.first_position ?? this.first;
    }).finally(() => { this.loading = null; });
    return this.loading;
  }

  // Rows written since the newest one shown (a step's, a start-over line's). A row still
  // streaming (a stopped answer is saved a moment after its stream closes) is read again until
  // it is final, so the log never trades the text it showed for an unfinished row.
  async newer(tries = 20) {
    const chatId = this.chatId;
    const page = await this.page(this.last === null ? { after: "-1" } : { after: String(this.last) });
    if (this.chatId !== chatId) return;
    const open = page.messages.findIndex((row) => row.status === "streaming");
    this.place(open < 0 ? page.messages : page.messages.slice(0, open));
    if (open >= 0 && tries > 0) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      await this.newer(tries - 1);
    }
  }

  // The row right after `position`: where a compaction puts its summary.
  async after(position) {
    const chatId = this.chatId;
    const page = await this.page({ after: String(position), limit: "1" });
    if (this.chatId === chatId) this.place(page.messages.filter((r) => r.kind === "summary"));
  }

  place(rows) {
    for (const row of rows) this.put(row);
  }

  // Insert (or replace, by id) one stored row, in position order.
  put(row) {
    const existing = this.log.querySelector(`[data-id="${CSS.escape(row.id)}"]`);
    // A row still being written (a page of history read while the answer streams, or just
    // after a stop) never takes the place of what the page shows of it; `newer` reads it again.
    if (existing && row.status === "streaming") return;
    this.rows.set(row.id, row);
    const node = rowElement(row, () => this.onRetry(row));
    // What only the stream told stays: its error says more (the code, the provider's words)
    // than the stored row, and the step's timings per node are stored nowhere else.
    if (existing?.dataset.live !== undefined) {
      const error = existing.querySelector(".error");
      if (error) node.querySelector(".error")?.replaceWith(error);
      const timings = existing.querySelector(".telemetry");
      if (timings) node.querySelector(".body")?.append(timings);
    }
    if (existing) existing.replaceWith(node);
    else this.log.insertBefore(node, this.successor(row.position));
    if (this.last === null || row.position > this.last) this.last = row.position;
    if (this.first === null || row.position < this.first) this.first = row.position;
  }

  successor(position) {
    // Rows mostly come in order: look from the end (new rows) or the start (older pages).
    const rows = this.log.querySelectorAll("[data-position]");
    if (!rows.length) return this.liveNode();
    if (position < Number(rows[0].dataset.position)) return rows[0];
    for (let i = rows.length - 1; i >= 0; i--) {
      if (Number(rows[i].dataset.position) < position) {
        return rows[i + 1] || this.liveNode();
      }
    }
    return rows[0];
  }

  // The user's message an answer replied to: the nearest user row above it.
  questionOf(id) {
    let node = this.log.querySelector(`[data-id="${CSS.escape(id)}"]`)?.previousElementSibling;
    while (node && node.dataset.kind !== "user") node = node.previousElementSibling;
    return node ? this.rows.get(node.dataset.id)?.content : undefined;
  }

  liveNode() {
    return this.log.querySelector("[data-live]");
  }
}
