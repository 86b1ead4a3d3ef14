// Server-sent events read from a fetch body (EventSource cannot POST). Pure: text in, events out.

export class SSEParser {
  constructor() {
    this.buffer = "";
    this.name = "message";
    this.data = [];
  }

  // Feed decoded text; returns the events it completed, as {event, data} with data parsed.
  feed(text) {
    this.buffer += text;
    const events = [];
    let end;
    while ((end = this.buffer.search(/\r\n|\r|\n/)) >= 0) {
      const line = this.buffer.slice(0, end);
      const width = this.buffer.startsWith("\r\n", end) ? 2 : 1;
      this.buffer = this.buffer.slice(end + width);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  line(line) {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return null; // a keep-alive comment
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
    return null;
  }

  dispatch() {
    if (!this.data.length) return null;
    const event = { event: this.name, data: JSON.parse(this.data.join("\n")) };
    this.name = "message";
    this.data = [];
    return event;
  }
}
