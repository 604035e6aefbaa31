// The report's task table and rollout browser. Reads two inline JSON blocks: #ng-data (columns
// per task and per rollout) and #ng-chunks (conversations, deflate-compressed, base64, CHUNK
// rollouts each). Only one page of the table and one conversation are ever in the DOM; a chunk
// is inflated when one of its rollouts is opened. Every text from the data is set with
// textContent, never parsed as HTML.
"use strict";
(() => {
  const DATA = JSON.parse(document.getElementById("ng-data").textContent);
  const CHUNKS = JSON.parse(document.getElementById("ng-chunks").textContent);
  const T = DATA.tasks, R = DATA.rollouts, F = DATA.failures;
  const PAGE = 50;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...children) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "text") node.textContent = value;
      else if (key === "onclick") node.addEventListener("click", value);
      else node.setAttribute(key, value);
    }
    for (const child of children) if (child != null) node.append(child);
    return node;
  };
  const fmt = (v, digits = 3) => (v == null ? "–" : Number.isInteger(v) ? String(v) : v.toFixed(digits));
  const passes = (r) => (DATA.threshold == null ? r > 0 : r >= DATA.threshold);

  const rolloutsOf = new Map();
  for (let i = 0; i < R.task.length; i++) {
    if (!rolloutsOf.has(R.task[i])) rolloutsOf.set(R.task[i], []);
    rolloutsOf.get(R.task[i]).push(i);
  }
  const failuresOf = new Map();
  for (let i = 0; i < F.task.length; i++) {
    if (!failuresOf.has(F.task[i])) failuresOf.set(F.task[i], []);
    failuresOf.get(F.task[i]).push({ repeat: F.repeat[i], kind: F.kind[i] });
  }
  const rowOf = new Map(T.task.map((task, i) => [task, i]));

  // ---- the task table: filter, sort, page ----
  const COLUMNS = [
    ["task", "task", (i) => T.task[i]],
    ["agent", "agent", (i) => DATA.agents[T.agent[i]]],
    ["prompt", "prompt", (i) => T.prompt[i]],
    ["n", "rollouts", (i) => T.n[i]],
    ["mean", "mean reward", (i) => T.mean[i]],
    ["pass", `pass@${DATA.k}`, (i) => T.pass[i]],
    ["passing", "passing", (i) => T.passing[i]],
    ["failed", "failed", (i) => T.failed[i]],
  ];
  let view = T.task.map((_, i) => i);
  let page = 0, sortKey = "task", sortDir = 1, selected = null;

  function matches(i, text, mode) {
    if (mode === "failed" && !T.failed[i]) return false;
    if (mode === "unsolved" && T.pass[i] !== 0) return false;
    if (mode === "incomplete" && T.pass[i] !== null) return false;
    if (!text) return true;
    return String(T.task[i]) === text || T.prompt[i].toLowerCase().includes(text) ||
      DATA.agents[T.agent[i]].toLowerCase().includes(text);
  }
  function refilter() {
    const text = $("filter").value.trim().toLowerCase(), mode = $("mode").value;
    view = T.task.map((_, i) => i).filter((i) => matches(i, text, mode));
    resort();
  }
  function resort() {
    const get = COLUMNS.find((c) => c[0] === sortKey)[2];
    view.sort((a, b) => {
      const x = get(a), y = get(b);
      if (x === y) return T.task[a] - T.task[b];
      if (x == null) return 1;
      if (y == null) return -1;
      return (x < y ? -1 : 1) * sortDir;
    });
    page = 0;
    renderTable();
  }
  function renderTable() {
    const head = $("tasks").tHead.rows[0];
    head.replaceChildren(...COLUMNS.map(([key, label]) => el("th", {
      class: "sortable" + (key === "prompt" || key === "agent" ? " text" : ""), "data-key": key,
      text: label + (key === sortKey ? (sortDir > 0 ? " ▲" : " ▼") : ""),
      onclick: () => { sortDir = key === sortKey ? -sortDir : 1; sortKey = key; resort(); },
    })));
    const rows = view.slice(page * PAGE, (page + 1) * PAGE).map((i) => {
      const tr = el("tr", { "data-task": T.task[i], onclick: () => selectTask(T.task[i]) },
        ...COLUMNS.map(([key, , get]) => {
          const v = get(i);
          const text = key === "pass" ? (v == null ? "–" : v ? "yes" : "no") : typeof v === "number" ? fmt(v) : v;
          return el("td", { class: key === "prompt" || key === "agent" ? "text" : "", text });
        }));
      if (T.task[i] === selected) tr.classList.add("selected");
      return tr;
    });
    $("tasks").tBodies[0].replaceChildren(...rows);
    const pages = Math.max(1, Math.ceil(view.length / PAGE));
    $("page").textContent = view.length
      ? `tasks ${page * PAGE + 1}–${Math.min(view.length, (page + 1) * PAGE)} of ${view.length} (page ${page + 1}/${pages})`
      : "no task matches";
    $("prev").disabled = page === 0;
    $("next").disabled = page + 1 >= pages;
  }
  $("filter").addEventListener("input", refilter);
  $("mode").addEventListener("change", refilter);
  $("prev").addEventListener("click", () => { page--; renderTable(); });
  $("next").addEventListener("click", () => { page++; renderTable(); });

  // ---- the rollout browser ----
  const cache = new Map();
  async function chunk(c) {
    if (!cache.has(c)) {
      const bytes = Uint8Array.from(atob(CHUNKS[c]), (ch) => ch.charCodeAt(0));
      const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
      cache.set(c, new Response(stream).text().then(JSON.parse));
      if (cache.size > 8) cache.delete(cache.keys().next().value);
    }
    return cache.get(c);
  }

  function selectTask(task, repeat) {
    if (!rowOf.has(task)) return;
    selected = task;
    renderTable();
    const i = rowOf.get(task);
    $("browser-title").textContent = `task ${task} · ${DATA.agents[T.agent[i]]}`;
    const done = new Map((rolloutsOf.get(task) || []).map((pos) => [R.repeat[pos], pos]));
    const failed = new Map((failuresOf.get(task) || []).map((f) => [f.repeat, f.kind]));
    const repeats = [...new Set([...done.keys(), ...failed.keys()])].sort((a, b) => a - b);
    $("repeats").replaceChildren(...repeats.map((r) => done.has(r)
      ? el("button", { class: "repeat", "data-repeat": r, text: `repeat ${r} · ${fmt(R.reward[done.get(r)])}`,
        onclick: () => openRollout(task, r, done.get(r)) })
      : el("button", { class: "repeat failed", disabled: "", text: `repeat ${r} · failed: ${failed.get(r)}` })));
    const first = repeat != null && done.has(repeat) ? repeat : repeats.find((r) => done.has(r));
    if (first != null) openRollout(task, first, done.get(first));
    else $("conversation").replaceChildren(el("p", { class: "empty", text: "Every repeat of this task failed; see the failures file." }));
  }

  async function openRollout(task, repeat, pos) {
    for (const b of $("repeats").children) b.classList.toggle("active", b.dataset.repeat === String(repeat));
    history.replaceState(null, "", `#task=${task}&repeat=${repeat}`);
    const rows = await chunk(Math.floor(pos / DATA.chunk));
    renderConversation(rows[pos % DATA.chunk], R.reward[pos]);
  }

  function renderConversation(row, reward) {
    const verdict = el("div", { class: "verdict" },
      el("span", { class: "reward " + (passes(reward) ? "pass" : "fail"), text: `reward ${fmt(reward)}` }),
      el("span", { text: `status: ${row.status}${row.why ? ` (${row.why})` : ""}` }),
      el("span", { class: "empty", text: `line ${row.line} of the rollouts file` }));
    const fields = el("table", { class: "fields" }, el("tbody", null,
      ...Object.entries(row.fields).map(([k, v]) => el("tr", null, el("td", { text: k }),
        el("td", { text: typeof v === "number" ? fmt(v, 4) : String(v) })))));
    const chat = el("div", { class: "chat" });
    for (const item of row.in) chat.append(renderItem(item));
    let turn = -1;
    for (const item of row.out) {
      if (item.turn != null && item.turn !== turn) {
        turn = item.turn;
        const tok = row.tok[turn];
        chat.append(el("div", { class: "turn", text: `model turn ${turn + 1}` +
          (tok ? ` · ${tok[0]} prompt tokens, ${tok[1]} generated` : "") }));
      }
      chat.append(renderItem(item));
    }
    $("conversation").replaceChildren(verdict, fields, chat);
  }

  function renderItem(item) {
    switch (item.k) {
      case "msg":
        return el("div", { class: `msg role-${item.role}` }, el("div", { class: "who", text: item.role }),
          el("div", { class: "text", text: item.text }));
      case "reason":
        return el("details", { class: "reasoning" }, el("summary", { text: `reasoning (${item.text.length} characters)` }),
          el("pre", { class: "text", text: item.text }));
      case "call":
        return el("div", { class: "msg tool-call" }, el("div", { class: "who", text: `tool call · ${item.name}` }),
          el("pre", { class: "code", text: item.args }));
      case "result":
        return el("div", { class: "msg tool-result" }, el("div", { class: "who", text: "tool output" }),
          el("pre", { class: "code", text: item.text }));
      default:
        return el("div", { class: "msg" }, el("div", { class: "who", text: item.type }),
          el("pre", { class: "code", text: item.text }));
    }
  }

  renderTable();
  const hash = new URLSearchParams(location.hash.slice(1));
  if (hash.has("task")) selectTask(Number(hash.get("task")), hash.has("repeat") ? Number(hash.get("repeat")) : null);
  document.body.dataset.ready = "true";
})();
