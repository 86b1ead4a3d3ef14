// The memory panel's L1 section: the chat's runtime memory as `key: value` lines with their
// strength, highlighted against the version before (new keys in one colour, changed keys and
// values in another, fading after about 1.5 s), prev/next to replay the versions, and delete.
import { h, clear } from "./dom.js";

// As long as the CSS animation (page.css, @keyframes l1-fade): then the classes go too.
export const HIGHLIGHT_MS = 1500;

export class RuntimeMemory {
  constructor(api, node) {
    this.api = api;
    this.node = node;
    this.chatId = null;
    this.view = null; // the API's answer for the version shown
    this.asked = 0; // the newest request: an older answer arriving late is dropped
  }

  // The latest version (or version `version`) of the chat's state. The same version drawn
  // again is left alone, so a refresh does not cut a highlight short.
  async load(chatId, version = null) {
    const ask = ++this.asked;
    if (!chatId) {
      this.chatId = this.view = null;
      this.draw(h("p", { class: "quiet" }, "No chat open."));
      return;
    }
    const path = `/v1/chats/${chatId}/runtime-memory${version ? `?version=${version}` : ""}`;
    let view;
    try {
      view = await this.api.get(path);
    } catch (err) {
      if (ask !== this.asked) return;
      this.chatId = this.view = null;
      this.draw(h("p", { class: err.code === "runtime_memory_off" ? "quiet" : "warn" },
        err.code === "runtime_memory_off" ? "Runtime memory is off (JIN_RUNTIME_MEMORY)."
          : `Runtime memory unavailable: ${err.message}`));
      return;
    }
    if (ask !== this.asked) return;
    const same = this.chatId === chatId && this.view?.version === view.version
      && this.view.versions.length === view.versions.length;
    this.chatId = chatId;
    this.view = view;
    if (!same) this.show(view);
  }

  show(view) {
    if (!view.version) {
      this.draw(h("p", { class: "quiet" }, "No runtime memory yet: it is written after a turn."));
      return;
    }
    const latest = view.version === Math.max(...view.versions.map((v) => v.version));
    const list = h("ul", { class: "l1-lines" }, view.lines.map((line) => this.line(line, latest)));
    this.draw(
      this.nav(view, latest),
      view.lines.length ? list : h("p", { class: "quiet" }, "(empty)"),
      view.removed.length ? h("p", { class: "l1-removed" }, "removed: ",
        view.removed.flatMap((r) => [
          h("del", { dataset: { key: r.key } }, `${r.key}: ${r.value}`), " "]))
        : null,
      view.deleted_keys.length
        ? h("p", { class: "quiet l1-deleted" }, `deleted by you: ${view.deleted_keys.join(", ")}`)
        : null);
    // The highlights fade (CSS) and then their classes go.
    clearTimeout(this.fading);
    this.fading = setTimeout(() => {
      for (const node of this.node.querySelectorAll(".hl-new, .hl-changed")) {
        node.classList.remove("hl-new", "hl-changed");
      }
    }, HIGHLIGHT_MS);
  }

  nav(view, latest) {
    const numbers = view.versions.map((v) => v.version).sort((a, b) => a - b);
    const at = numbers.indexOf(view.version);
    const go = (i) => this.load(this.chatId, i === numbers.length - 1 ? null : numbers[i]);
    const meta = view.versions.find((v) => v.version === view.version);
    return h("div", { class: "l1-nav" },
      h("button", { type: "button", class: "l1-prev", title: "the version before",
        disabled: at <= 0, onclick: () => go(at - 1) }, "‹ prev"),
      h("span", { class: "l1-version" }, `v${view.version} of ${numbers.length}`),
      h("button", { type: "button", class: "l1-next", title: "the version after",
        disabled: at < 0 || at >= numbers.length - 1, onclick: () => go(at + 1) }, "next ›"),
      h("span", { class: "quiet" }, meta ? ` ${meta.source}` : ""),
      latest ? h("button", { type: "button", class: "link l1-forget-all",
        title: "delete every line; later rewrites keep them out",
        onclick: () => this.remove(null) }, "forget all") : null);
  }

  // One line: its key and value, each highlighted when new or changed, strength, durable mark;
  // delete on the latest version only (an older one is history).
  line(line, latest) {
    const mark = (status) => (status === "new" ? "hl-new" : status === "changed" ? "hl-changed"
      : "");
    const fresh = line.key_status === "new" ? "hl-new"
      : line.key_status === "changed" || line.value_status === "changed" ? "hl-changed" : "";
    const renamed = line.previous_key && line.previous_key !== line.key
      ? `was ${line.previous_key}` : "";
    return h("li", { class: `l1-line ${fresh}`.trim(), dataset: { key: line.key,
      keyStatus: line.key_status, valueStatus: line.value_status } },
      this.durableMark(line, latest),
      h("span", { class: `l1-key ${mark(line.key_status)}`.trim(), title: renamed || undefined },
        line.key),
      ": ",
      h("span", { class: `l1-value ${mark(line.value_status)}`.trim() }, line.value),
      h("span", { class: "strength quiet", title: "strength: 0..1" },
        ` ${line.strength.toFixed(2)}`),
      latest ? h("button", { type: "button", class: "forget", title: "delete this line",
        "aria-label": `delete ${line.key}`, onclick: () => this.remove(line.key) }, "delete")
        : null);
  }

  // "!" marks a durable line; on the latest version it is a toggle (PATCH durable).
  durableMark(line, latest) {
    const title = line.durable ? "durable: kept at its floor (click to undo)"
      : "make durable: kept at its floor, never dropped by a rewrite";
    if (!latest) {
      return line.durable ? h("span", { class: "durable", title: title.split(" (")[0] }, "!")
        : null;
    }
    return h("button", { type: "button", class: `durable-toggle ${line.durable ? "durable" : ""}`
      .trim(), title, "aria-label": `durable ${line.key}`, "aria-pressed": String(line.durable),
    onclick: () => this.mark(line.key, !line.durable) }, "!");
  }

  async mark(key, durable) {
    try {
      await this.api.patch(`/v1/chats/${this.chatId}/runtime-memory/${key}`, { durable });
    } catch (err) {
      this.node.append(h("p", { class: "warn" }, `Not changed: ${err.message}`));
      return;
    }
    await this.load(this.chatId);
  }

  // Delete one line (or every line): a new version without it, drawn at once.
  async remove(key) {
    const path = `/v1/chats/${this.chatId}/runtime-memory${key ? `/${key}` : ""}`;
    try {
      await this.api.delete(path);
    } catch (err) {
      this.node.append(h("p", { class: "warn" }, `Not deleted: ${err.message}`));
      return;
    }
    await this.load(this.chatId);
  }

  draw(...children) {
    clear(this.node);
    this.node.append(h("h3", {}, "Runtime memory (L1)"), ...children.filter(Boolean));
  }
}
