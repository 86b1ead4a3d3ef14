// The memory panel's L2 section: the behaviour patterns the helper distilled from several L1
// versions (type, confidence, description, how often and in which L1 versions, the user's own
// words as evidence), and the alerts L2 recorded about L1 (an update that changed nothing).
import { h, clear } from "./dom.js";

const ALERTS = { stale_l1: "changed nothing although you wrote" };

export class RuntimePatterns {
  constructor(api, node) {
    this.api = api;
    this.node = node;
    this.asked = 0; // the newest request: an older answer arriving late is dropped
  }

  async load(chatId) {
    const ask = ++this.asked;
    if (!chatId) {
      this.draw(h("p", { class: "quiet" }, "No chat open."));
      return;
    }
    let view;
    try {
      view = await this.api.get(`/v1/chats/${chatId}/runtime-patterns`);
    } catch (err) {
      if (ask !== this.asked) return;
      const off = err.code === "runtime_patterns_off";
      this.draw(h("p", { class: off ? "quiet" : "warn" },
        off ? "Pattern memory is off (JIN_L2_ENABLED)." : `Patterns unavailable: ${err.message}`));
      return;
    }
    if (ask !== this.asked) return;
    this.show(view);
  }

  show(view) {
    const list = view.patterns.length
      ? h("ul", { class: "l2-patterns" }, view.patterns.map((p) => this.pattern(p)))
      : h("p", { class: "quiet" }, view.version ? "(no pattern)"
        : "No patterns yet: they are distilled every few turns.");
    this.draw(
      view.version ? h("p", { class: "quiet l2-version" },
        `v${view.version} of ${view.versions.length}, from L1 v${view.l1_version}`) : null,
      list,
      view.alerts.length ? h("ul", { class: "l2-alerts" }, view.alerts.map((a) => h("li",
        { class: "warn l2-alert", dataset: { type: a.type, l1Version: a.l1_version } },
        `L1 v${a.l1_version} ${ALERTS[a.type] || a.type}`))) : null);
  }

  pattern(p) {
    const seen = p.first_seen === p.last_seen ? `v${p.first_seen}`
      : `v${p.first_seen}–v${p.last_seen}`;
    return h("li", { class: "l2-pattern", dataset: { type: p.type, confidence: p.confidence } },
      h("div", {},
        h("span", { class: "l2-type" }, p.type.replace(/_/g, " ")),
        h("span", { class: `l2-confidence ${p.confidence}` }, p.confidence),
        h("span", { class: "quiet l2-seen", title: "occurrences, the L1 versions it was seen in" },
          `${p.occurrences}× ${seen}`)),
      h("div", { class: "l2-description" }, p.description),
      h("div", { class: "l2-evidence" }, p.evidence.map((q) => h("q", {}, q))));
  }

  draw(...children) {
    clear(this.node);
    this.node.append(h("h3", {}, "Patterns (L2)"), ...children.filter(Boolean));
  }
}
