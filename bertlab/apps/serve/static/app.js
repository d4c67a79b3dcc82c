// bertlab serve: the page. Plain JavaScript, no build step and no dependency; every text the
// model or the user wrote is put into the page with textContent, never as HTML.
"use strict";

const state = { models: [], limits: null, attention: null };

// --- small helpers --------------------------------------------------------------------------

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

function percent(probability) {
  return (100 * probability).toFixed(1) + "%";
}

async function callApi(path, body) {
  const options = body === undefined ? {} : {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  let answer = null;
  try {
    answer = await response.json();
  } catch (error) {
    answer = null;
  }
  if (!response.ok) {
    const detail = answer && answer.detail ? answer.detail : response.statusText;
    throw new Error(response.status + ": " + detail);
  }
  return answer;
}

function modelPath(view, task) {
  const name = document.getElementById(view + "-model").value;
  return "/api/models/" + encodeURIComponent(name) + "/" + task;
}

function modelNamed(name) {
  return state.models.find((model) => model.name === name);
}

// A color ramp from white to dark blue, for a value in [0, 1].
function shade(value) {
  const low = [247, 251, 255];
  const high = [8, 48, 107];
  const mix = low.map((channel, index) => Math.round(channel + (high[index] - channel) * value));
  return "rgb(" + mix.join(",") + ")";
}

function bars(entries, topName) {
  // entries: [{name, value (0..1)}], drawn as labelled probability bars.
  const grid = element("div", "bars");
  for (const entry of entries) {
    const row = entry.name === topName ? "top" : "";
    const name = element("span", "bar-name " + row, entry.name);
    const track = element("span", "bar-track " + row);
    const fill = element("span", "bar-fill");
    fill.style.display = "block";
    fill.style.width = Math.max(0, Math.min(100, 100 * entry.value)) + "%";
    track.appendChild(fill);
    const value = element("span", "bar-value " + row, percent(entry.value));
    grid.append(name, track, value);
  }
  return grid;
}

// --- views ----------------------------------------------------------------------------------

const views = {
  "fill-mask": {
    async run() {
      const text = document.getElementById("fill-mask-text").value;
      const answer = await callApi(modelPath("fill-mask", "fill-mask"), { texts: [text], top_k: 8 });
      const result = answer.results[0];
      const box = element("div");
      const sentence = element("p", "headline");
      const parts = text.split("[MASK]");
      parts.forEach((part, index) => {
        sentence.appendChild(document.createTextNode(part));
        if (index < result.masks.length) {
          sentence.appendChild(element("span", "filled", result.masks[index].tokens[0]));
        }
      });
      box.appendChild(sentence);
      result.masks.forEach((mask, index) => {
        box.appendChild(element("h3", "", "[MASK] " + (index + 1) + " (piece " + mask.position + ")"));
        const entries = mask.tokens.map((token, rank) => ({ name: token, value: mask.probabilities[rank] }));
        const grid = bars(entries, mask.tokens[0]);
        grid.classList.add("candidates");
        box.appendChild(grid);
      });
      return box;
    },
  },

  generate: {
    async run() {
      const text = document.getElementById("generate-text").value;
      const seed = Number(document.getElementById("generate-seed").value);
      const temperature = Number(document.getElementById("generate-temperature").value);
      const answer = await callApi(modelPath("generate", "generate"), { texts: [text], seed, temperature });
      const result = answer.results[0];
      const box = element("div");
      const headline = element("p", "headline");
      const start = result.text.slice(0, result.text.length - result.continuation.length);
      headline.append(start, element("span", "continuation", result.continuation));
      box.appendChild(headline);
      box.appendChild(element("p", "note", "Seed " + seed + ", temperature " + temperature +
        ": the same seed gives the same text. The prompt is shown as the model's pieces write it back."));
      return box;
    },
  },

  score: {
    async run() {
      const texts = document.getElementById("score-text").value.split("\n").filter((line) => line.trim());
      const answer = await callApi(modelPath("score", "score"), { texts });
      const results = answer.results.map((result, index) => ({ ...result, text: texts[index] }));
      const ranked = results.filter((result) => result.rank !== null).sort((a, b) => a.rank - b.rank);
      const unranked = results.filter((result) => result.rank === null);
      const box = element("div");
      box.appendChild(element("p", "note", results[0].kind + " in nats, most probable first " +
        "(hover a sentence for each piece's term)."));
      const table = element("table", "scores");
      const head = element("tr");
      for (const name of ["rank", "score", "perplexity", "pieces", "sentence"]) head.appendChild(element("th", "", name));
      table.appendChild(head);
      for (const result of [...ranked, ...unranked]) {
        const row = element("tr");
        row.appendChild(element("td", "number", result.rank === null ? "–" : String(result.rank)));
        row.appendChild(element("td", "number", result.total.toFixed(2)));
        row.appendChild(element("td", "number", result.perplexity.toFixed(1)));
        row.appendChild(element("td", "number", String(result.pieces.length)));
        const sentence = element("td", "", result.text);
        sentence.title = result.pieces.map((piece, index) => piece + " " + result.log_probs[index].toFixed(2)).join("  ");
        row.appendChild(sentence);
        table.appendChild(row);
      }
      box.appendChild(table);
      if (unranked.length > 0) {
        box.appendChild(element("p", "note", "Not ranked (–): every piece is [UNK] for this " +
          "model's vocabulary, so the score is that of a run of [UNK]s, whatever the text says."));
      }
      return box;
    },
  },

  classify: {
    async run() {
      const model = modelNamed(document.getElementById("classify-model").value);
      const body = { texts: [document.getElementById("classify-text").value] };
      if (model.is_pair) body.text_pairs = [document.getElementById("classify-pair").value];
      const answer = await callApi(modelPath("classify", "classify"), body);
      const result = answer.results[0];
      const box = element("div");
      const headline = element("p", "headline");
      if (result.label === null) {
        headline.append("Score: ", element("strong", "prediction", result.score.toFixed(3)));
        box.appendChild(headline);
        return box;
      }
      // A label's name where the task names its labels (SST-2: "1" is "positive").
      const shown = (item) => item.name ?? item.label;
      headline.append("Label: ", element("strong", "prediction", shown(result)));
      headline.append(" (" + percent(result.score) + ")");
      box.appendChild(headline);
      const entries = result.probabilities.map((item) => ({ name: shown(item), value: item.probability }));
      box.appendChild(bars(entries, shown(result)));
      return box;
    },
    onModel(model) {
      document.getElementById("classify-pair-label").hidden = !model.is_pair;
    },
  },

  tag: {
    async run() {
      const text = document.getElementById("tag-text").value;
      const answer = await callApi(modelPath("tag", "tag"), { texts: [text] });
      const result = answer.results[0];
      const box = element("div");
      const types = [...new Set(result.entities.map((entity) => entity.type))].sort();
      const marked = element("p", "marked-text");
      let position = 0;
      for (const entity of result.entities) {
        marked.appendChild(document.createTextNode(text.slice(position, entity.start)));
        const mark = element("mark", "entity type-" + (types.indexOf(entity.type) % 8));
        mark.dataset.type = entity.type;
        mark.appendChild(element("span", "entity-text", text.slice(entity.start, entity.end)));
        mark.appendChild(element("span", "entity-type", entity.type));
        marked.appendChild(mark);
        position = entity.end;
      }
      marked.appendChild(document.createTextNode(text.slice(position)));
      box.appendChild(marked);
      const count = result.entities.length;
      box.appendChild(element("p", "note", count === 1 ? "1 entity" : count + " entities"));
      const table = element("table", "words");
      const words = element("tr");
      const tags = element("tr");
      words.appendChild(element("th", "", "word"));
      tags.appendChild(element("th", "", "tag"));
      for (const word of result.words) {
        words.appendChild(element("td", "", word.text));
        tags.appendChild(element("td", "", word.tag));
      }
      table.append(words, tags);
      const scroll = element("div", "heatmap-scroll");
      scroll.appendChild(table);
      box.appendChild(scroll);
      return box;
    },
  },

  answer: {
    async run() {
      const question = document.getElementById("answer-question").value;
      const context = document.getElementById("answer-context").value;
      const answer = await callApi(modelPath("answer", "answer"), { inputs: [{ question, context }] });
      const result = answer.results[0];
      const box = element("div");
      const headline = element("p", "headline");
      if (result.start === null) {
        headline.textContent = "No answer span found in the context.";
        box.appendChild(headline);
        return box;
      }
      headline.append("Answer: ", element("strong", "prediction", result.answer));
      headline.append(" (score " + result.score.toFixed(2) + ", characters " + result.start + "–" + result.end + ")");
      box.appendChild(headline);
      const marked = element("p", "marked-text");
      marked.append(context.slice(0, result.start));
      marked.appendChild(element("mark", "answer", context.slice(result.start, result.end)));
      marked.append(context.slice(result.end));
      box.appendChild(marked);
      return box;
    },
  },

  attention: {
    async run() {
      const text = document.getElementById("attention-text").value;
      const pair = document.getElementById("attention-pair").value;
      const chosen = document.getElementById("attention-layer").value;
      const body = { text, layer: chosen === "all" ? null : Number(chosen) };
      if (pair.trim()) body.pair = pair;
      const answer = await callApi(modelPath("attention", "attention"), body);
      state.attention = answer;
      return drawAttention();
    },
    onModel(model) {
      const layers = document.getElementById("attention-layer");
      layers.replaceChildren();
      for (let layer = 1; layer <= model.num_layers; layer += 1) {
        const option = element("option", "", "layer " + layer + " of " + model.num_layers);
        option.value = layer;
        layers.appendChild(option);
      }
      const every = element("option", "", "every layer");
      every.value = "all";
      layers.appendChild(every);
      layers.value = model.num_layers;
      const heads = document.getElementById("attention-head");
      heads.replaceChildren();
      const mean = element("option", "", "mean of the heads");
      mean.value = "mean";
      heads.appendChild(mean);
      for (let head = 1; head <= model.num_heads; head += 1) {
        const option = element("option", "", "head " + head);
        option.value = head;
        heads.appendChild(option);
      }
    },
  },

  embed: {
    async run() {
      const texts = document.getElementById("embed-text").value.split("\n").filter((line) => line.trim());
      const pooling = document.getElementById("embed-pooling").value;
      const answer = await callApi(modelPath("embed", "embed"), { texts, pooling });
      const vectors = answer.results.map((result) => result.vector);
      const box = element("div");
      box.appendChild(element("p", "note", texts.length + " vectors of " + vectors[0].length +
        " numbers (" + pooling + "); cosine similarity of every pair:"));
      box.appendChild(similarityTable(texts, vectors));
      return box;
    },
    onModel(model) {
      const pooler = document.querySelector("#embed-pooling option[value='pooler']");
      pooler.disabled = !model.has_pooler;
      if (!model.has_pooler) document.getElementById("embed-pooling").value = "mean";
    },
  },
};

// One layer's (L, L) weights: one head's, or the mean of the heads.
function headMatrix(heads, headChoice) {
  if (headChoice !== "mean") return heads[Number(headChoice) - 1];
  return heads[0].map((row, query) => row.map((_, key) =>
    heads.reduce((sum, head) => sum + head[query][key], 0) / heads.length));
}

function drawAttention() {
  const answer = state.attention;
  const headChoice = document.getElementById("attention-head").value;
  const heads = answer.attentions[0];
  const which = headChoice === "mean" ? "the mean of " + heads.length + " heads" : "head " + headChoice;
  const matrices = answer.attentions.map((layerHeads) => headMatrix(layerHeads, headChoice));
  // one scale for everything shown: 0 .. the largest weight
  const top = Math.max(...matrices.flat(2)) || 1;
  const box = element("div");
  const segmentNote = answer.segments.includes(1) ? " Sentence B's pieces are in color." : "";
  if (matrices.length > 1) {
    box.appendChild(element("p", "note", "Every layer, " + which + ", on one scale. Rows: the " +
      "attending piece; columns: the piece attended to. Hover a cell for its pieces and weight."));
    const layers = element("div", "layer-grid");
    matrices.forEach((matrix, index) => {
      const panel = element("div", "layer-panel");
      panel.appendChild(element("h3", "", "layer " + answer.layers[index]));
      panel.appendChild(heatmap(answer, matrix, top, false));
      layers.appendChild(panel);
    });
    box.appendChild(layers);
  } else if (document.getElementById("attention-show").value === "lines") {
    box.appendChild(element("p", "note", "Layer " + answer.layers[0] + ", " + which + ". Each " +
      "piece on the left attends to the pieces on the right; a line's opacity is its weight. " +
      "Hover or click a piece to pick its lines." + segmentNote));
    box.appendChild(attentionLines(answer, matrices[0], top));
  } else {
    box.appendChild(element("p", "note", "Layer " + answer.layers[0] + ", " + which +
      ". Rows: the attending piece; columns: the piece attended to. Hover a cell for its weight." +
      segmentNote));
    const scroll = element("div", "heatmap-scroll");
    scroll.appendChild(heatmap(answer, matrices[0], top, true));
    box.appendChild(scroll);
  }
  const legend = element("div", "legend");
  legend.append("0", element("span", "ramp"), top.toFixed(2) + " (attention weight)");
  box.appendChild(legend);
  return box;
}

// The lines of one layer: the pieces twice, a line from each attending piece (left) to each
// piece it attends to (right), its opacity the weight over the largest; a piece hovered or
// clicked on the left shows its own lines only (a click keeps them).
function attentionLines(answer, matrix, top) {
  const svgNamespace = "http://www.w3.org/2000/svg";
  const svg = (tag, attributes) => {
    const node = document.createElementNS(svgNamespace, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
    return node;
  };
  const tokens = answer.tokens;
  const step = 20;
  const labelWidth = 8 * Math.max(...tokens.map((token) => token.length)) + 12;
  const left = labelWidth;
  const right = labelWidth + 220;
  const drawing = svg("svg", {
    class: "attention-lines", width: right + labelWidth, height: step * tokens.length + 8,
  });
  const lines = svg("g", {});
  drawing.appendChild(lines);
  tokens.forEach((_, query) => {
    matrix[query].forEach((value, key) => {
      const line = svg("line", {
        x1: left, y1: step * query + 14, x2: right, y2: step * key + 14,
        "stroke-opacity": (value / top).toFixed(4), "data-query": query,
      });
      line.appendChild(svg("title", {})).textContent =
        tokens[query] + " → " + tokens[key] + ": " + value.toFixed(3);
      lines.appendChild(line);
    });
  });
  let kept = null;
  const pick = (query) => {
    drawing.classList.toggle("picking", query !== null);
    for (const line of lines.children) {
      line.classList.toggle("picked", query !== null && Number(line.dataset.query) === query);
    }
  };
  tokens.forEach((token, index) => {
    const segment = answer.segments[index] === 1 ? " segment-b" : "";
    const query = svg("text", {
      x: left - 6, y: step * index + 18, "text-anchor": "end", class: "query" + segment,
    });
    query.textContent = token;
    query.addEventListener("mouseenter", () => pick(index));
    query.addEventListener("mouseleave", () => pick(kept));
    query.addEventListener("click", () => { kept = kept === index ? null : index; pick(kept); });
    const key = svg("text", { x: right + 6, y: step * index + 18, class: "key" + segment });
    key.textContent = token;
    drawing.append(query, key);
  });
  return drawing;
}

// A heatmap of one layer's weights, rows the attending piece; with its labels or without.
function heatmap(answer, matrix, top, withLabels) {
  const tokens = answer.tokens;
  const grid = element("div", "heatmap attention-map" + (withLabels ? "" : " small"));
  const segment = (index) => (answer.segments[index] === 1 ? " segment-b" : "");
  if (withLabels) {
    grid.style.gridTemplateColumns = "max-content repeat(" + tokens.length + ", var(--cell))";
    grid.style.setProperty("--longest", Math.max(...tokens.map((token) => token.length)));
    grid.appendChild(element("div", "corner", ""));
    tokens.forEach((token, index) => {
      const label = element("div", "col-label" + segment(index));
      label.title = token;
      label.appendChild(element("span", "", token));
      grid.appendChild(label);
    });
  } else {
    // about 200 pixels a map, 3 to 9 a cell, so that a long text's layers still fit a screen
    grid.style.setProperty("--small-cell", Math.max(3, Math.min(9, Math.floor(200 / tokens.length))) + "px");
    grid.style.gridTemplateColumns = "repeat(" + tokens.length + ", var(--small-cell))";
  }
  tokens.forEach((token, row) => {
    if (withLabels) grid.appendChild(element("div", "row-label" + segment(row), token));
    matrix[row].forEach((value, column) => {
      const cell = element("div", "cell");
      cell.style.background = shade(value / top);
      cell.title = token + " → " + tokens[column] + ": " + value.toFixed(3);
      grid.appendChild(cell);
    });
  });
  return grid;
}

function similarityTable(texts, vectors) {
  const norms = vectors.map((vector) => Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0)));
  const cosine = (a, b) => vectors[a].reduce((sum, x, i) => sum + x * vectors[b][i], 0) /
    (norms[a] * norms[b] || 1);
  const short = (text) => (text.length > 40 ? text.slice(0, 39) + "…" : text);
  const grid = element("div", "heatmap similarity");
  grid.style.gridTemplateColumns = "max-content repeat(" + texts.length + ", 64px)";
  grid.appendChild(element("div", "corner", ""));
  texts.forEach((_, index) => grid.appendChild(element("div", "col-label", "#" + (index + 1))));
  texts.forEach((text, row) => {
    grid.appendChild(element("div", "row-label", "#" + (row + 1) + " " + short(text)));
    texts.forEach((__, column) => {
      const value = cosine(row, column);
      const cell = element("div", "cell", value.toFixed(2));
      cell.style.background = shade(Math.max(0, value));
      cell.style.color = value > 0.6 ? "white" : "inherit";
      grid.appendChild(cell);
    });
  });
  return grid;
}

// --- Chinese characters ---------------------------------------------------------------------

const CJK_FONT = '"bertlab CJK"';  // style.css's @font-face: the server's Noto Sans CJK SC
const CJK_SAMPLE = "中";

// Whether the page's font stack draws a CJK character: its pixels differ from those of a
// character no font has (U+10FFFD, private use), which the browser draws as the missing-glyph box.
function drawsCjk() {
  const canvas = document.createElement("canvas");
  canvas.width = 40;
  canvas.height = 40;
  const context = canvas.getContext("2d", { willReadFrequently: true });
  context.font = "32px " + getComputedStyle(document.documentElement).fontFamily;
  context.textBaseline = "top";
  const pixels = (text) => {
    context.clearRect(0, 0, canvas.width, canvas.height);
    context.fillText(text, 2, 2);
    return context.getImageData(0, 0, canvas.width, canvas.height).data.join();
  };
  return pixels(CJK_SAMPLE) !== pixels("\u{10FFFD}");
}

// Without a CJK font of the system's, load the server's and name it in the font stacks (the
// class cjk-font); if the characters are still boxes, say so in one line.
// data-cjk on <html> says which: "system", "served" (the server's font) or "boxes".
async function checkCjk() {
  const root = document.documentElement;
  if (drawsCjk()) {
    root.dataset.cjk = "system";
    return;
  }
  try {
    const loaded = await document.fonts.load("16px " + CJK_FONT, CJK_SAMPLE);
    if (loaded.length > 0) root.classList.add("cjk-font");
  } catch (error) {
    // the font did not load (the server has none: 404); the check below says so
  }
  const draws = drawsCjk();
  document.getElementById("cjk-warning").hidden = draws;
  root.dataset.cjk = draws ? "served" : "boxes";
}

// --- wiring ---------------------------------------------------------------------------------

function showView(name) {
  for (const tab of document.querySelectorAll("#tabs button")) {
    tab.setAttribute("aria-selected", String(tab.dataset.view === name));
  }
  for (const view of document.querySelectorAll(".view")) {
    view.hidden = view.id !== "view-" + name;
  }
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
}

function setUpView(name) {
  const view = views[name];
  const select = document.getElementById(name + "-model");
  const capable = state.models.filter((model) => model.capabilities.includes(name));
  for (const model of capable) {
    const option = element("option", "", model.name + " (" + model.architecture + ")");
    option.value = model.name;
    select.appendChild(option);
  }
  const tab = document.querySelector("#tabs button[data-view='" + name + "']");
  if (capable.length === 0) {
    tab.disabled = true;
    tab.title = "none of the served models can do this";
    return;
  }
  const onModel = () => view.onModel && view.onModel(modelNamed(select.value));
  select.addEventListener("change", onModel);
  onModel();
  const form = document.getElementById(name + "-form");
  const button = document.getElementById(name + "-run");
  const errorBox = document.getElementById(name + "-error");
  const resultBox = document.getElementById(name + "-result");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    errorBox.textContent = "";
    resultBox.setAttribute("aria-busy", "true");
    try {
      resultBox.replaceChildren(await view.run());
      resultBox.dataset.done = String(Number(resultBox.dataset.done || 0) + 1);
    } catch (error) {
      errorBox.textContent = error.message;
      resultBox.replaceChildren();
    } finally {
      button.disabled = false;
      resultBox.removeAttribute("aria-busy");
    }
  });
}

async function start() {
  checkCjk();
  try {
    const answer = await callApi("/api/models");
    state.models = answer.models;
    state.limits = answer.limits;
  } catch (error) {
    document.getElementById("models-summary").textContent = "Cannot reach the server: " + error.message;
    return;
  }
  // Each model with what it can do (its capabilities: the views that list it).
  const names = state.models.map((model) => model.name + " (" +
    (model.is_causal ? "left-to-right " : "") + model.architecture + ", " + model.num_layers +
    " layers, " + (model.num_heads ? model.num_heads + " heads, " : "") + "hidden " +
    model.hidden_size + "): " +
    model.capabilities.join(", "));
  document.getElementById("models-summary").textContent = "Models: " + names.join("; ");
  for (const name of Object.keys(views)) setUpView(name);
  for (const id of ["attention-head", "attention-show"]) {
    document.getElementById(id).addEventListener("change", () => {
      if (state.attention) document.getElementById("attention-result").replaceChildren(drawAttention());
    });
  }
  document.getElementById("attention-layer").addEventListener("change", () => {
    if (state.attention) document.getElementById("attention-form").requestSubmit();
  });
  for (const tab of document.querySelectorAll("#tabs button")) {
    tab.addEventListener("click", () => showView(tab.dataset.view));
  }
  const enabled = [...document.querySelectorAll("#tabs button:not(:disabled)")].map((tab) => tab.dataset.view);
  const showWanted = () => {
    const wanted = location.hash.slice(1);
    showView(enabled.includes(wanted) ? wanted : enabled[0]);
  };
  window.addEventListener("hashchange", showWanted);
  showWanted();
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
