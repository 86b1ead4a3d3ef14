// The chat list: create, rename, delete, switch. Newest first, as the API lists them.
import { h, clear } from "./dom.js";

export class ChatList {
  constructor(api, listNode, { userId, onSelect }) {
    this.api = api;
    this.node = listNode;
    this.userId = userId;
    this.onSelect = onSelect;
    this.chats = [];
    this.current = null;
  }

  async load() {
    const params = new URLSearchParams({ user_id: this.userId(), limit: "200" });
    this.chats = (await this.api.get(`/v1/chats?${params}`)).chats;
    this.draw();
    return this.chats;
  }

  draw() {
    clear(this.node);
    for (const chat of this.chats) this.node.append(this.item(chat));
  }

  item(chat) {
    const selected = chat.id === this.current;
    return h("li", { class: selected ? "chat selected" : "chat", dataset: { id: chat.id } },
      h("button", { class: "open", type: "button", "aria-current": selected ? "true" : null,
        onclick: () => this.select(chat.id) }, chat.title || "untitled"),
      h("button", { class: "icon rename", type: "button", title: "rename",
        "aria-label": `rename ${chat.title || "untitled"}`,
        onclick: () => this.rename(chat.id) }, "✎"),
      h("button", { class: "icon delete", type: "button", title: "delete",
        "aria-label": `delete ${chat.title || "untitled"}`,
        onclick: () => this.remove(chat.id) }, "×"));
  }

  find(id) {
    return this.chats.find((c) => c.id === id);
  }

  select(id) {
    this.current = id;
    this.draw();
    return this.onSelect(this.find(id) || null);
  }

  async create(title = "") {
    return this.adopt(await this.api.post("/v1/chats", { user_id: this.userId(), title }));
  }

  // A chat made elsewhere (from a session snapshot): first in the list, and open.
  async adopt(chat) {
    this.chats.unshift(chat);
    await this.select(chat.id);
    return chat;
  }

  // Rename in place: the title becomes an input; Enter saves, Escape cancels.
  rename(id) {
    const chat = this.find(id);
    const li = this.node.querySelector(`li[data-id="${CSS.escape(id)}"]`);
    if (!chat || !li) return;
    const input = h("input", { class: "title-edit", value: chat.title, "aria-label": "chat title",
      maxlength: "500" });
    const done = async (save) => {
      input.onblur = null;
      if (save && input.value !== chat.title) {
        Object.assign(chat, await this.api.patch(`/v1/chats/${id}`, { title: input.value }));
        if (id === this.current) this.onSelect(chat);
      }
      this.draw();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); done(true); }
      if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); done(false); }
    });
    input.onblur = () => done(true);
    li.querySelector(".open").replaceWith(input);
    input.focus();
    input.select();
  }

  async remove(id) {
    const chat = this.find(id);
    if (!chat || !confirm(`Delete "${chat.title || "untitled"}" and all its messages?`)) return;
    await this.api.delete(`/v1/chats/${id}`);
    this.chats = this.chats.filter((c) => c.id !== id);
    if (id === this.current) this.select(this.chats[0]?.id ?? null);
    else this.draw();
  }

  // Alt+Up / Alt+Down: the neighbour of the chat open now.
  step(by) {
    const i = this.chats.findIndex((c) => c.id === this.current);
    const next = this.chats[Math.min(Math.max(i + by, 0), this.chats.length - 1)];
    if (next && next.id !== this.current) this.select(next.id);
  }
}
