// aiayn page: translate a text and draw its attention (the paper's section 7 figures) as SVG.
// One <rect class="cell"> per (query token, key token) pair; no third-party code.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);
const state = { data: null, kind: "cross", sentences: [] };

// Which tokens label the rows (queries) and columns (keys) of each kind of attention.
// The decoder's inputs are the start token and the output pieces; each position predicts the next.
function axes(attn, kind) {
  const decoderInputs = ["<s>"].concat(attn.tgt_tokens.slice(0, -1));
  if (kind === "encoder") return { rows: attn.src_tokens, cols: attn.src_tokens, rowName: "source", colName: "source" };
  if (kind === "decoder") return { rows: decoderInputs, cols: decoderInputs, rowName: "decoder input", colName: "decoder input" };
  return { rows: attn.tgt_tokens, cols: attn.src_tokens, rowName: "target", colName: "source" };
}

// layers[layer][head][q][k] -> the matrix of one head, or the mean over heads.
function matrix(layers, layer, head) {
  const heads = layers[layer];
  if (head !== "avg") return heads[Number(head)];
  return heads[0].map((row, q) => row.map((_, k) => heads.reduce((sum, h) => sum + h[q][k], 0) / heads.length));
}

// White to deep blue, for a weight in [0, 1].
function color(w) {
  const t = Math.max(0, Math.min(1, w));
  const from = [247, 251, 255], to = [8, 48, 107];
  const c = from.map((f, i) => Math.round(f + (to[i] - f) * Math.pow(t, 0.8)));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function labelWidth(tokens) {
  return 12 + 7.2 * Math.max(...tokens.map((t) => t.length), 1);
}

function drawHeatmap() {
  const attn = state.data.attention;
  const { rows, cols, rowName, colName } = axes(attn, state.kind);
  const m = matrix(attn[state.kind], Number($("layer").value), $("head").value);
  const cell = Math.max(14, Math.min(36, Math.floor(Math.min(620 / cols.length, 520 / rows.length))));
  const left = labelWidth(rows) + 18, top = labelWidth(cols) * 0.75 + 18;
  const width = left + cols.length * cell + 70, height = top + rows.length * cell + 10;
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, role: "img",
    "aria-label": `${state.kind} attention, ${rows.length} x ${cols.length}` });
  svg.append(el("text", { x: 0, y: 12, class: "axis-title" }, `rows: ${rowName} (query) / columns: ${colName} (key)`));
  cols.forEach((tok, k) => {
    const x = left + k * cell + cell / 2, y = top - 6;
    svg.append(el("text", { x, y, transform: `rotate(-50 ${x} ${y})`, class: "col-label", "data-col": k }, tok));
  });
  rows.forEach((tok, q) => {
    svg.append(el("text", { x: left - 6, y: top + q * cell + cell / 2 + 4, "text-anchor": "end",
      class: "row-label", "data-row": q }, tok));
  });
  const cells = el("g", { class: "cells" });
  m.forEach((row, q) => row.forEach((w, k) => {
    cells.append(el("rect", { class: "cell", x: left + k * cell, y: top + q * cell, width: cell, height: cell,
      fill: color(w), "data-row": q, "data-col": k, "data-weight": w.toFixed(4),
      "data-query": rows[q], "data-key": cols[k] }));
  }));
  svg.append(cells);
  drawLegend(svg, left + cols.length * cell + 20, top, Math.max(rows.length * cell, 60));
  svg.addEventListener("mousemove", hover);
  svg.addEventListener("mouseleave", unhover);
  $("heatmap").replaceChildren(svg);
  $("axes").textContent = `${rows.length} x ${cols.length} tokens`;
}

function drawLegend(svg, x, y, h) {
  const grad = el("linearGradient", { id: "legend-gradient", x1: 0, y1: 1, x2: 0, y2: 0 });
  for (let i = 0; i <= 10; i++) grad.append(el("stop", { offset: `${i * 10}%`, "stop-color": color(i / 10) }));
  const defs = el("defs", {});
  defs.append(grad);
  svg.append(defs, el("rect", { x, y, width: 12, height: h, fill: "url(#legend-gradient)", stroke: "#d9e2ec" }),
    el("text", { x: x + 16, y: y + 10 }, "1"), el("text", { x: x + 16, y: y + h }, "0"));
}

function hover(event) {
  const target = event.target;
  unhover();
  if (!target.classList.contains("cell")) return;
  const { row, col, query, key, weight } = target.dataset;
  const svg = target.ownerSVGElement;
  svg.querySelector(`.row-label[data-row="${row}"]`).classList.add("active");
  svg.querySelector(`.col-label[data-col="${col}"]`).classList.add("active");
  const tip = $("tooltip");
  tip.textContent = `${query} \u2192 ${key}: ${weight}`;
  tip.style.left = `${event.clientX + 14}px`;
  tip.style.top = `${event.clientY + 14}px`;
  tip.hidden = false;
}

function unhover() {
  document.querySelectorAll(".heatmap text.active").forEach((t) => t.classList.remove("active"));
  $("tooltip").hidden = true;
}

// Layer choices for the current kind (encoder and decoder may differ in depth); the last by default.
function fillLayers() {
  const layers = state.data.attention[state.kind].length, select = $("layer");
  const keep = select.value !== "" && Number(select.value) < layers ? select.value : String(layers - 1);
  select.replaceChildren(...Array.from({ length: layers }, (_, i) => new Option(`${i + 1} of ${layers}`, i)));
  select.value = keep;
}

function fillHeads(attn) {
  const heads = attn.cross[0].length;
  $("head").replaceChildren(new Option("Average of heads", "avg"),
    ...Array.from({ length: heads }, (_, i) => new Option(`Head ${i + 1}`, i)));
}

function selectTab(kind) {
  state.kind = kind;
  document.querySelectorAll(".tabs button").forEach((b) => b.setAttribute("aria-selected", String(b.dataset.kind === kind)));
  fillLayers();
  drawHeatmap();
}

function showError(message) {
  $("error").textContent = message;
  $("error").hidden = !message;
}

// The server-sent events of a fetch() response, as [name, data] pairs (EventSource cannot POST).
async function* events(response) {
  const reader = response.body.getReader(), decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const field = (name) => (block.split("\n").find((l) => l.startsWith(name + ": ")) || "").slice(name.length + 2);
      yield [field("event"), JSON.parse(field("data"))];
    }
  }
}

async function postJSON(url, body) {
  const response = await fetch(url, {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
  if (response.ok) return response;
  const detail = (await response.json()).detail;
  throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
}

// Translate the text sentence by sentence (POST /v1/translate/stream): each sentence appears as
// soon as it is done; the first one's attention is drawn, and a click draws another's.
async function translate() {
  const text = $("source").value.trim();
  if (!text) return showError("Type a sentence first.");
  showError("");
  $("translate").disabled = true;
  $("status").textContent = "Translating\u2026";
  state.sentences = [];
  $("translation").replaceChildren();
  $("score").textContent = "";
  $("attention").hidden = true;
  try {
    const response = await postJSON("/v1/translate/stream", { text, beam_size: beam(), ...target() });
    $("result").hidden = false;
    for await (const [name, data] of events(response)) {
      if (name === "error") throw new Error(data.detail);
      if (name === "sentence") addSentence(data);
    }
  } catch (err) {
    showError(`Translation failed: ${err.message}`);
  } finally {
    $("translate").disabled = false;
    $("status").textContent = "";
  }
}

function beam() {
  return Number($("beam").value) || 4;
}

// The target language chosen in the menu (a model of several: GET /v1/model's target_languages).
function target() {
  return $("target-menu").hidden ? {} : { target: $("target").value };
}

function addSentence(data) {
  let paragraph = $("translation").querySelector(`p[data-paragraph="${data.paragraph}"]`);
  if (!paragraph) {
    paragraph = document.createElement("p");
    paragraph.dataset.paragraph = data.paragraph;
    $("translation").append(paragraph);
  }
  if (paragraph.childElementCount) paragraph.append(" ");
  const span = document.createElement("span");
  span.className = "sentence";
  span.dataset.index = data.index;
  span.title = data.source;
  span.textContent = data.text;
  span.addEventListener("click", () => selectSentence(data.index));
  paragraph.append(span);
  state.sentences[data.index] = data;
  if (data.index === 0) selectSentence(0);
}

// The attention of one sentence: translated again alone with attention (POST /v1/translate).
async function selectSentence(index) {
  document.querySelectorAll("#translation .sentence").forEach((s) =>
    s.classList.toggle("selected", Number(s.dataset.index) === index));
  const sentence = state.sentences[index];
  try {
    const body = { text: sentence.source, beam_size: beam(), attention: true, ...target() };
    const response = await postJSON("/v1/translate", body);
    show((await response.json()).translations[0]);
    $("heatmap").dataset.sentence = index;
  } catch (err) {
    showError(`Attention failed: ${err.message}`);
  }
}

function show(result) {
  state.data = result;
  $("score").textContent = `score ${result.score.toFixed(3)} \u00b7 log P ${result.log_prob.toFixed(3)}`;
  $("attention").hidden = !result.attention;
  if (result.attention) {
    $("layer").replaceChildren();
    fillHeads(result.attention);
    selectTab(state.kind);
  }
}

async function showModel() {
  try {
    const info = await (await fetch("/v1/model")).json();
    const langs = info.src_lang && info.tgt_lang ? `${info.src_lang} \u2192 ${info.tgt_lang} \u00b7 ` : "";
    fillTargets(info.target_languages || []);
    const c = info.config;
    const n = info.parameters, size = n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : `${(n / 1e3).toFixed(1)}k`;
    $("model-info").textContent = `${langs}${size} parameters \u00b7 ` +
      `${c.n_layers} layers, d_model ${c.d_model}, ${c.n_heads} heads`;
  } catch (err) {
    $("model-info").textContent = "";
  }
}

// A menu of the target languages, shown only for a model of several.
function fillTargets(languages) {
  $("target").replaceChildren(...languages.map((lang) => new Option(lang, lang)));
  $("target-menu").hidden = languages.length < 2;
}

$("translate").addEventListener("click", translate);
$("source").addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) translate(); });
$("layer").addEventListener("change", drawHeatmap);
$("head").addEventListener("change", drawHeatmap);
document.querySelectorAll(".tabs button").forEach((b) => b.addEventListener("click", () => selectTab(b.dataset.kind)));
showModel();
