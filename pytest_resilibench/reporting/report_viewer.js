// The episode viewer of the HTML report (report_html.py embeds this file as it is).
// The episodes arrive gzip-compressed in #resili-data (report_data.py); they are decompressed
// once with the browser's DecompressionStream and rendered on demand. Every view lives in the
// URL fragment (#view=episodes&model=...&q=..., #view=episode&ep=..., #view=pair&a=...&b=...),
// so a link, a reload or a screenshot shows the same view. A comparison's page also carries
// the old run's episodes (#resili-old), keyed "old:ID": its flipped pairs open old and new
// side by side. The "why" of an episode comes computed (why.py): shown, never derived here.
// Model output is untrusted: it reaches the page through textContent only, never innerHTML.
"use strict";
(function () {
  const META = JSON.parse(document.getElementById("resili-meta").textContent);
  const WORDS = META.words;            // outcome key -> word (vocabulary.py)
  const PAGE = 100;                    // rows per page of the episode table
  let EPS = [], PROMPTS = [], BYKEY = new Map(), UNITS = new Map(), READY = false, BASES = 1;

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }
  const str = (v) => (v === null || v === undefined ? "" : String(v));
  const fmt = (v) => (typeof v === "number" && !Number.isInteger(v) ? String(+v.toFixed(4)) : str(v));
  const hash = (params) => "#" + new URLSearchParams(params).toString();

  // --- data ---------------------------------------------------------------------------------
  const outcomeKey = (o) => (o === "full" || o === "partial" || o === "failed" ? o : "infra_error");
  const kindOf = (v) => (str(v).startsWith("flawed") ? "flawed" : str(v));
  const tokens = (ep) => (ep.tokens && typeof ep.tokens === "object" ? ep.tokens.total || 0 : ep.tokens || 0);

  // Filter fields: what a summary cell's link may set (analysis.py, Table.links).
  const FIELDS = {
    model: (ep) => str(ep.model), variant: (ep) => str(ep.variant), kind: (ep) => ep._kind,
    flaw: (ep) => str(ep.flaw), severity: (ep) => str(ep.severity),
    task_type: (ep) => str(ep.task_type), difficulty: (ep) => str(ep.difficulty),
    outcome: (ep) => ep._outcome, vs_optimal: (ep) => ep._vs,
    base_success: (ep) => str(ep.base_success), repeat: (ep) => str(ep.repeat),
    task_id: (ep) => str(ep.task_id), stop_reason: (ep) => str(ep.stop_reason),
  };
  const SELECTS = ["model", "variant", "flaw", "severity", "task_type", "difficulty", "outcome",
                   "stop_reason", "vs_optimal", "base_success", "repeat"];
  const LABELS = {task_type: "type", vs_optimal: "vs optimal", base_success: "base",
                  task_id: "task", kind: "kind", stop_reason: "stop reason"};

  const COLUMNS = [
    ["episode", (ep) => ep.id, "text"], ["model", (ep) => ep.model, "text"],
    ["variant", (ep) => ep.variant, "text"],
    ["flaw", (ep) => (ep.flaw ? ep.flaw + (ep.severity ? " (" + ep.severity + ")" : "") : ""), "text"],
    ["type", (ep) => ep.task_type, "text"], ["difficulty", (ep) => ep.difficulty, "text"],
    ["outcome", (ep) => ep._outcome, "outcome"], ["turns", (ep) => ep.turns, "num"],
    ["calls", (ep) => ep.tool_calls, "num"], ["tokens", tokens, "num"],
    ["cost", (ep) => ep.cost_usd, "num"], ["vs optimal", (ep) => ep._vs, "text"],
    ["why", (ep) => ep.why, "why"],
  ];

  let LOAD_MS = 0;
  async function decode(id) {
    const b64 = document.getElementById(id).textContent.trim();
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  async function load() {
    const started = performance.now();
    const data = await decode("resili-data");
    PROMPTS = data.prompts;
    EPS = data.episodes;
    EPS.forEach((ep, i) => {
      let key = str(ep.id) || "e" + i;
      if (BYKEY.has(key)) key += "~" + i;
      ep._key = key;
      ep._i = i;
      ep._outcome = outcomeKey(ep.outcome);
      ep._kind = kindOf(ep.variant);
      ep._vs = "";
      BYKEY.set(key, ep);
      const unit = [ep.model, ep.task_id, ep.repeat, ep.seed, ep.base_success].map(str).join("|");
      if (!UNITS.has(unit)) UNITS.set(unit, []);
      UNITS.get(unit).push(ep);
      ep._unit = unit;
    });
    // Paired on the same tool luck: did this plan lose or gain full success against optimal?
    for (const group of UNITS.values()) {
      const best = group.find((ep) => ep.variant === "optimal");
      if (!best || best._outcome === "infra_error") continue;
      for (const ep of group) {
        if (ep === best || ep._outcome === "infra_error") continue;
        const a = best._outcome === "full", b = ep._outcome === "full";
        ep._vs = a && !b ? "lost" : !a && b ? "gained" : "same";
      }
    }
    BASES = new Set(EPS.map((ep) => ep.base_success)).size;
    if (document.getElementById("resili-old")) {  // the old run of a comparison
      const old = await decode("resili-old");
      old.episodes.forEach((ep, i) => {
        ep._key = "old:" + (str(ep.id) || "e" + i);
        ep._old = true;
        ep._prompts = old.prompts;
        ep._outcome = outcomeKey(ep.outcome);
        ep._kind = kindOf(ep.variant);
        ep._vs = "";
        BYKEY.set(ep._key, ep);
      });
    }
    LOAD_MS = Math.round(performance.now() - started);
    READY = true;
  }

  function searchText(ep) {
    if (ep._text === undefined) {
      const parts = [ep.id, ep.task_id, ep.stop_reason, ep.infra_error];
      for (const m of ep.messages || []) {
        if (m.role === "system") continue;
        parts.push(typeof m.content === "string" ? m.content : JSON.stringify(m.content || ""));
        for (const c of m.tool_calls || []) parts.push(JSON.stringify(c));
      }
      for (const c of ep.calls || []) parts.push(c.tool, c.error_code, c.message, c.event);
      ep._text = parts.map(str).join("\n").toLowerCase();
    }
    return ep._text;
  }

  // --- the episode table --------------------------------------------------------------------
  function selected(params) {
    const terms = str(params.get("q")).toLowerCase().split(/\s+/).filter(Boolean);
    const filters = Object.keys(FIELDS).filter((f) => params.has(f))
      .map((f) => [FIELDS[f], params.get(f)]);
    let rows = EPS.filter((ep) => filters.every(([get, want]) => get(ep) === want)
      && terms.every((t) => searchText(ep).includes(t)));
    const sort = str(params.get("sort"));
    if (sort) {
      const desc = sort.startsWith("-");
      const col = COLUMNS.find((c) => c[0] === sort.replace(/^-/, ""));
      if (col) {
        const get = col[1], num = col[2] === "num";
        const cmp = (x, y) => {
          const a = get(x), b = get(y);
          if (num) return (a ?? -Infinity) - (b ?? -Infinity);
          return str(a).localeCompare(str(b));
        };
        rows = rows.slice().sort((x, y) => (desc ? -cmp(x, y) : cmp(x, y)) || x._i - y._i);
      }
    }
    return rows;
  }

  function outcomeCell(key) {
    return el("span", {class: "oc " + key}, WORDS[key] || key);
  }

  function withParams(params, changes) {
    const p = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) {
      if (v === null || v === "") p.delete(k); else p.set(k, v);
    }
    if (!("page" in changes)) p.delete("page");
    return hash(p);
  }

  function renderList(params) {
    const root = document.getElementById("view-episodes");
    const started = performance.now();
    const rows = selected(params);
    const page = Math.max(0, parseInt(params.get("page") || "0", 10) || 0);
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    const shown = rows.slice(page * PAGE, page * PAGE + PAGE);

    const bar = el("div", {class: "filters"});
    const search = el("input", {type: "search", id: "q", placeholder: "search the conversations",
                                value: str(params.get("q")), size: "32"});
    search.addEventListener("keydown", (e) => {
      if (e.key === "Enter") location.hash = withParams(params, {q: search.value.trim()});
    });
    bar.append(el("label", {}, "search ", search));
    for (const f of SELECTS) {
      const values = [...new Set(EPS.map(FIELDS[f]))].filter((v) => v !== "");
      if (values.length < 2 && !params.has(f)) continue;
      const select = el("select", {"data-field": f,
        onchange: (e) => { location.hash = withParams(params, {[f]: e.target.value}); }},
        el("option", {value: ""}, "all"),
        values.sort(f === "outcome" ? (a, b) => META.order.indexOf(a) - META.order.indexOf(b)
                                    : undefined)
          .map((v) => el("option", {value: v, selected: params.get(f) === v ? "" : null},
                         f === "outcome" ? WORDS[v] || v : v)));
      bar.append(el("label", {}, (LABELS[f] || f) + " ", select));
    }
    // Filters a link set that have no menu (kind, task): shown, and removable.
    for (const f of Object.keys(FIELDS)) {
      if (params.has(f) && !SELECTS.includes(f)) {
        bar.append(el("a", {class: "chip", href: withParams(params, {[f]: null})},
                      (LABELS[f] || f) + " = " + params.get(f) + " ✕"));
      }
    }
    bar.append(el("a", {href: "#view=episodes", class: "reset"}, "clear"));

    const sort = str(params.get("sort"));
    const head = el("tr", {}, COLUMNS.map(([name, , type]) => {
      const next = sort === name ? "-" + name : sort === "-" + name ? "" : name;
      const mark = sort === name ? " ▲" : sort === "-" + name ? " ▼" : "";
      return el("th", {class: type === "num" ? "num" : null},
                el("a", {href: withParams(params, {sort: next})}, name + mark));
    }), el("th", {}, "pair"));
    const body = el("tbody", {}, shown.map((ep) => el("tr", {},
      COLUMNS.map(([name, get, type]) => {
        const v = get(ep);
        if (name === "episode") {  // the full id is long and repeats the columns: a tooltip
          return el("td", {class: "id"}, el("a", {href: hash({view: "episode", ep: ep._key}),
            title: str(v)}, str(ep.task_id) + " r" + str(ep.repeat)
              + (ep.base_success != null && BASES > 1 ? " b" + ep.base_success : "")));
        }
        if (type === "outcome") return el("td", {}, outcomeCell(v));
        if (type === "why") return el("td", {class: "why"}, str(v));
        if (name === "cost") return el("td", {class: "num"}, v === null || v === undefined ? "–" : Number(v).toFixed(4));
        return el("td", {class: type === "num" ? "num" : (name === "vs optimal" && v ? "vs " + v : null)}, str(v));
      }),
      el("td", {}, pairOf(ep) ? el("a", {href: pairLink(ep)}, "⇆") : ""))));
    const nav = el("p", {class: "pager"},
      `${rows.length} of ${EPS.length} episodes`,
      rows.length > PAGE ? [" · page ", page + 1, " of ", pages, " ",
        page > 0 ? el("a", {href: withParams(params, {page: String(page - 1)})}, "‹ previous") : "",
        " ",
        page + 1 < pages ? el("a", {href: withParams(params, {page: String(page + 1)})}, "next ›") : ""] : "");
    root.replaceChildren(bar, nav,
      el("table", {class: "episodes", id: "episode-table"}, el("thead", {}, head), body));
    nav.append(el("span", {class: "timing"}, ` · selected and drawn in ${Math.round(performance.now() - started)} ms`
      + ` (episodes decompressed in ${LOAD_MS} ms)`));
  }

  // --- one episode, and its pair ------------------------------------------------------------
  function siblings(ep) {
    return ep._old ? [] : (UNITS.get(ep._unit) || []).filter((o) => o !== ep);
  }
  function pairOf(ep) {
    if (ep.variant === "optimal") return siblings(ep).find((o) => o._kind === "flawed") || null;
    return siblings(ep).find((o) => o.variant === "optimal") || null;
  }
  function pairLink(ep) {
    const other = pairOf(ep);
    const [a, b] = ep.variant === "optimal" ? [ep, other] : [other, ep];
    return hash({view: "pair", a: a._key, b: b._key});
  }

  const FACTS = ["id", "model", "variant", "flaw", "severity", "task_id", "task_type",
                 "difficulty", "repeat", "seed", "base_success", "tool_mode", "outcome",
                 "stop_reason", "turns", "tool_calls", "coverage", "order_adherence",
                 "errors_met", "errors_recovered", "infra_error", "cost_usd"];

  function facts(ep) {
    const rows = FACTS.filter((k) => ep[k] !== null && ep[k] !== undefined).map((k) =>
      el("tr", {}, el("th", {}, k), el("td", {}, k === "outcome" ? outcomeCell(ep._outcome) : fmt(ep[k]))));
    if (ep.conditions) {
      rows.push(el("tr", {}, el("th", {}, "conditions"), el("td", {},
        Object.entries(ep.conditions).map(([k, ok]) =>
          el("span", {class: ok ? "cond ok" : "cond no"}, (ok ? "✓ " : "✗ ") + k)))));
    }
    if (ep.tokens && typeof ep.tokens === "object") {
      rows.push(el("tr", {}, el("th", {}, "tokens"), el("td", {},
        Object.entries(ep.tokens).map(([k, v]) => k + " " + v).join(", "))));
    }
    return el("table", {class: "facts"}, rows);
  }

  function callCell(c) {
    return [el("span", {class: "tool"}, c.tool), " ",
            c.ok ? el("span", {class: "oc full"}, "ok") : el("span", {class: "oc failed"}, str(c.error_code)),
            c.event ? el("span", {class: "oc partial"}, " [" + c.event + "]") : ""];
  }

  function callsTable(ep) {
    const calls = ep.calls || [];
    if (!calls.length) return el("p", {class: "note"}, "No tool calls kept.");
    return el("table", {class: "calls"},
      el("thead", {}, el("tr", {}, ["turn", "tool", "arguments", "result", "message", "p(success)"]
        .map((h) => el("th", {}, h)))),
      el("tbody", {}, calls.map((c) => el("tr", {},
        el("td", {class: "num"}, str(c.turn)), el("td", {}, str(c.tool)),
        el("td", {}, el("pre", {}, JSON.stringify(c.arguments))),
        el("td", {}, c.ok ? el("span", {class: "oc full"}, "ok")
                          : el("span", {class: "oc failed"}, str(c.error_code)),
              c.event ? el("span", {class: "oc partial"}, " [" + c.event + "]") : ""),
        el("td", {}, str(c.message)),
        el("td", {class: "num"}, c.success_probability == null ? "" : Number(c.success_probability).toFixed(2))))));
  }

  function message(m, prompts) {
    const role = str(m.role);
    if (role === "system" && m.prompt !== undefined) {
      const text = (prompts || PROMPTS)[m.prompt] || "";
      return el("details", {class: "msg system"},
        el("summary", {}, `system prompt ${m.prompt + 1} (${text.length} characters, shared by the run)`),
        el("pre", {}, text));
    }
    const text = typeof m.content === "string" ? m.content : m.content ? JSON.stringify(m.content, null, 1) : "";
    return el("div", {class: "msg " + role},
      el("div", {class: "role"}, role + (m.tool_call_id ? " → " + m.tool_call_id : "")),
      text ? el("pre", {}, text) : "",
      (m.tool_calls || []).map((c) => el("pre", {}, "call " + str(c.function && c.function.name)
        + "(" + str(c.function && c.function.arguments) + ")")));
  }

  function conversation(ep) {
    if (!ep.messages || !ep.messages.length) {
      return el("p", {class: "note"}, "Trajectory not kept in this report (run with "
        + "--resili-trajectories to keep the conversation and calls).");
    }
    return el("div", {class: "conversation"}, ep.messages.map((m) => message(m, ep._prompts)));
  }

  function notFound(key) {
    return el("p", {class: "note"}, "No episode " + key + " in this report. ",
              el("a", {href: "#view=episodes"}, "All episodes"));
  }

  function renderEpisode(params) {
    const root = document.getElementById("view-episode");
    const ep = BYKEY.get(str(params.get("ep")));
    if (!ep) { root.replaceChildren(notFound(str(params.get("ep")))); return; }
    const others = siblings(ep);
    root.replaceChildren(
      el("h2", {}, ep.task_id + " · " + ep.model + " · " + ep.variant
        + (ep.severity ? " (" + ep.severity + ")" : "") + " · repeat " + str(ep.repeat) + " · ",
        outcomeCell(ep._outcome)),
      el("p", {class: "links"}, el("a", {href: "#view=episodes"}, "‹ all episodes"),
        pairOf(ep) ? [" · ", el("a", {href: pairLink(ep), class: "button"}, "side by side with its pair ⇆")] : "",
        others.length ? [" · same tool luck: ", others.map((o) => [el("a", {
          href: hash({view: "pair", a: (ep.variant === "optimal" ? ep : o)._key,
                      b: (ep.variant === "optimal" ? o : ep)._key})}, o.variant), " "])] : ""),
      el("p", {class: "why", id: "why"}, str(ep.why_sentence)),
      facts(ep), el("h3", {}, "Tool calls"), callsTable(ep),
      el("h3", {}, "Conversation"), conversation(ep));
  }

  function firstUser(ep) {
    const m = (ep.messages || []).find((x) => x.role === "user");
    return m && typeof m.content === "string" ? m.content : "";
  }

  function planDiff(a, b) {
    const la = firstUser(a).split("\n"), lb = firstUser(b).split("\n");
    const sa = new Set(la), sb = new Set(lb);
    const side = (lines, other) => el("pre", {class: "plan"},
      lines.map((line) => el("span", {class: other.has(line) ? null : "only"}, line + "\n")));
    return [side(la, sb), side(lb, sa)];
  }

  function turnTable(a, b) {
    const turns = Math.max(0, ...[...(a.calls || []), ...(b.calls || [])].map((c) => c.turn || 0));
    const at = (ep, t) => (ep.calls || []).filter((c) => c.turn === t);
    const rows = [];
    let first = null;
    for (let t = 1; t <= turns; t++) {
      const ca = at(a, t), cb = at(b, t);
      const sig = (cs) => cs.map((c) => c.tool + ":" + (c.ok ? "ok" : c.error_code)).join(",");
      const differ = sig(ca) !== sig(cb);
      if (differ && first === null) first = t;
      rows.push(el("tr", {class: differ ? "diverge" : null}, el("td", {class: "num"}, t),
        el("td", {}, ca.map((c) => el("div", {}, callCell(c)))),
        el("td", {}, cb.map((c) => el("div", {}, callCell(c))))));
    }
    const note = first === null ? "The two episodes made the same calls with the same results."
      : `First difference at turn ${first} (rows in colour differ).`;
    return [el("p", {class: "note", id: "divergence"}, note),
      el("table", {class: "turns"}, el("thead", {}, el("tr", {}, el("th", {}, "turn"),
        el("th", {}, (a._old ? "old run · " : "") + a.variant + " — " + (WORDS[a._outcome] || a._outcome)),
        el("th", {}, (a._old ? "new run · " : "") + b.variant + " — " + (WORDS[b._outcome] || b._outcome)))), el("tbody", {}, rows))];
  }

  function renderPair(params) {
    const root = document.getElementById("view-pair");
    const a = BYKEY.get(str(params.get("a"))), b = BYKEY.get(str(params.get("b")));
    if (!a || !b) { root.replaceChildren(notFound(str(params.get(a ? "b" : "a")))); return; }
    const choices = siblings(a).filter((o) => o !== b);
    const [pa, pb] = planDiff(a, b);
    const runs = a._old && !b._old;  // the same episode in the old and the new run
    const side = (ep) => (runs ? (ep._old ? "old run" : "new run") + " · " + ep.variant : ep.variant);
    root.replaceChildren(
      el("h2", {}, a.task_id + " · " + a.model + " · repeat " + str(a.repeat) + ": "
        + (runs ? "old run against new run (" + b.variant + ")" : a.variant + " against " + b.variant)),
      el("p", {class: "note"}, runs
        ? "The same task, variant, repeat, seed and base success in the two runs: the same tool "
          + "luck, so where they part, the agent (or its setup) made the difference."
        : "Both episodes met the same tool luck (same task, repeat, seed and "
          + "base success): where they part, the plan made the difference."),
      el("p", {class: "links"}, el("a", {href: "#view=episodes"}, "‹ all episodes"),
        choices.length ? [" · compare with: ", choices.map((o) =>
          [el("a", {href: hash({view: "pair", a: a._key, b: o._key})}, o.variant), " "])] : ""),
      el("div", {}, turnTable(a, b)),
      el("h3", {}, "Task and plan (lines only one side has are marked)"),
      el("div", {class: "pair"}, el("div", {}, el("h4", {}, side(a)), pa),
                                  el("div", {}, el("h4", {}, side(b)), pb)),
      el("div", {class: "pair"},
        el("div", {}, el("h3", {}, el("a", {href: hash({view: "episode", ep: a._key})}, side(a)), " · ", outcomeCell(a._outcome)), el("p", {class: "why"}, str(a.why_sentence)), facts(a), conversation(a)),
        el("div", {}, el("h3", {}, el("a", {href: hash({view: "episode", ep: b._key})}, side(b)), " · ", outcomeCell(b._outcome)), el("p", {class: "why"}, str(b.why_sentence)), facts(b), conversation(b))));
  }

  // --- routing ------------------------------------------------------------------------------
  const VIEWS = {episodes: renderList, episode: renderEpisode, pair: renderPair};

  function route() {
    const params = new URLSearchParams(location.hash.slice(1));
    let view = params.get("view") || "summary";
    if (!(view in VIEWS)) view = "summary";
    for (const v of ["summary", "episodes", "episode", "pair"]) {
      document.getElementById("view-" + v).hidden = v !== view;
      const tab = document.getElementById("tab-" + v);
      if (tab) tab.classList.toggle("active", v === view || (v === "episodes" && view !== "summary"));
    }
    if (view !== "summary") {
      if (!READY) { document.getElementById("view-" + view).textContent = "Loading the episodes…"; return; }
      VIEWS[view](params);
      window.scrollTo(0, 0);
    }
  }

  window.addEventListener("hashchange", route);
  if (typeof DecompressionStream === "undefined") {
    document.getElementById("view-episodes").textContent =
      "This browser cannot decompress the embedded episodes (DecompressionStream is missing).";
  } else {
    load().then(route, (err) => {
      document.getElementById("view-episodes").textContent = "Could not read the episodes: " + err;
    });
  }
  route();
})();
