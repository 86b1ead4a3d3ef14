// One step as the page runs it: the user's message and the answer, live, from the stream's
// events; stop; and, once it ends, the stored rows in place of the live ones.
import { MessageView, toBottom } from "./thread.js";

export class Turn {
  constructor({ api, log, chatId, content, onRetry, onContext, onMemory, onPatterns, onDone }) {
    Object.assign(this, { api, log, chatId, content, onRetry, onContext, onMemory, onPatterns,
      onDone });
    this.controller = new AbortController();
    this.compactions = [];
    this.usage = null;
    this.timings = null;
    this.telemetry = null;
    this.failure = null;
    this.actions = 0;
    this.answer = null;
  }

  async run() {
    this.question = MessageView.create("user");
    this.question.text = this.content;
    this.question.draw();
    this.log.append(this.question.node);
    toBottom(this.log);
    try {
      await this.api.step(this.chatId, this.content, (e) => this.on(e), this.controller.signal);
    } catch (err) {
      if (err.name !== "AbortError") this.failed(err.code || "unreachable", err.message);
    }
    this.answer?.end(this.answer.node.dataset.status || "interrupted", this.usage);
    return this;
  }

  on({ event, data }) {
    const handler = this.handlers[event];
    if (handler) handler.call(this, data);
  }

  get handlers() {
    return {
      step_start(d) { this.question.node.dataset.id = d.user_message_id; },
      context(d) { this.onContext(d); },
      message_start(d) { this.view().node.dataset.id = d.message_id; },
      thinking_chunk(d) { this.view().addThinking(d.chunk); },
      brain_chunk(d) { this.view().addBrain(d.chunk); },
      message_chunk(d) { this.view().addChunk(d.chunk); },
      runtime_action(d) { this.actions++; this.view().action(d); },
      message_error(d) {
        this.failure = d.code;
        this.view().error(d.code, d.text, () => this.onRetry(this.content), d.preview);
      },
      message_end(d) { this.usage = d.usage; this.view().node.dataset.status = d.status; },
      runtime_memory_update(d) { this.onMemory?.(d); },
      runtime_patterns_update(d) { this.onPatterns?.(d); },
      compaction(d) { if (!d.skipped && d.summary_id) this.compactions.push(d); },
      telemetry(d) { this.telemetry = d; this.view().telemetry(d); },
      step_end(d) { this.timings = d.timings; this.status = d.status; },
    };
  }

  view() {
    if (!this.answer) {
      this.answer = MessageView.create("assistant");
      this.log.append(this.answer.node);
    }
    return this.answer;
  }

  // A step refused before it streamed (busy, too large, no key): said under the message.
  failed(code, text) {
    this.failure = code;
    this.view().error(code, text, () => this.onRetry(this.content));
    this.refused = !this.question.node.dataset.id;
  }

  // Stop the answer wherever it runs; if no step was running yet, drop the request itself.
  async stop() {
    try {
      const result = await this.api.post(`/v1/chats/${this.chatId}/abort`);
      if (result.aborted) {
        // The stream ends with the stopped answer; should it not, close it.
        setTimeout(() => this.controller.abort(), 5000);
        return;
      }
    } catch {
      // the abort route failed: closing the stream stops the step too
    }
    this.controller.abort();
  }
}
