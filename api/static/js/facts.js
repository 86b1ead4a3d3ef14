// The memory panel: the user's durable facts, each with a forget button. (L1 runtime memory is
// runtime_memory.js, L3 session snapshots snapshots.js; L2 patterns get a place once it exists.)
import { h, clear } from "./dom.js";

export class Facts {
  constructor(api, node, userId) {
    this.api = api;
    this.node = node;
    this.userId = userId;
  }

  async load() {
    const params = new URLSearchParams({ user_id: this.userId(), limit: "200" });
    clear(this.node);
    let page;
    try {
      page = await this.api.get(`/v1/memories?${params}`);
    } catch (err) {
      this.node.append(h("p", { class: "warn" }, `Facts unavailable: ${err.message}`));
      return;
    }
    const list = h("ul", { class: "facts" }, page.items.map((f) => this.item(f)));
    this.node.append(
      h("h3", {}, "Durable facts"),
      page.items.length ? list : h("p", { class: "quiet" }, "No facts yet."));
  }

  item(fact) {
    const forget = h("button", { type: "button", class: "forget", title: "forget this fact",
      onclick: async () => {
        forget.disabled = true;
        const params = new URLSearchParams({ user_id: this.userId() });
        await this.api.delete(`/v1/memories/${fact.id}?${params}`);
        li.remove();
      } }, "forget");
    const li = h("li", { class: "fact", dataset: { id: fact.id } },
      h("span", { class: "text" }, fact.text),
      h("span", { class: "quiet" }, ` ${fact.origin} · importance ${fact.importance}`),
      forget);
    return li;
  }
}
