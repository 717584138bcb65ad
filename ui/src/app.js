// turbonet ui: the fabric of a running lab, kept live from /api/stream.
"use strict";

const $ = (id) => document.getElementById(id);
const links = new Map(); // name -> <g id="link-NAME">
const nodes = new Map(); // name -> <g id="node-NAME">
let selected = null;

function text(tag, content, cls) {
  const el = document.createElement(tag);
  el.textContent = content;
  if (cls) el.className = cls;
  return el;
}

async function loadLab() {
  const lab = await (await fetch("api/lab")).json();
  document.title = `turbonet: ${lab.name}`;
  $("lab-name").textContent = lab.name;
  $("summary").textContent =
    `${lab.switches} switches, ${lab.hosts} hosts, ${lab.links} links, routing ${lab.routing}`;
  if (lab.tasks.length > 0) {
    $("tasks").hidden = false;
    $("score").textContent = `(${lab.points} points)`;
    const list = $("task-list");
    for (const t of lab.tasks) {
      const li = document.createElement("li");
      li.id = `task-${t.name}`;
      li.append(text("strong", t.name), ` ${t.title} `, text("span", `(${t.points})`, "note"));
      list.append(li);
    }
  }
}

async function loadGraph() {
  // The page's own query (`?segment=3`, `?pod=0&plane=1`) narrows the picture.
  const reply = await fetch(`graph.svg${location.search}`);
  const svg = await reply.text();
  if (!reply.ok) {
    let why = svg;
    try {
      why = JSON.parse(svg).error;
    } catch {
      // Not JSON: a query the server could not read, said in plain text.
    }
    $("fabric").textContent = `cannot draw the fabric: ${why}`;
    return;
  }
  const host = $("fabric");
  host.innerHTML = svg;
  for (const g of host.querySelectorAll('g[id^="link-"]')) {
    const name = g.id.slice("link-".length);
    g.classList.add("link");
    links.set(name, g);
    const line = g.querySelector("line");
    if (line) {
      // A wider, invisible line to click.
      const hit = line.cloneNode();
      hit.setAttribute("class", "hit");
      g.append(hit);
      line.dataset.stroke = line.getAttribute("stroke");
    }
    g.addEventListener("click", () => showLink(name));
  }
  for (const g of host.querySelectorAll('g[id^="node-"]')) {
    g.classList.add("node");
    nodes.set(g.id.slice("node-".length), g);
  }
}

function setDown(name, down, at) {
  const g = links.get(name);
  if (!g || g.classList.contains("down") === down) return;
  g.classList.toggle("down", down);
  // When the page showed it: a test reads this.
  g.dataset.changedAt = String(at ?? Date.now());
}

// A reading of every link: down, and load.
function applyLive(live) {
  const status = $("status");
  if (live.error) {
    status.textContent = `lab unreachable: ${live.error}`;
    status.classList.add("bad");
    return;
  }
  if (live.t == null) return;
  status.classList.remove("bad");
  const down = new Set(live.down);
  for (const [name, g] of links) {
    setDown(name, down.has(name));
    const line = g.querySelector("line:not(.hit)");
    if (!line) continue;
    // Busy links in the colour `turbonet graph` gives their load; idle
    // ones as drawn.
    line.style.stroke = live.colour[name] ?? "";
    const load = live.load[name];
    g.dataset.load = load === undefined ? "" : `${Math.round(load * 100)}%`;
  }
  const nodesDown = new Set(live.nodes_down);
  for (const [name, g] of nodes) g.classList.toggle("down", nodesDown.has(name));
  lastReading = live.t;
  showStatus();
  if (selected) refreshRates(selected);
}

let lastReading = null;

// The header: the last reading's time, and the links the page shows down.
function showStatus() {
  if (lastReading == null) return;
  const down = [...links.values()].filter((g) => g.classList.contains("down")).length;
  $("status").textContent = `live · t = ${lastReading.toFixed(1)} s · ${down} link(s) down`;
}

// An event marks its link at once; the next reading confirms it.
function applyEvent(e) {
  const li = document.createElement("li");
  li.append(text("span", e.t.toFixed(2), "t"), text("span", e.event));
  if (e.result && e.result !== "ok") li.append(" ", text("span", e.result, "error"));
  const list = $("events");
  list.prepend(li);
  while (list.children.length > 200) list.lastChild.remove();
  if (e.result !== "ok") return;
  const on = e.kind === "restore" ? false : e.kind === "fail" ? true : null;
  if (on === null) return;
  if (e.link) setDown(e.link, on);
  if (e.node) {
    for (const [name] of links) {
      if (name.split("--").includes(e.node)) setDown(name, on);
    }
  }
  showStatus();
}

function row(cells, numeric) {
  const tr = document.createElement("tr");
  cells.forEach((c, i) => tr.append(text("td", c, numeric && i > 0 ? "num" : "")));
  return tr;
}

function rate(bps) {
  if (bps >= 1e9) return `${(bps / 1e9).toFixed(2)} Gbit/s`;
  if (bps >= 1e6) return `${(bps / 1e6).toFixed(2)} Mbit/s`;
  if (bps >= 1e3) return `${(bps / 1e3).toFixed(1)} kbit/s`;
  return `${bps.toFixed(0)} bit/s`;
}

async function showLink(name) {
  if (selected) links.get(selected)?.classList.remove("selected");
  selected = name;
  links.get(name)?.classList.add("selected");
  $("link-panel").hidden = false;
  $("link-title").textContent = name;
  const body = $("link-body");
  body.textContent = "reading…";
  const reply = await fetch(`api/link/${encodeURIComponent(name)}`);
  const panel = await reply.json();
  if (!reply.ok) {
    body.textContent = panel.error;
    return;
  }
  body.textContent = "";
  const { show } = panel;
  const params = document.createElement("table");
  params.append(row(["state", show.down ? "down" : "up"]), row(["engine", show.engine]));
  let set = 0;
  for (const [key, value] of Object.entries(show.params)) {
    if (value === null || value === undefined) continue;
    params.append(row([key, typeof value === "string" ? value : JSON.stringify(value)]));
    set += 1;
  }
  if (set === 0) params.append(row(["parameters", "none: the link as the kernel makes it"]));
  const rates = document.createElement("table");
  rates.id = "link-rates";
  body.append(params, text("h2", "Now"), rates);
  fillRates(rates, panel.rates);
}

function fillRates(table, rates) {
  table.textContent = "";
  const head = document.createElement("tr");
  for (const h of ["direction", "rate", "frames/s", "drops/s", "queue"]) head.append(text("th", h));
  table.append(head);
  for (const d of rates) {
    table.append(
      row(
        [
          `${d.from} → ${d.to}`,
          rate(d.bits_per_second),
          d.frames_per_second.toFixed(0),
          (d.loss_per_second + d.queue_drops_per_second).toFixed(0),
          String(d.queue_packets),
        ],
        true,
      ),
    );
  }
}

let refreshing = false;
async function refreshRates(name) {
  const table = $("link-rates");
  if (!table || refreshing) return;
  refreshing = true;
  try {
    const reply = await fetch(`api/link/${encodeURIComponent(name)}`);
    if (reply.ok && selected === name) fillRates(table, (await reply.json()).rates);
  } finally {
    refreshing = false;
  }
}

async function check() {
  const button = $("check");
  button.disabled = true;
  $("check-note").textContent = "grading…";
  try {
    const reply = await fetch("api/check", { method: "POST" });
    const grade = await reply.json();
    if (!reply.ok) {
      $("check-note").textContent = grade.error;
      return;
    }
    $("score").textContent = `${grade.earned}/${grade.points}`;
    for (const t of grade.tasks) {
      const li = $(`task-${t.name}`);
      if (!li) continue;
      li.querySelectorAll(".pass, .fail, .why").forEach((el) => el.remove());
      const passed = t.earned === t.points;
      li.prepend(text("span", passed ? "✓ " : "✗ ", passed ? "pass" : "fail"));
      for (const c of t.checks.filter((c) => !c.ok)) {
        li.append(text("span", c.problem ?? c.check, "why"));
      }
    }
    $("check-note").textContent = `graded in ${grade.seconds.toFixed(1)} s`;
  } finally {
    button.disabled = false;
  }
}

async function main() {
  await loadLab();
  await loadGraph();
  $("check").addEventListener("click", check);
  const stream = new EventSource("api/stream");
  stream.addEventListener("live", (m) => applyLive(JSON.parse(m.data)));
  stream.addEventListener("event", (m) => applyEvent(JSON.parse(m.data)));
  stream.onerror = () => {
    $("status").textContent = "disconnected: retrying…";
    $("status").classList.add("bad");
  };
  document.body.dataset.ready = "true";
}

main();
