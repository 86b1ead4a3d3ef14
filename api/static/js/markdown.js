// A small Markdown renderer that builds DOM nodes, never HTML text: a model's `<script>` or
// `<img onerror=...>` becomes the characters it is. The subset: fenced code (shown as text),
// headings, quotes, lists, rules, paragraphs; inline code, bold, italics, strike-through,
// links (http, https and mailto only) and bare URLs. Images are shown as their link, not loaded.
import { h } from "./dom.js";

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}>\s?/;
const ITEM = /^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$/;
const SAFE_URL = /^(https?:\/\/|mailto:)/i;

export function renderMarkdown(text) {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const [node, next] = block(lines, i);
    if (node) out.append(node);
    i = next;
  }
  return out;
}

// One block from lines[i]: [node or null, index of the next line].
function block(lines, i) {
  const line = lines[i];
  if (!line.trim()) return [null, i + 1];
  const fence = FENCE.exec(line);
  if (fence) return codeBlock(lines, i, fence);
  const heading = HEADING.exec(line);
  if (heading) return [h(`h${heading[1].length}`, {}, inline(heading[2])), i + 1];
  if (RULE.test(line)) return [h("hr"), i + 1];
  if (QUOTE.test(line)) return quote(lines, i);
  if (ITEM.test(line)) return list(lines, i);
  return paragraph(lines, i);
}

function codeBlock(lines, i, fence) {
  const marker = fence[1];
  const body = [];
  let j = i + 1;
  while (j < lines.length && !lines[j].trimStart().startsWith(marker)) body.push(lines[j++]);
  const code = h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"));
  const pre = h("pre", { class: "code" }, code);
  if (fence[2]) pre.dataset.lang = fence[2];
  return [pre, Math.min(j + 1, lines.length)];
}

function quote(lines, i) {
  const body = [];
  let j = i;
  while (j < lines.length && QUOTE.test(lines[j])) body.push(lines[j++].replace(QUOTE, ""));
  return [h("blockquote", {}, renderMarkdown(body.join("\n"))), j];
}

function list(lines, i) {
  const first = ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const indent = first[1].length;
  const node = h(ordered ? "ol" : "ul");
  if (ordered && parseInt(first[2], 10) !== 1) node.setAttribute("start", parseInt(first[2], 10));
  let j = i;
  while (j < lines.length) {
    const item = ITEM.exec(lines[j]);
    if (!item || item[1].length !== indent || /\d/.test(item[2]) !== ordered) break;
    const body = [item[3]];
    j++;
    // Lines indented under the item (a nested list, a wrapped line) belong to it.
    while (j < lines.length && lines[j].trim() && !isSibling(lines[j], indent)) {
      body.push(lines[j].slice(Math.min(indent + 2, leading(lines[j]))));
      j++;
    }
    node.append(h("li", {}, body.length > 1 ? renderMarkdown(body.join("\n")) : inline(body[0])));
  }
  return [node, j];
}

// A line that ends the item: a sibling (or outer) item, or a block that starts at its margin.
function isSibling(line, indent) {
  const item = ITEM.exec(line);
  if (item) return item[1].length <= indent;
  return leading(line) <= indent && startsBlock(line);
}

function leading(line) {
  return line.length - line.trimStart().length;
}

function paragraph(lines, i) {
  const node = h("p");
  let j = i;
  while (j < lines.length && lines[j].trim() && (j === i || !startsBlock(lines[j]))) {
    if (j > i) node.append(h("br"));
    node.append(inline(lines[j].trim()));
    j++;
  }
  return [node, j];
}

function startsBlock(line) {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line)
    || ITEM.test(line);
}

// Inline spans, earliest match first; what matches nothing stays text.
const INLINE = new RegExp([
  /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/.source, // 1,2: code
  /!\[([^\]]*)\]\(([^)\s]+)\)/.source, // 3,4: image (shown as a link)
  /\[([^\]]+)\]\(([^)\s]+)\)/.source, // 5,6: link
  /\*\*(?=\S)([\s\S]*?\S)\*\*/.source, // 7: bold
  /__(?=\S)([\s\S]*?\S)__(?!\w)/.source, // 8: bold
  /~~(?=\S)([\s\S]*?\S)~~/.source, // 9: strike
  /\*(?=[^\s*])([^*]*?[^\s*])\*/.source, // 10: em
  /(?<![\w])_(?=[^\s_])([^_]*?[^\s_])_(?![\w])/.source, // 11: em
  /(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/.source, // 12: bare URL
].join("|"), "g");

export function inline(text) {
  const out = document.createDocumentFragment();
  let last = 0;
  INLINE.lastIndex = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.append(text.slice(last, m.index));
    out.append(span(m));
    last = m.index + m[0].length;
  }
  if (last < text.length) out.append(text.slice(last));
  return out;
}

function span(m) {
  if (m[2] !== undefined) return h("code", {}, m[2]);
  if (m[4] !== undefined) return link(m[4], `image: ${m[3] || m[4]}`);
  if (m[6] !== undefined) return SAFE_URL.test(m[6]) ? link(m[6], inline(m[5])) : m[0];
  if (m[7] !== undefined) return h("strong", {}, inline(m[7]));
  if (m[8] !== undefined) return h("strong", {}, inline(m[8]));
  if (m[9] !== undefined) return h("del", {}, inline(m[9]));
  if (m[10] !== undefined) return h("em", {}, inline(m[10]));
  if (m[11] !== undefined) return h("em", {}, inline(m[11]));
  return link(m[12], m[12]);
}

function link(url, content) {
  if (!SAFE_URL.test(url)) return typeof content === "string" ? content : url;
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer nofollow" }, content);
}
