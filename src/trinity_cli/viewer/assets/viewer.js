/* trinity inspect's pages, drawn from the page dicts of viewer/pages.py.
 *
 * Served (`trinity inspect --serve`): a page is fetched from api/KEY. Static (`--html DIR`):
 * data/KEY.js is added as a <script> that hands its page to TRINITY_PUT (browsers refuse
 * fetch() of file:// URLs, never a script), so the folder opens from disk with no server.
 *
 * Every text that comes from a run (questions, replies, prompts, code, answers, names) goes
 * into the page as a text node: nothing here parses HTML, so a reply holding <script> or
 * <img onerror> shows as written and runs nothing.
 *
 * A page's key comes from the URL (#/KEY), which anyone may write: only the keys of
 * viewer/pages.py are asked for (KEY below), and from disk only the keys the export lists in
 * its data/runs.js ("pages"), so no URL makes the page load a script of its choosing.
 */
(function () {
  "use strict";

  const MODE = (document.querySelector('meta[name="trinity-mode"]') || {}).content || "served";
  const main = document.getElementById("main");
  const where = document.getElementById("where");
  const live = document.getElementById("live");

  // -- elements --------------------------------------------------------------------------
  const SVG = "http://www.w3.org/2000/svg";

  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    setProps(el, props);
    append(el, children);
    return el;
  }

  function s(tag, attrs, ...children) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    append(el, children);
    return el;
  }

  function safeHref(url) {
    const u = String(url);
    return u.startsWith("#/") || u.startsWith("files/") ? u : "#/runs";
  }

  function setProps(el, props) {
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "href" || k === "src") el.setAttribute(k, safeHref(v));
      else if (k === "onclick" || k === "oninput" || k === "onchange") el.addEventListener(k.slice(2), v);
      else if (k === "checked" || k === "value" || k === "open") el[k] = v;
      else if (/^(title|type|placeholder|colspan|alt|data-[a-z-]+|name|id)$/.test(k)) el.setAttribute(k, String(v));
    }
  }

  function append(el, children) {
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
  }

  const link = (key, ...text) => h("a", { href: "#/" + key }, ...text);

  // Text of the report (captions, notes, titles) marks code `like this`, as Markdown does: the
  // marked parts shown as code, every part a text node; a backtick left unpaired is text.
  function prose(text) {
    const parts = String(text ?? "").split("`");
    if (parts.length % 2 === 0) parts.push(parts.splice(-2).join("`"));
    return parts.map((part, i) => (i % 2 ? h("code", {}, part) : part)).filter((p) => p !== "");
  }

  // -- data --------------------------------------------------------------------------------
  const loaded = new Map();
  const waiting = new Map();
  // The keys of viewer/pages.py's docstring; nothing else is ever asked for.
  const KEY = /^(runs|run\/run-\d{1,9}(\/item\/\d{1,9}|\/gen\/\d{1,9}(\/item\/\d{1,9})?)?|compare\/run-\d{1,9}\/run-\d{1,9}(\/item\/\d{1,9})?)$/;
  let held = null; // from disk: the keys data/runs.js says the export holds
  const notHeld = (key) => new Error("this export does not hold " + JSON.stringify(key) +
    " (it holds what it was written with: start from the runs list)");

  window.TRINITY_PUT = function (key, data) {
    loaded.set(key, data);
    (waiting.get(key) || []).forEach((resolve) => resolve(data));
    waiting.delete(key);
  };

  function loadStatic(key) {
    if (loaded.has(key)) return Promise.resolve(loaded.get(key));
    if (key !== "runs" && !(KEY.test(key) && held && held.has(key))) return Promise.reject(notHeld(key));
    return new Promise((resolve, reject) => {
      if (!waiting.has(key)) waiting.set(key, []);
      waiting.get(key).push(resolve);
      const script = document.createElement("script");
      script.src = "data/" + key + ".js";
      script.onload = () => {
        script.remove();
        if (!loaded.has(key)) reject(new Error("data/" + key + ".js holds no page"));
      };
      script.onerror = () => {
        script.remove();
        waiting.delete(key);
        reject(notHeld(key));
      };
      document.head.appendChild(script);
    });
  }

  async function loadServed(key) {
    if (!KEY.test(key)) throw new Error("no page " + JSON.stringify(key) + " — start from the runs list");
    const response = await fetch("api/" + key, { cache: "no-store" });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error + (data.hint ? " — " + data.hint : ""));
    return data;
  }

  async function load(key) {
    const page = await (MODE === "static" ? loadStatic(key) : loadServed(key));
    if (MODE === "static" && key === "runs") held = new Set(page.pages || []);
    return page;
  }

  // -- cells -----------------------------------------------------------------------------
  function outcome(r) {
    if (r === null || r === undefined) return "none";
    if (r >= 1) return "right";
    if (r <= 0) return "wrong";
    return "partial";
  }
  const MARK = { right: "✓", wrong: "✗", partial: "~", none: "·" };

  function badge(reward) {
    const o = outcome(reward);
    const text = o === "partial" ? reward.toFixed(2) : o === "none" ? "no result" : o;
    return h("span", { class: "badge " + o }, text);
  }

  function when(created) {
    if (!created) return "";
    const d = new Date(created * 1000);
    const pad = (n) => String(n).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function table(t) {
    const numeric = (i) => i >= t.numeric_from;
    return h("div", {},
      t.title ? h("h3", {}, prose(t.title)) : null,
      h("table", { class: "view" },
        h("thead", {}, h("tr", {}, t.header.map((c, i) => h("th", { class: numeric(i) ? "num" : "" }, c)))),
        h("tbody", {}, t.rows.map((row, r) => h("tr", { class: t.kinds[r] ? "kind-" + t.kinds[r] : "" },
          row.map((c, i) => h("td", { class: numeric(i) ? "num" : "" }, c)))))));
  }

  function facts(pairs) {
    return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
  }

  // -- the runs list ---------------------------------------------------------------------
  const picked = new Set();

  function runsView(page) {
    const compare = h("button", { onclick: () => {
      const [a, b] = [...picked];
      location.hash = "#/compare/" + a + "/" + b;
    } }, "Compare the two picked runs");
    const refresh = () => { compare.disabled = picked.size !== 2; };
    refresh();
    const rows = [...page.runs].reverse().map((run) => h("tr", { class: run.status === "damaged" ? "damaged" : "", "data-run": run.id },
      h("td", { class: "pick" }, MODE === "served" && run.status !== "damaged" ? h("input", {
        type: "checkbox", checked: picked.has(run.id), title: "pick for comparing",
        onchange: (e) => { e.target.checked ? picked.add(run.id) : picked.delete(run.id); refresh(); } }) : null),
      h("td", {}, run.status === "damaged" ? run.id : link(run.key, run.id)),
      h("td", {}, run.kind), h("td", {}, when(run.created)), h("td", {}, run.status),
      h("td", {}, run.pool), h("td", { class: "head" }, run.head), h("td", { class: "num" }, run.items),
      h("td", { class: "headline" }, run.headline || run.title)));
    return h("div", {},
      h("h1", {}, "Runs"),
      page.runs.length ? null : h("p", { class: "muted" }, "No runs yet: trinity ask, bench or evolve make them."),
      page.compare ? h("p", { class: "controls" }, link(page.compare, "The two runs compared")) : null,
      MODE === "served" ? h("p", { class: "controls" }, compare,
        h("span", { class: "muted" }, "two bench runs: the items whose result changed; two evolve runs: settings and curves together; two ask runs: side by side")) : null,
      h("table", { class: "runs" },
        h("thead", {}, h("tr", {}, ["", "run", "kind", "date", "status", "pool", "head", "items", "headline"].map(
          (c) => h("th", { class: c === "items" ? "num" : "" }, c)))),
        h("tbody", {}, rows)));
  }

  // -- the grid: items x systems (or candidates) -----------------------------------------
  const gridState = new Map(); // a grid's filters, kept while the page is open
  const hiddenColumns = new Set(); // systems left out, of the grid and of an item's page

  function gridView(grid, compare) {
    const state = gridState.get(grid.item) || { text: "", task: "", disagree: false };
    gridState.set(grid.item, state);
    const tasks = [...new Set(grid.rows.map((r) => r.task))];
    const count = h("span", { class: "muted count" });
    const body = h("tbody", {});
    const headRow = h("tr", {});
    const pick = h("div", { class: "columns-pick" });
    const visible = () => grid.columns.map((c, i) => i).filter((i) => !hiddenColumns.has(grid.columns[i].name));

    function differs(row, cols) {
      if (compare) return cols.some((i) => row.cells[i][0] !== row.cells[i][1]);
      const seen = new Set(cols.map((i) => outcome(row.cells[i])).filter((o) => o !== "none"));
      return seen.size > 1;
    }

    function draw() {
      const cols = visible();
      clear(headRow);
      append(headRow, [h("th", {}, "item"), h("th", {}, "task"),
        cols.map((i) => h("th", { class: "colname", title: grid.columns[i].name }, grid.columns[i].name)), h("th", {}, "question")]);
      clear(body);
      const needle = state.text.trim().toLowerCase();
      let shown = 0;
      for (const row of grid.rows) {
        if (state.task && row.task !== state.task) continue;
        if (state.disagree && !differs(row, cols)) continue;
        if (needle && !(row.text.toLowerCase().includes(needle) || row.id.toLowerCase().includes(needle))) continue;
        shown += 1;
        const open = () => { location.hash = "#/" + grid.item + row.i; };
        body.appendChild(h("tr", { class: "row", onclick: open, "data-i": String(row.i) },
          h("td", {}, link(grid.item + row.i, row.id)), h("td", {}, row.task),
          cols.map((i) => {
            if (compare) { // two halves, the first run's result then the second's, a gap between them
              const [a, b] = row.cells[i];
              const cls = "cell pair" + (a !== b ? " changed" : "");
              return h("td", { class: cls, title: `${grid.columns[i].name}: ${outcome(a)} → ${outcome(b)}` },
                h("span", { class: "half " + outcome(a) }, MARK[outcome(a)]), h("span", { class: "half " + outcome(b) }, MARK[outcome(b)]));
            }
            const o = outcome(row.cells[i]);
            return h("td", { class: "cell " + o, title: `${grid.columns[i].name}: ${o}` }, MARK[o]);
          }),
          h("td", { class: "text", title: row.text.slice(0, 400) }, row.text.slice(0, 140))));
      }
      count.textContent = `${shown} of ${grid.rows.length} items`;
    }

    for (const c of grid.columns) {
      pick.appendChild(h("label", {}, h("input", { type: "checkbox", checked: !hiddenColumns.has(c.name), onchange: (e) => {
        e.target.checked ? hiddenColumns.delete(c.name) : hiddenColumns.add(c.name); draw(); } }), " ", c.name));
    }
    const controls = h("div", { class: "controls" },
      h("input", { type: "search", placeholder: "search the questions", value: state.text, oninput: (e) => { state.text = e.target.value; draw(); } }),
      tasks.length > 1 ? h("select", { onchange: (e) => { state.task = e.target.value; draw(); } },
        h("option", { value: "" }, "every task"), tasks.map((t) => { const o = h("option", { value: t }, t); o.selected = t === state.task; return o; })) : null,
      h("label", {}, h("input", { type: "checkbox", name: "disagree", checked: state.disagree, onchange: (e) => { state.disagree = e.target.checked; draw(); } }),
        compare ? " only cells that changed" : " only where the shown columns disagree"),
      count);
    draw();
    return h("div", { class: "gridbox" }, controls, h("details", {}, h("summary", {}, "columns shown"), pick),
      h("table", { class: "grid" }, h("thead", {}, headRow), body));
  }

  // -- an episode, turn by turn ------------------------------------------------------------
  function probs(names, values, chosen) {
    if (!values || !values.length) return null;
    return h("div", { class: "probs" }, values.map((p, i) => [
      h("span", { class: names[i] === chosen ? "chosen" : "" }, names[i] || "#" + i),
      h("div", { class: "bar" }, (() => { const b = h("span", {}); b.style.width = (100 * p).toFixed(1) + "%"; return b; })()),
      h("span", { class: "num" }, p.toFixed(2))]));
  }

  // Columns whose turns a coordinator chose: their probabilities are shown open.
  const DECIDED = new Set(["head", "random", "candidate", "coordinator"]);

  function turnView(t, models, roles, kind) {
    const meta = [];
    meta.push(`${t.prompt_tokens ?? 0}→${t.completion_tokens ?? 0} tokens`);
    if (t.latency_s !== undefined) meta.push(`${Number(t.latency_s).toFixed(1)} s`);
    if (t.coordinator_s) meta.push(`coordinator ${(1000 * t.coordinator_s).toFixed(0)} ms`);
    if (t.cached) meta.push("cached");
    if (t.cost_usd) meta.push(`$${Number(t.cost_usd).toFixed(5)}`);
    if (t.attempt) meta.push(`attempt ${t.attempt + 1} (temperature ${t.temperature}, seed ${t.sample_seed})`);
    if (t.alone) meta.push("asked alone");
    if (t.vote) meta.push("a vote");
    if (t.agreed_with !== undefined) meta.push(`agreed with turn ${t.agreed_with + 1}`);
    if (t.truncated_turns) meta.push(`${t.truncated_turns} earlier turns left out of its prompt`);
    if (t.finish_reason && t.finish_reason !== "stop") meta.push(`finished: ${t.finish_reason}`);
    const exe = t.execution;
    const messages = t.messages || [];
    return h("div", { class: "turn role-" + t.role },
      h("div", { class: "turn-head" }, `turn ${(t.index ?? 0) + 1} · ${t.model} · ${t.role}`,
        t.chosen_role && t.chosen_role !== t.role ? h("span", { class: "muted" }, ` (chosen: ${t.chosen_role})`) : null,
        t.verdict ? h("span", { class: "verdict-" + t.verdict }, ` · ${t.verdict}` + (t.verdict_source ? ` (${t.verdict_source})` : "")) : null,
        t.suggestion ? h("span", { class: "muted" }, ` · next: ${t.suggestion}`) : null),
      h("div", { class: "turn-meta" }, meta.join(" · ")),
      t.override ? h("div", { class: "turn-meta" }, t.override) : null,
      t.model_probs && t.model_probs.length ? h("details", { class: "decision", open: DECIDED.has(kind) },
        h("summary", {}, "coordinator: member and role probabilities"),
        probs(models, t.model_probs, t.model), probs(roles, t.role_probs, t.chosen_role)) : null,
      h("details", { class: "prompt" }, h("summary", {}, `prompt (${messages.length} messages)`),
        messages.map((m) => [h("div", { class: "message-role" }, m.role), h("pre", {}, m.content)])),
      h("pre", { class: "reply" }, t.reply ?? ""),
      exe ? h("details", { class: "execution" },
        h("summary", {}, `code run: exit ${exe.returncode}` + (exe.timed_out ? ", timed out" : "") +
          (exe.answer !== undefined && exe.answer !== null ? `, answer ${String(exe.answer).slice(0, 60)}` : "")),
        h("div", { class: "message-role" }, "code"), h("pre", {}, exe.code ?? ""),
        exe.stdout ? [h("div", { class: "message-role" }, "stdout"), h("pre", {}, exe.stdout)] : null,
        exe.stderr ? [h("div", { class: "message-role" }, "stderr"), h("pre", {}, exe.stderr)] : null) : null,
      t.examples ? h("details", {}, h("summary", {}, "examples run"), h("pre", {}, JSON.stringify(t.examples, null, 1))) : null);
  }

  const STOPS = { accepted: "accepted by a verifier", agreed: "two answers agreed", max_turns: "turn budget spent",
    read: "the reader said stop", token_budget: "token budget spent", cost_budget: "cost budget spent",
    workflow: "workflow run", fallback: "workflow refused: the agree procedure ran" };

  function episodeView(ep, models, roles, kind) {
    const tr = ep.transcript || {};
    return h("div", { class: "episode" },
      ep.error ? h("div", { class: "col-note error" }, ep.error) : null,
      tr.workflow ? h("details", { class: "workflow" }, h("summary", {}, "the workflow the conductor wrote"),
        h("pre", {}, JSON.stringify(tr.workflow, null, 1))) : null,
      (tr.turns || []).map((t) => turnView(t, models, roles, kind)),
      h("div", { class: "ending" },
        h("div", {}, `ended: ${STOPS[tr.stop_reason] || tr.stop_reason || "?"}` + (tr.accepted ? " (accepted)" : "") +
          ` · ${(tr.prompt_tokens ?? 0) + (tr.completion_tokens ?? 0)} tokens` + (ep.seed !== null && ep.seed !== undefined ? ` · seed ${ep.seed}` : "")),
        h("details", {}, h("summary", {}, "answer"), h("pre", {}, tr.answer ?? "(none)"))));
  }

  // The episodes side by side in a pane no taller than the window, so its horizontal scrollbar
  // is on screen, never under the longest column; above it, a chip per column (its name and
  // result) that brings that column into the pane: every system in sight from the page's top.
  function columnsView(page) {
    const columns = page.columns.filter((c) => page.kind !== "item" || !hiddenColumns.has(c.name) || page.columns.length <= 2);
    const box = h("div", { class: "episodes" + (columns.length === 1 ? " single" : "") });
    const chips = h("div", { class: "systems" });
    for (const c of columns) {
      chips.appendChild(h("button", { class: "system", type: "button", "data-system": c.name, title: "show this column",
        onclick: () => {
          const col = [...box.children].find((el) => el.getAttribute("data-system") === c.name);
          if (col) box.scrollTo({ left: col.offsetLeft - box.firstChild.offsetLeft, top: 0 });
        } }, c.label || c.name, c.reward !== undefined && c.reward !== null ? badge(c.reward) : null));
      box.appendChild(h("section", { class: "episode-col", "data-system": c.name },
        h("div", { class: "col-head" }, h("span", { class: "name" }, c.label || c.name),
          c.reward !== undefined && c.reward !== null ? badge(c.reward) : null),
        c.note ? h("div", { class: "col-note" }, prose(c.note)) : null,
        c.episodes.length ? null : (c.note ? null : h("div", { class: "col-note" }, "no episode recorded")),
        c.episodes.map((ep) => episodeView(ep, c.models || page.models, page.roles, c.kind))));
    }
    return columns.length > 1 ? h("div", {}, chips, box) : box;
  }

  function itemView(page) {
    const hidden = page.columns.filter((c) => hiddenColumns.has(c.name)).length;
    return h("div", {},
      h("div", { class: "nav" }, link(page.back, "← back"), page.prev ? link(page.prev, "← previous item") : null,
        page.next ? link(page.next, "next item →") : null),
      h("h1", {}, page.title),
      page.question ? h("pre", { class: "question" }, page.question) : null,
      hidden && page.columns.length > 2 ? h("p", { class: "muted" }, `${hidden} columns hidden (the grid's "columns shown")`) : null,
      columnsView(page));
  }

  // -- charts (SVG, drawn here: no library) -----------------------------------------------
  function lineChart(title, series, yLabel) {
    const W = 460, H = 270, L = 52, R = 12, T = 44, B = 36;
    const pts = series.flatMap((sr) => sr.points);
    if (!pts.length) return null;
    const xs = pts.map((p) => p[0]), ys = pts.map((p) => p[1]);
    let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
    let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
    if (x0 === x1) { x0 -= 1; x1 += 1; }
    if (y0 === y1) { y0 -= 0.05 * (Math.abs(y0) || 1); y1 += 0.05 * (Math.abs(y1) || 1); }
    const pad = (y1 - y0) * 0.08; y0 -= pad; y1 += pad;
    const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
    const svg = s("svg", { class: "chart", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "data-title": title });
    svg.appendChild(s("text", { x: L, y: 16, "font-weight": 600 }, title));
    for (let k = 0; k <= 4; k++) {
      const y = y0 + ((y1 - y0) * k) / 4;
      svg.appendChild(s("line", { class: "grid", x1: L, x2: W - R, y1: Y(y), y2: Y(y) }));
      svg.appendChild(s("text", { x: L - 6, y: Y(y) + 4, "text-anchor": "end" }, y.toFixed(3)));
    }
    const xticks = [...new Set(xs)].sort((a, b) => a - b);
    const step = Math.ceil(xticks.length / 10);
    xticks.filter((_, i) => i % step === 0).forEach((x) => svg.appendChild(
      s("text", { x: X(x), y: H - B + 15, "text-anchor": "middle" }, x < 0 ? "start" : String(x))));
    svg.appendChild(s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    svg.appendChild(s("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
    svg.appendChild(s("text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" }, "generation"));
    svg.appendChild(s("text", { x: 12, y: (T + H - B) / 2, transform: `rotate(-90 12 ${(T + H - B) / 2})`, "text-anchor": "middle" }, yLabel));
    series.forEach((sr, n) => {
      if (!sr.points.length) return;
      const g = s("g", { class: "series", "data-name": sr.name });
      if (sr.points.length > 1) {
        g.appendChild(s("polyline", { fill: "none", stroke: sr.color, "stroke-width": 2,
          points: sr.points.map((p) => `${X(p[0])},${Y(p[1])}`).join(" ") }));
      }
      sr.points.forEach((p) => g.appendChild(s("circle", { class: "point", cx: X(p[0]), cy: Y(p[1]), r: 3.5, fill: sr.color },
        s("title", {}, `${sr.name}, ${p[0] < 0 ? "start" : "generation " + p[0]}: ${p[1].toFixed(4)}`))));
      svg.appendChild(g);
      svg.appendChild(s("rect", { x: L + 100 * n, y: 24, width: 10, height: 10, fill: sr.color }));
      svg.appendChild(s("text", { x: L + 14 + 100 * n, y: 33 }, sr.name));
    });
    return svg;
  }

  // One line of a curves chart: curve_points' `field` per generation, after the value at the
  // start (x = -1) when `start` is given and there are points.
  function curveSeries(c, field, name, color, start) {
    const points = c.points.filter((p) => p[field] !== null && p[field] !== undefined).map((p) => [p.generation, p[field]]);
    if (start !== null && start !== undefined && points.length) points.unshift([-1, start]);
    return { name, color, points };
  }

  function curvesView(c) {
    const series = (name, field, color) => curveSeries(c, field, name, color);
    const val = curveSeries(c, "val", "validation", "#2f9e5b");
    if (c.start_val !== null && c.start_val !== undefined) val.points.unshift([-1, c.start_val]); // even with no validation yet
    const sigma = curveSeries(c, "sigma", "sigma", "#9b4dca", c.sigma0);
    return h("div", { class: "svgcharts" },
      lineChart("fitness per generation", [series("best", "best", "#2a5db0"), series("mean", "mean", "#8aa4cf"), val], "fitness"),
      sigma.points.length ? lineChart("step size σ per generation", [sigma], "σ") : h("p", { class: "muted" }, "no step size kept for this run"));
  }

  // -- pages -------------------------------------------------------------------------------
  let runsIndex = null; // the runs this page knows (the export holds one)

  function benchView(page) {
    return h("div", {},
      h("h1", {}, page.heading), h("div", { class: "caption" }, prose(page.caption)),
      page.tables.map(table), page.report ? h("pre", { class: "report" }, page.report) : null,
      page.charts.length ? h("div", { class: "charts" }, page.charts.map((c) => h("img", { src: c.src, alt: c.name, title: c.name }))) : null,
      page.selection.length ? h("details", {}, h("summary", {}, "selection: each member's and role's share of turns"), page.selection.map(table)) : null,
      h("p", { class: "muted" }, prose(page.stats)), page.notes.map((n) => h("p", { class: "muted" }, "note: ", prose(n))),
      h("h2", {}, "Items × systems"),
      h("p", { class: "muted" }, "✓ right, ✗ wrong; click an item for every system's episode side by side."),
      gridView(page.grid, false));
  }

  function evolveView(page) {
    const v = page.verdict;
    const known = (id) => runsIndex && runsIndex.some((r) => r.id === id);
    return h("div", {},
      h("h1", {}, `${page.id} · ${page.title}`),
      facts(page.facts),
      page.live && MODE === "served" ? h("p", { class: "muted live-note" }, "under way: this page follows it as generations end") : null,
      page.state === "stopped" ? h("p", { class: "stopped-note" }, "stopped: no trinity process is writing this run (it was killed, or it was made elsewhere)") : null,
      page.under_way ? h("p", {}, page.under_way) : null,
      page.resume && !page.live ? h("p", { class: "muted" }, "finish it: ", h("code", {}, page.resume)) : null,
      v ? h("p", {}, `verdict: ${v.winner} validates best` ,
        v.validate_named ? [" · validation: ", known(v.validate_named) ? link("run/" + v.validate_named, v.validate_named + " (bench)") : v.validate_named + " (not here)"] : null) : null,
      h("h2", {}, "Curves"), curvesView(page.curves),
      page.tables.map(table),
      h("h2", {}, "Generations"),
      page.generations.length ? h("table", { class: "view gens" },
        h("thead", {}, h("tr", {}, ["generation", "candidates", "best", "mean", "validation"].map((c) => h("th", {}, c)))),
        h("tbody", {}, page.generations.map((g) => h("tr", {},
          h("td", {}, link(g.key, "generation " + g.generation)), h("td", { class: "num" }, g.candidates ?? ""),
          ["best", "mean", "val"].map((k) => h("td", { class: "num" }, g[k] === null || g[k] === undefined ? "—" : g[k].toFixed(3)))))))
        : h("p", { class: "muted" }, "no generation written yet"));
  }

  function generationView(page) {
    return h("div", {}, h("div", { class: "nav" }, link(page.back, "← " + page.id)), h("h1", {}, page.title),
      h("p", { class: "muted" }, "Each candidate's reward on the generation's items; click an item for every candidate's episode."),
      gridView(page.grid, false));
  }

  function compareView(page) {
    return h("div", {}, h("h1", {}, `${page.a.id} against ${page.b.id}`),
      facts([[page.a.id, page.a.title], [page.b.id, page.b.title], ["items in both", String(page.common_items)],
        ["systems in both", page.systems.join(", ") || "none"],
        ["only in " + page.a.id, page.only_a.join(", ") || "—"], ["only in " + page.b.id, page.only_b.join(", ") || "—"]]),
      h("p", { class: "muted" }, `${page.grid.rows.length} items changed for some system; a cell shows ${page.a.id}'s result then ${page.b.id}'s.`),
      gridView(page.grid, true));
  }

  function evolveCompareView(page) {
    const [A, B] = [page.a.id, page.b.id];
    const both = (field, start) => [curveSeries(page.curves.a, field, A, "#2a5db0", start && page.curves.a[start]),
      curveSeries(page.curves.b, field, B, "#d9822b", start && page.curves.b[start])];
    const sigmas = both("sigma", "sigma0");
    const rows = (pairs) => h("table", { class: "view" },
      h("thead", {}, h("tr", {}, ["", A, B].map((c) => h("th", {}, c)))),
      h("tbody", {}, pairs.map(([k, a, b]) => h("tr", { class: a !== b ? "kind-changed" : "" },
        h("td", {}, k), h("td", {}, a), h("td", {}, b)))));
    return h("div", {}, h("h1", {}, `${A} against ${B}`),
      h("p", {}, link(page.a.key, A), ` · ${page.a.title}`, h("br", {}), link(page.b.key, B), ` · ${page.b.title}`),
      h("h2", {}, "Settings that differ"),
      page.changed.length ? rows(page.changed) : h("p", { class: "muted" }, "the two runs were given the same settings"),
      h("h2", {}, "Curves"),
      h("div", { class: "svgcharts" },
        lineChart("validation per generation", both("val", "start_val"), "validation"),
        lineChart("best fitness per generation", both("best"), "fitness"),
        lineChart("mean fitness per generation", both("mean"), "fitness"),
        sigmas.some((sr) => sr.points.length) ? lineChart("step size σ per generation", sigmas, "σ") : null),
      h("h2", {}, "Facts"), rows(page.facts));
  }

  function askView(page) {
    return h("div", {}, h("h1", {}, `${page.id} · ask`), h("pre", { class: "question" }, page.question),
      facts(page.facts), columnsView(page), h("h2", {}, "Answer"), h("pre", { class: "reply" }, page.answer ?? "(none)"));
  }

  const VIEWS = { runs: runsView, bench: benchView, evolve: evolveView, item: itemView, generation: generationView,
    compare: compareView, "evolve-compare": evolveCompareView, ask: askView,
    run: (page) => h("div", {}, h("h1", {}, page.id + " · " + page.title), h("pre", {}, JSON.stringify(page.record, null, 2))) };

  // -- routing -----------------------------------------------------------------------------
  let current = "";
  let poll = null;
  const scrolls = new Map(); // page key -> how far down it was when left
  if ("scrollRestoration" in history) history.scrollRestoration = "manual"; // show() places the page itself
  let followed = null; // {key, text} of the live page drawn (an evolve run under way)
  let following = false;

  // Where a page opens: back from one of its items (the grid's row, a generation), as far down
  // as it was left, with the row of the item just seen marked and in sight; else at its top.
  function place(key, from) {
    const back = from.startsWith(key + "/");
    window.scrollTo(0, back ? scrolls.get(key) || 0 : 0);
    const item = back ? from.match(/\/item\/(\d+)$/) : null;
    const row = item ? main.querySelector(`table.grid tr.row[data-i="${item[1]}"]`) : null;
    if (!row) return;
    row.classList.add("last-seen");
    const r = row.getBoundingClientRect();
    const head = row.closest("table").querySelector("thead").getBoundingClientRect();
    if (r.top < head.bottom || r.bottom > window.innerHeight) row.scrollIntoView({ block: "center" });
  }

  async function show() {
    let key = location.hash.replace(/^#\/?/, "");
    try { key = decodeURIComponent(key) || "runs"; } catch (err) { /* a stray "%": no key, shown as not found */ }
    const from = current;
    if (from) scrolls.set(from, window.scrollY);
    current = key;
    where.textContent = key === "runs" ? "" : key;
    try {
      if (!runsIndex || key === "runs") runsIndex = (await load("runs")).runs;
      const page = await load(key);
      if (current !== key) return;
      draw(page);
      place(key, from);
    } catch (err) {
      if (current !== key) return;
      clear(main);
      main.appendChild(h("div", { class: "error" }, String(err.message || err), " ", link("runs", "back to the runs")));
    }
    main.setAttribute("data-key", key);
  }

  function draw(page) {
    followed = page.live ? { key: current, text: JSON.stringify(page) } : null;
    clear(main);
    main.appendChild((VIEWS[page.kind] || VIEWS.run)(page));
    main.setAttribute("data-kind", page.kind);
  }

  // Served: the runs list follows runs as they finish, and an evolve run under way (a page
  // marked "live") follows its generations.
  async function follow() {
    const { key, text } = followed;
    const page = await load(key);
    if (current !== key || !followed || followed.key !== key) return;
    if (JSON.stringify(page) !== text) draw(page);
    else if (!page.live) followed = null;
  }

  function startPolling() {
    if (MODE !== "served") { live.textContent = "static export"; return; }
    live.textContent = "live";
    let last = "";
    poll = setInterval(async () => {
      if (followed && current === followed.key) {
        if (following) return; // the last ask is still being answered (a generation's files are large)
        following = true;
        try { await follow(); } catch (err) { live.textContent = "server gone"; clearInterval(poll); }
        following = false;
        return;
      }
      if (current !== "runs") return;
      try {
        const page = await load("runs");
        const text = JSON.stringify(page);
        if (last && text !== last && current === "runs") { runsIndex = page.runs; draw(page); }
        last = text;
      } catch (err) { live.textContent = "server gone"; clearInterval(poll); }
    }, 5000);
  }

  window.addEventListener("hashchange", show);
  startPolling();
  show();
})();
