// The memory panel's L3 section: the user's session snapshots, newest first, each with its
// digest (text only, never markup), "new chat from here" and delete; and a button that saves
// the open chat's session as a new one.
import { h, clear } from "./dom.js";

export class Snapshots {
  constructor(api, node, { userId, onStart, guard }) {
    this.api = api;
    this.node = node;
    this.userId = userId;
    this.onStart = onStart; // (the new chat) => the page opens it
    this.guard = guard; // a failure of a button's request shows in the page's banner
  }

  async load(chatId) {
    this.chatId = chatId;
    const params = new URLSearchParams({ user_id: this.userId(), limit: "50" });
    let page;
    try {
      page = await this.api.get(`/v1/snapshots?${params}`);
    } catch (err) {
      clear(this.node);
      this.node.append(h("h3", {}, "Session snapshots"),
        h("p", { class: "warn" }, `Snapshots unavailable: ${err.message}`));
      return;
    }
    clear(this.node);
    if (!page.enabled) {
      this.node.append(h("h3", {}, "Session snapshots"), h("p", { class: "quiet" },
        "Session snapshots are off (JIN_SESSION_SNAPSHOTS, JIN_RUNTIME_MEMORY)."));
      return;
    }
    const save = chatId && h("button", { type: "button", class: "snapshot-save",
      title: "save this chat's session as a snapshot", onclick: () => this.guard(this.save(save)) },
    "save session");
    const list = h("ul", { class: "snapshots" }, page.snapshots.map((s) => this.item(s)));
    this.node.append(
      h("div", { class: "snapshot-head" }, h("h3", {}, "Session snapshots"), save),
      page.snapshots.length ? list : h("p", { class: "quiet" }, "No snapshots yet."));
  }

  async save(button) {
    button.disabled = true;
    try {
      await this.api.post(`/v1/chats/${this.chatId}/snapshots`, {});
    } finally {
      button.disabled = false;
    }
    await this.load(this.chatId);
  }

  item(snapshot) {
    const start = h("button", { type: "button", class: "snapshot-start",
      title: "start a new chat from this snapshot", onclick: () => this.guard((async () => {
        start.disabled = true;
        try {
          const chat = await this.api.post("/v1/chats", { user_id: this.userId(),
            title: snapshot.title, from_snapshot: snapshot.id });
          await this.onStart(chat);
        } finally {
          start.disabled = false;
        }
      })()) }, "new chat from here");
    const remove = h("button", { type: "button", class: "forget", title: "delete this snapshot",
      onclick: () => this.guard((async () => {
        remove.disabled = true;
        const params = new URLSearchParams({ user_id: this.userId() });
        await this.api.delete(`/v1/snapshots/${snapshot.id}?${params}`);
        li.remove();
      })()) }, "delete");
    const when = new Date(snapshot.created_at).toLocaleString();
    const flag = snapshot.digest_source === "fallback"
      ? ` · digest by jin (${snapshot.digest_error})` : "";
    const li = h("li", { class: "snapshot", dataset: { id: snapshot.id } },
      h("div", { class: "snapshot-title" }, h("strong", {}, snapshot.title),
        h("span", { class: "quiet" }, ` ${when} · ${snapshot.lines.length} lines${flag}`)),
      h("details", {}, h("summary", {}, "digest"),
        h("p", { class: "snapshot-digest" }, snapshot.digest)),
      h("div", { class: "snapshot-actions" }, start, remove));
    return li;
  }
}
