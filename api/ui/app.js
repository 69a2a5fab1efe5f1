// lockd dashboard: polls this node's API once a second and redraws.
// Plain DOM, no dependencies. Every value from the API is inserted as
// text (lock names are user input), never as HTML.
"use strict";
(function () {
  // Refreshes come from the node's event stream (GET /v1/events: one event
  // per change of its table, coalesced); the slow poll only refreshes the
  // status (term, members) and recovers if the stream is down.
  // ?live=poll turns the stream off and polls every second instead (for
  // headless browsers, whose virtual clock stops while a stream is open).
  const streaming = !!(window.ReadableStream && window.TextDecoder) && new URLSearchParams(location.search).get("live") !== "poll";
  const POLL_MS = streaming ? 5000 : 1000;
  const TIMEOUT_MS = 5000;
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  // el("td", {class: "x"}, child, "text", ...)
  function el(tag, attrs, ...kids) {
    const e = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && v !== false) e.setAttribute(k, String(v));
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }

  // ---- session names, ages, changes -----------------------------------------
  // Names come from GET /v1/sessions?stale: a management token lists every
  // session, another token only its own, so other sessions stay ids.
  let sessionsById = new Map();
  const nameOf = (id) => { const s = sessionsById.get(String(id)); return s && s.name ? s.name : ""; };
  function sessNodes(id) {
    // lockd leaves out the id of a session another token owns.
    if (!id) return [el("span", { class: "sid other", title: "a session of another token" }, "another token's")];
    const n = nameOf(id);
    return [n ? el("span", { class: "sname", title: n + " (session " + id + ")" }, n) : null,
      el("span", { class: "sid", title: "session " + id }, id)];
  }
  const short = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);

  // Ages come from lockd: a hold, waiter or session carries "since", the
  // table time the leader stamped on the entry that began it, and the
  // answer's X-Table-Time is the table time now (tableSkew: that against
  // this browser's clock; table time stands still while the cluster is
  // down, so the browser's clock alone would overstate ages). lockd
  // leaves "since" out once its log no longer holds that entry; then the
  // page measures from the poll that first saw the hold or waiter, and
  // what that first poll saw was already there, so it says only how long
  // it has seen it ("seen for").
  let tableSkew = 0; // table time - browser clock
  function noteTableTime(res) {
    const t = Date.parse(res.headers.get("X-Table-Time") || "");
    if (!isNaN(t)) tableSkew = t - Date.now();
  }
  const seen = new Map(); // key -> {t, pre}
  let baseline = true;
  function seenAt(key, now) {
    let s = seen.get(key);
    if (!s) { s = { t: now, pre: baseline }; seen.set(key, s); }
    return s;
  }
  function fmtDur(ms) {
    const s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  const ageText = (a) => (a.dataset.verb ? a.dataset.verb + " " : "") + fmtDur(Date.now() - Number(a.dataset.t));
  function age(verb, key, now, since) {
    const began = since ? Date.parse(since) : NaN;
    if (!isNaN(began)) {
      const a = el("span", { class: "age", "data-verb": verb, "data-t": began - tableSkew,
        title: "since " + new Date(began).toLocaleString() + " (table time: the leader's clock, stopped while the cluster was down)" });
      a.textContent = ageText(a);
      return a;
    }
    const s = seenAt(key, now);
    const a = el("span", { class: "age", "data-verb": s.pre ? "seen for" : verb, "data-t": s.t,
      title: s.pre ? "already there when this page loaded: how long this page has seen it (lockd's log no longer holds when it began)"
        : "since this page saw it appear (within a poll)" });
    a.textContent = ageText(a);
    return a;
  }
  setInterval(() => document.querySelectorAll(".age").forEach((a) => { a.textContent = ageText(a); }), 1000);
  const holdKey = (l, h) => "h\0" + h.session + "\0" + l.name + "\0" + h.token;
  const waitKey = (l, w) => "w\0" + w.request_id + "\0" + l.name;

  // Recent changes and the grant rate, by comparing successive polls: a
  // lock granted and released between two polls is not seen.
  let prevSnap = null;
  const changes = []; // newest first
  const grants = []; // times this page saw a new hold
  const CHANGES = 20;
  function snapshot(locks) {
    const m = new Map();
    for (const l of locks) {
      for (const h of l.holders || []) m.set(holdKey(l, h), { hold: true, lock: l.name, session: h.session, token: h.token, mode: h.mode });
      for (const w of l.waiters || []) m.set(waitKey(l, w), { hold: false, lock: l.name, session: w.session, req: w.request_id, mode: w.mode });
    }
    return m;
  }
  function change(now, kind, text, d) {
    changes.unshift({ t: now, kind, text, session: d.session });
  }
  function diffPolls(locks, now) {
    const cur = snapshot(locks);
    if (prevSnap) {
      for (const [k, d] of cur) {
        if (prevSnap.has(k)) continue;
        if (d.hold) { grants.push(now); change(now, "granted", d.lock + " granted (" + d.mode + ", #" + d.token + ") to", d); }
        else change(now, "queued", d.lock + ": request " + d.req + " (" + d.mode + ") queued by", d);
      }
      for (const [k, d] of prevSnap) {
        if (cur.has(k)) continue;
        if (d.hold) change(now, "released", d.lock + " (#" + d.token + ") no longer held (released, expired or revoked) by", d);
        else change(now, "dequeued", d.lock + ": request " + d.req + " left the queue (granted or cancelled) of", d);
      }
      changes.splice(CHANGES);
    }
    for (const k of [...seen.keys()]) if (!cur.has(k)) seen.delete(k);
    prevSnap = cur;
    while (grants.length && grants[0] < now - 60000) grants.shift();
  }
  let firstPoll = 0;
  function renderChanges(now) {
    const items = changes.map((c) => el("li", { class: c.kind, "data-change": c.kind },
      el("time", {}, new Date(c.t).toLocaleTimeString()), " ", c.text, " ", sessNodes(c.session)));
    if (!items.length) items.push(el("li", { class: "empty" }, prevSnap ? "No change seen yet." : "Waiting for a first poll."));
    $("changes").replaceChildren(...items);
    const span = Math.min(60, (now - firstPoll) / 1000);
    const rate = span >= 1 ? grants.length / span : 0;
    $("rate").replaceChildren(el("strong", { id: "grant-rate" }, rate.toFixed(2) + " grants/s"),
      " over the last " + Math.round(Math.max(span, 0)) + "s: " + grants.length + " new " + (grants.length === 1 ? "hold" : "holds") +
      " seen appearing by this page (holds granted and released between two of its polls are missed)");
  }
  // Rates from the serving node's /metrics over the last minute of polls:
  // grants and handoffs as its table applied them (every node applies the
  // same log), and the acquires it answered. Unlike the page's own counts
  // above these miss nothing.
  const metricSamples = [];
  function metricSum(text, re) {
    let sum = null;
    for (const line of text.split("\n")) {
      const m = line.match(re);
      if (m) sum = (sum || 0) + Number(m[1]);
    }
    return sum;
  }
  function renderNodeRates(text, now) {
    const cur = {
      t: now,
      grants: metricSum(text, /^lockd_grants_total (\S+)$/),
      handoffs: metricSum(text, /^lockd_handoffs_total (\S+)$/),
      acquires: metricSum(text, /^lockd_http_(?:request|wait)_duration_seconds_count\{[^}]*route="(?:POST \/v1\/acquire|PUT \/v1\/locks\/\{name\.\.\.\})"[^}]*\} (\S+)$/),
    };
    metricSamples.push(cur);
    while (metricSamples.length > 2 && metricSamples[0].t < now - 60000) metricSamples.shift();
    const prev = metricSamples[0];
    if (metricSamples.length < 2 || cur.t <= prev.t) return;
    const dt = (cur.t - prev.t) / 1000;
    const rate = (k) => (cur[k] === null || prev[k] === null ? "–" : Math.max(0, (cur[k] - prev[k]) / dt).toFixed(2));
    $("node-rates").replaceChildren("From this node's /metrics over the last " + Math.round(dt) + "s: ",
      el("strong", { id: "handoff-rate" }, rate("handoffs") + " handoffs/s"), ", ",
      el("span", { id: "node-grant-rate" }, rate("grants") + " grants/s"), ", ",
      el("span", { id: "acquire-rate" }, rate("acquires") + " acquire requests/s"), " answered by this node.");
  }
  async function getText(path) {
    const res = await fetch(path, { cache: "no-store", headers: authHeaders() });
    if (!res.ok) throw new Error(path + " " + res.status);
    return res.text();
  }
  function resetSeen() {
    prevSnap = null;
    baseline = true;
    seen.clear();
  }

  // ---- ACL token ----------------------------------------------------------
  // With --acl every request but /v1/status needs "Authorization: Bearer".
  // The token is asked for when a node answers 401, kept in sessionStorage
  // (this tab, until it closes) and never put in a URL.
  const TOKEN_KEY = "lockd-token";
  const token = () => sessionStorage.getItem(TOKEN_KEY) || "";
  function authHeaders() {
    return token() ? { Authorization: "Bearer " + token() } : {};
  }
  function askToken(why) {
    $("login").hidden = false;
    $("login-why").textContent = why;
    $("forget").hidden = !token();
  }
  // A new or forgotten token: drop what the old one showed, reopen the
  // event stream with the new one and refresh now.
  function tokenChanged() {
    clearViews();
    if (restream) restream();
    if (wake) wake(); else dirty = true;
  }
  $("login-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const v = $("token").value.trim();
    if (!v) return;
    sessionStorage.setItem(TOKEN_KEY, v);
    $("token").value = "";
    $("login").hidden = true;
    $("forget").hidden = false;
    tokenChanged();
  });
  $("forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("forget").hidden = true;
    askToken("Token forgotten.");
    tokenChanged();
  });
  $("forget").hidden = !token();

  // APIError keeps the HTTP status, for 401 and 403 handling.
  class APIError extends Error {
    constructor(status, message) { super(message); this.status = status; }
  }

  // fetchJSON returns the body and the response (for its headers).
  async function fetchJSON(path) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
    try {
      const res = await fetch(path, { signal: ctl.signal, cache: "no-store", headers: authHeaders() });
      noteTableTime(res);
      const body = await res.json().catch(() => null);
      if (!res.ok) {
        const msg = body && body.error ? body.error.code + ": " + body.error.message : res.status + " " + res.statusText;
        throw new APIError(res.status, path.split("?")[0] + " " + msg);
      }
      return { body, res };
    } finally {
      clearTimeout(timer);
    }
  }
  const getJSON = async (path) => (await fetchJSON(path)).body;

  // getList reads every page of a list endpoint (GET /v1/locks and
  // /v1/sessions answer PAGE items at a time and name the next page in
  // X-Next-After), up to LIST_CAP items: {items, truncated}.
  const PAGE = 1000, LIST_CAP = 5000;
  async function getList(path) {
    const items = [];
    let after = null;
    for (;;) {
      const page = path + (path.includes("?") ? "&" : "?") + "limit=" + PAGE + (after === null ? "" : "&after=" + encodeURIComponent(after));
      const { body, res } = await fetchJSON(page);
      items.push(...(body || []));
      const next = res.headers.get("X-Next-After");
      if (!next || next === after) return { items, truncated: false };
      if (items.length >= LIST_CAP) return { items: items.slice(0, LIST_CAP), truncated: true };
      after = next;
    }
  }

  // ---- header and members ----------------------------------------------

  function renderStatus(st) {
    $("h-node").textContent = st.node_id || "–";
    $("h-state").replaceChildren(el("span", { class: "badge " + st.state }, st.state));
    const leader = st.leader && st.leader.id;
    $("h-leader").textContent = leader ? leader + (st.leader.http_addr ? " (" + st.leader.http_addr + ")" : "") : "none";
    $("noleader").hidden = !!leader;
    $("h-term").textContent = st.term;
    $("h-commit").textContent = st.commit_index;
    $("h-applied").textContent = st.applied_index;
    document.title = "lockd · " + st.node_id + " · " + st.state;

    const members = st.members || [];
    $("members-count").textContent = members.length;
    const rows = members.map((m) => {
      // This node knows its own raft state; for the others it knows the
      // leader and the raft configuration.
      let role;
      if (m.id === st.node_id) role = st.state;
      else if (m.id === leader) role = "leader";
      else if (!m.voter) role = "non-voter";
      else role = leader ? "follower" : "voter";
      return el("tr", { "data-member": m.id },
        el("td", { class: "mono" }, m.id, m.id === st.node_id ? el("span", { class: "self" }, "(this node)") : null),
        el("td", {}, el("span", { class: "badge " + role }, role)),
        el("td", {}, el("span", { class: "badge " + m.status }, m.status)),
        el("td", { class: "mono" }, m.http_addr || "–"),
        el("td", { class: "mono" }, m.raft_addr || "–"));
    });
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 5, class: "empty" }, "No members known.")));
    $("members").tBodies[0].replaceChildren(...rows);
  }

  // ---- locks -------------------------------------------------------------

  // breakable is a lock name that wraps, when it must, after a "/".
  const breakable = (name) => name.split("/").flatMap((part, i) => (i ? ["/", el("wbr"), part] : [part]));

  function chip(cls, parts) {
    return el("span", { class: "chip " + cls }, ...parts);
  }

  function renderLocks(locks, prefix, truncated, now) {
    $("locks-count").textContent = (truncated ? "first " : "") + locks.length + (prefix ? " under " + JSON.stringify(prefix) : "");
    const rows = locks.map((l) => {
      const holders = (l.holders || []).map((h) => chip("holder", [
        sessNodes(h.session), el("span", { class: "k" }, h.mode),
        el("span", {}, h.weight + "×" + h.count), el("span", { class: "tok", title: "fencing token" }, "#" + h.token),
        age("held for", holdKey(l, h), now, h.since)]));
      const waiters = (l.waiters || []).map((w) => chip("waiter", [
        sessNodes(w.session), el("span", { class: "k" }, w.mode),
        el("span", {}, "w" + w.weight), el("span", { class: "k", title: "request id" }, w.request_id),
        age("waiting", waitKey(l, w), now, w.since)]));
      const delayed = l.delayed_until ? el("div", { class: "delayed" }, "lock-delay until " + new Date(l.delayed_until).toLocaleTimeString()) : null;
      return el("tr", { "data-lock": l.name },
        el("td", { class: "name" }, breakable(l.name)),
        el("td", { class: "num" }, l.version),
        el("td", { class: "num" }, l.limit),
        el("td", {}, holders.length ? el("div", { class: "chips" }, holders) : el("span", { class: "none" }, "—"), delayed),
        el("td", {}, waiters.length ? el("div", { class: "chips" }, waiters) : el("span", { class: "none" }, "—")));
    });
    if (rows.length === 0) {
      rows.push(el("tr", {}, el("td", { colspan: 5, class: "empty" }, prefix ? "No lock in use under this prefix." : "No lock in use.")));
    }
    if (truncated) {
      rows.push(el("tr", { class: "truncated" }, el("td", { colspan: 5, class: "empty" },
        "Showing the first " + LIST_CAP.toLocaleString("en") + " names only: narrow the list with a prefix.")));
    }
    $("locks").tBodies[0].replaceChildren(...rows);
  }

  // A message in place of the lock table (no token, or one that may not
  // list locks).
  function lockMessage(text, cls) {
    $("locks-count").textContent = "";
    $("locks").tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: 5, class: "empty " + (cls || "") }, text)));
  }

  // clearViews drops what an earlier token showed.
  function clearViews() {
    lockMessage("Needs a token.");
    $("graph-count").textContent = "";
    $("graph").replaceChildren(el("p", { class: "empty" }, "Needs a token."));
    $("sessions-count").textContent = "";
    $("sessions").tBodies[0].replaceChildren(el("tr", {}, el("td", { colspan: 6, class: "empty" }, "Needs a token.")));
    $("session-detail").hidden = true;
    sessionsById = new Map();
    resetSeen();
  }

  // ---- wait-for graph ----------------------------------------------------

  // Edges from the server's graph when available (it knows hierarchical
  // waits), else derived from each lock's waiters and holders.
  function graphEdges(locks, serverEdges) {
    const names = new Map(); // "from>to" -> Set of lock names
    for (const l of locks) {
      // A waiter waits for the holders and for the waiters queued ahead
      // of it (the server's graph says which of those it really waits for).
      const ws = l.waiters || [];
      ws.forEach((w, i) => {
        if (!w.session) return; // another token's session: its id is left out
        for (const o of [...(l.holders || []), ...ws.slice(0, i)]) {
          if (!o.session || o.session === w.session) continue;
          const k = w.session + ">" + o.session;
          if (!names.has(k)) names.set(k, new Set());
          names.get(k).add(l.name);
        }
      });
    }
    const pairs = serverEdges ? serverEdges.map((e) => [String(e.from), String(e.to)])
      : [...names.keys()].map((k) => k.split(">"));
    return pairs.map(([from, to]) => ({ from, to, locks: [...(names.get(from + ">" + to) || [])] }));
  }

  // Sessions on a cycle (a deadlock) by strongly connected components.
  function cycleNodes(nodes, edges) {
    const adj = new Map(nodes.map((n) => [n, []]));
    for (const e of edges) adj.get(e.from).push(e.to);
    let index = 0;
    const idx = new Map(), low = new Map(), on = new Set(), stack = [], out = new Set();
    function strong(v) {
      idx.set(v, index); low.set(v, index); index++; stack.push(v); on.add(v);
      for (const w of adj.get(v)) {
        if (!idx.has(w)) { strong(w); low.set(v, Math.min(low.get(v), low.get(w))); }
        else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
      }
      if (low.get(v) === idx.get(v)) {
        const comp = [];
        let w;
        do { w = stack.pop(); on.delete(w); comp.push(w); } while (w !== v);
        if (comp.length > 1) comp.forEach((c) => out.add(c));
      }
    }
    nodes.forEach((n) => { if (!idx.has(n)) strong(n); });
    return out;
  }

  // graphLabels names each node of the graph in one or two lines that
  // tell sessions apart: its name (one longer than 16 characters without
  // the words it shares with another node's name: lockctl names its
  // sessions "lockctl HOST pid N: COMMAND"), cut to 16 characters, then
  // the shortest prefix of its id
  // (6 characters or more) that no other node's id shares.
  function graphLabels(nodes) {
    const ids = idPrefixes(nodes);
    const names = nodes.map(nameOf);
    return new Map(nodes.map((n, i) => {
      const id = ids.get(n) + (ids.get(n).length < String(n).length ? "…" : "");
      if (!names[i]) return [n, [id]];
      let head = 0;
      if (names[i].length > 16) names.forEach((o, j) => { if (j !== i && o) head = Math.max(head, wordsShared(names[i], o)); });
      const rest = head ? "…" + names[i].slice(head) : names[i];
      return [n, [short(rest, 16), id]];
    }));
  }
  // wordsShared is the length of the longest common start of a and b that
  // ends after a space or punctuation, and leaves something of a.
  function wordsShared(a, b) {
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    while (i > 0 && !/[\s:/,=.-]/.test(a[i - 1])) i--;
    return i < a.length ? i : 0;
  }
  // idPrefixes cuts ids to the shortest length, 6 or more, at which they
  // are all different.
  function idPrefixes(ids) {
    const longest = Math.max(...ids.map((id) => String(id).length));
    for (let n = 6; ; n++) {
      const cut = ids.map((id) => String(id).slice(0, n));
      if (new Set(cut).size === ids.length || n >= longest) return new Map(ids.map((id, i) => [id, cut[i]]));
    }
  }

  function renderGraph(edges, denied) {
    const box = $("graph");
    if (denied) {
      $("graph-count").textContent = "";
      box.replaceChildren(el("p", { class: "empty denied" }, "The wait-for graph needs a management token (admin on every name): " + denied));
      return;
    }
    if (edges.length === 0) {
      $("graph-count").textContent = "";
      box.replaceChildren(el("p", { class: "empty" }, "No waiters."));
      return;
    }
    const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort((a, b) => String(a).localeCompare(String(b)));
    const waiting = new Set(edges.map((e) => e.from));
    const cyc = cycleNodes(nodes, edges);
    $("graph-count").textContent = edges.length + (edges.length === 1 ? " edge" : " edges") + (cyc.size ? " · deadlock" : "");

    // Nodes on a ring wide enough that neighbouring labels (two lines of
    // at most 16 characters, 12px monospace) never overlap; the canvas
    // grows with it.
    const labels = graphLabels(nodes);
    const label = (n) => labels.get(n).join(" ");
    const R = 22, CH = 7.5;
    const labelW = Math.max(2 * R, ...nodes.map((n) => Math.max(...labels.get(n).map((l) => l.length)) * CH));
    const need = nodes.length <= 2 ? 150 : (labelW + 16) / (2 * Math.sin(Math.PI / nodes.length));
    const ring = Math.max(nodes.length <= 2 ? 150 : 114, need);
    const W = Math.max(520, 2 * (ring + labelW / 2 + 12)), H = nodes.length <= 2 ? 170 : Math.max(320, 2 * (ring + R + 14));
    const cx = W / 2, cy = H / 2;
    const pos = new Map();
    nodes.forEach((n, i) => {
      const a = nodes.length <= 2 ? Math.PI * i : -Math.PI / 2 + (2 * Math.PI * i) / nodes.length;
      pos.set(n, { x: Math.round(cx + ring * Math.cos(a)), y: Math.round(cy + ring * Math.sin(a)) });
    });
    $("graph-panel").classList.toggle("wide", edges.length > 12);

    // Never drawn larger than its own size (text stays 12px at most).
    const svg = el("svg:svg", { viewBox: "0 0 " + Math.round(W) + " " + Math.round(H), role: "img", "aria-label": "wait-for graph",
      style: "max-width:" + Math.round(W) + "px" });
    const defs = el("svg:defs", {});
    for (const [id, color] of [["arrow", "#c27c0e"], ["arrow-cycle", "#d64545"]]) {
      defs.append(el("svg:marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: color })));
    }
    svg.append(defs);

    const twoWay = new Set(edges.map((e) => e.from + ">" + e.to));
    for (const e of edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
      const ux = dx / len, uy = dy / len;
      // Bend an edge whose reverse exists so both stay visible.
      const bend = twoWay.has(e.to + ">" + e.from) ? 28 : 0;
      const sx = a.x + ux * R, sy = a.y + uy * R, tx = b.x - ux * (R + 2), ty = b.y - uy * (R + 2);
      const mx = (sx + tx) / 2 - uy * bend, my = (sy + ty) / 2 + ux * bend;
      const inCycle = cyc.has(e.from) && cyc.has(e.to);
      const g = el("svg:g", {},
        el("svg:title", {}, label(e.from) + " waits for " + label(e.to) + (e.locks.length ? " on " + e.locks.join(", ") : "")),
        el("svg:path", { class: "edge" + (inCycle ? " cycle" : ""), d: `M${sx},${sy} Q${mx},${my} ${tx},${ty}`,
          "marker-end": "url(#" + (inCycle ? "arrow-cycle" : "arrow") + ")" }));
      if (e.locks.length && edges.length <= 12) {
        const text = e.locks.length > 1 ? e.locks[0] + " +" + (e.locks.length - 1) : e.locks[0];
        g.append(el("svg:text", { class: "elabel", x: (sx + 2 * mx + tx) / 4, y: (sy + 2 * my + ty) / 4 - 6 }, text));
      }
      svg.append(g);
    }
    for (const n of nodes) {
      const p = pos.get(n);
      const cls = "node" + (cyc.has(n) ? " cycle" : waiting.has(n) ? " waiting" : "");
      svg.append(el("svg:g", { class: cls, "data-session": n },
        el("svg:title", {}, "session " + n + (nameOf(n) ? " (" + nameOf(n) + ")" : "") + (waiting.has(n) ? ", waiting" : "")),
        el("svg:circle", { cx: p.x, cy: p.y, r: R }),
        ...labels.get(n).map((line, i, all) => el("svg:text", { x: p.x, y: p.y + (i - (all.length - 1) / 2) * 15, class: i ? "sid" : null }, line))));
    }
    const legend = el("div", { class: "legend" },
      el("span", {}, el("span", { class: "sw" }), "waiting session → the session it waits for (a holder, or a waiter queued ahead of it)"),
      edges.length > 12 ? el("span", {}, "lock names on hover") : null,
      cyc.size ? el("span", {}, el("span", { class: "sw cycle" }), "cycle (deadlock)") : null);
    box.replaceChildren(svg, legend);
  }

  // ---- sessions ----------------------------------------------------------

  // The selected session (?session=ID, or a click on its row).
  let selected = new URLSearchParams(location.search).get("session") || "";
  function select(id) {
    selected = selected === id ? "" : id;
    const u = new URL(location.href);
    if (selected) u.searchParams.set("session", selected);
    else u.searchParams.delete("session");
    history.replaceState(null, "", u);
    if (wake) wake(); else dirty = true;
  }
  $("sessions").addEventListener("click", (ev) => {
    const tr = ev.target.closest("tr[data-session-row]");
    if (tr) select(tr.dataset.sessionRow);
  });
  $("graph").addEventListener("click", (ev) => {
    const g = ev.target.closest("g[data-session]");
    if (g) select(g.getAttribute("data-session"));
  });
  $("session-detail").addEventListener("click", (ev) => {
    if (ev.target.closest("#detail-close")) select(selected);
  });

  function renderSessions(list, truncated) {
    $("sessions-count").textContent = (truncated ? "first " : "") + list.length + " this token can see";
    const rows = list.map((s) => el("tr", { "data-session-row": s.id, class: s.id === selected ? "sel" : null, title: "show this session" },
      el("td", { class: "mono" }, s.id),
      el("td", { title: s.name || null }, s.name || el("span", { class: "none" }, "—")),
      el("td", { class: "mono" }, s.ttl),
      el("td", {}, s.since ? age("", "s\0" + s.id, Date.now(), s.since) : el("span", { class: "none" }, "—")),
      el("td", { class: "num" }, (s.held || []).length),
      el("td", { class: "num" }, (s.pending || []).length)));
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: 6, class: "empty" }, "No session.")));
    $("sessions").tBodies[0].replaceChildren(...rows);
  }

  function detailList(title, items, empty) {
    return [el("h4", {}, title + " (" + items.length + ")"),
      items.length ? el("ul", { class: "detail" }, items) : el("p", { class: "none" }, empty)];
  }
  function renderDetail(id, r) {
    const box = $("session-detail");
    box.hidden = !id;
    if (!id) { box.replaceChildren(); return; }
    const head = (s) => el("h3", {}, "Session ", el("span", { class: "mono", id: "detail-id" }, id), s && s.name ? " · " + s.name : "",
      el("button", { type: "button", id: "detail-close" }, "close"));
    if (!r || r.status === "rejected") {
      box.replaceChildren(head(null), el("p", { class: "empty" }, r ? r.reason.message : "loading…"));
      return;
    }
    const s = r.value;
    box.replaceChildren(head(s),
      el("p", { class: "meta" }, "ttl " + s.ttl + " · on_deadlock " + s.on_deadlock + " · lock_delay " + s.lock_delay + (s.ordered ? " · ordered" : "")),
      ...detailList("Held", (s.held || []).map((h) => el("li", { "data-held": h.name },
        el("span", { class: "name" }, h.name), " ", h.mode, " ", h.weight + "×" + h.count, " ",
        el("span", { class: "tok", title: "fencing token" }, "#" + h.token), h.expires ? " until " + new Date(h.expires).toLocaleTimeString() : "")), "Holds nothing."),
      ...detailList("Pending requests", (s.pending || []).map((p) => el("li", { class: "mono", "data-pending": p }, p)), "Waits for nothing."),
      ...detailList("Revoked holds", (s.revoked || []).map((v) => el("li", { "data-revoked": v.name },
        el("span", { class: "name" }, v.name), " ", el("span", { class: "tok" }, "#" + v.token), " at index " + v.index)), "None revoked."));
  }

  // ---- polling -----------------------------------------------------------

  const prefixInput = $("prefix");
  prefixInput.value = new URLSearchParams(location.search).get("prefix") || "";
  let wake = null;
  prefixInput.addEventListener("input", () => {
    const u = new URL(location.href);
    if (prefixInput.value) u.searchParams.set("prefix", prefixInput.value);
    else u.searchParams.delete("prefix");
    history.replaceState(null, "", u);
    resetSeen(); // other names: not new, just newly in view
    if (wake) wake(); // refresh now rather than at the next tick
  });

  function setLive(ok, text) {
    $("live").className = "live " + (ok ? "ok" : "bad");
    $("live-text").textContent = text;
  }

  async function tick() {
    const prefix = prefixInput.value;
    // ?stale: this node's applied state, so the page keeps working on a
    // follower and during an election.
    const sel = selected;
    const [st, locks, wg, ss, one] = await Promise.allSettled([
      getJSON("/v1/status"),
      getList("/v1/locks?stale&prefix=" + encodeURIComponent(prefix)),
      getJSON("/v1/waitgraph?stale"),
      getList("/v1/sessions?stale"),
      sel ? getJSON("/v1/sessions/" + encodeURIComponent(sel) + "?stale") : Promise.resolve(null),
    ]);
    const now = Date.now();
    getText("/metrics").then((text) => renderNodeRates(text, Date.now()), () => {});
    if (st.status === "fulfilled") renderStatus(st.value);
    if (ss.status === "fulfilled") {
      sessionsById = new Map(ss.value.items.map((s) => [String(s.id), s]));
      renderSessions(ss.value.items, ss.value.truncated);
    }
    if (sel === selected) renderDetail(sel, sel ? one : null);
    const why = (r) => r.status === "rejected" && r.reason.status;
    // 401: no token, or one the cluster does not know; 403: the token may
    // not see this, which is said in its place rather than as an error.
    if (why(locks) === 401 || why(wg) === 401) {
      askToken(token() ? "This token is not valid (unknown or deleted): enter another." : "This cluster runs with ACLs: enter a token.");
      clearViews();
    } else if (why(locks) === 403) {
      lockMessage("This token may not list locks: " + locks.reason.message, "denied");
    }
    if (locks.status === "fulfilled" && prefix === prefixInput.value) {
      if (!firstPoll) firstPoll = now;
      renderLocks(locks.value.items, prefix, locks.value.truncated, now);
      diffPolls(locks.value.items, now);
      baseline = false;
      renderChanges(now);
      // The graph is of the whole table; lock names for its labels come
      // from the filtered list, so with a prefix some labels may be absent.
      const denied = why(wg) === 403 ? wg.reason.message : null;
      renderGraph(graphEdges(locks.value.items, wg.status === "fulfilled" ? wg.value : null), denied);
    }
    const errs = [st, locks].filter((r) => r.status === "rejected" && r.reason.status !== 403).map((r) => r.reason.message);
    if (why(locks) === 401) setLive(false, "needs a token");
    else if (errs.length) setLive(false, "error: " + errs[0]);
    else setLive(true, "live · " + new Date().toLocaleTimeString());
  }

  let dirty = false; // a change reported while a refresh was running
  async function loop() {
    for (;;) {
      dirty = false;
      try {
        await tick();
      } catch (err) {
        setLive(false, "error: " + err.message);
      }
      if (dirty) continue;
      await new Promise((resolve) => {
        const t = setTimeout(resolve, POLL_MS);
        wake = () => { clearTimeout(t); resolve(); };
      });
      wake = null;
    }
  }
  // The event stream (GET /v1/events), read with fetch() so that it
  // carries the token: EventSource cannot send headers. A node ends a
  // stream after its maximum duration, refuses one over its limit (429) or
  // without a valid token (401), or the connection breaks: reconnect with
  // backoff (0.5 s doubling to 30 s, with jitter; back to 0.5 s once a
  // stream has delivered an event). A new token reopens the stream at once.
  let restream = null;
  async function follow() {
    let backoff = 500;
    for (;;) {
      const ctl = new AbortController();
      restream = () => { backoff = 500; ctl.abort(); };
      try {
        const res = await fetch("/v1/events", { cache: "no-store", headers: authHeaders(), signal: ctl.signal });
        if (res.ok && res.body) {
          await readEvents(res.body.getReader(), () => {
            backoff = 500;
            if (wake) wake(); else dirty = true;
          });
        } else if (res.body) {
          res.body.cancel().catch(() => {});
        }
      } catch (err) { /* aborted or broken: reconnect below */ }
      // Wait, unless a new token cuts the wait short.
      const wait = backoff * (0.75 + Math.random() / 2);
      backoff = Math.min(backoff * 2, 30000);
      await new Promise((resolve) => {
        const t = setTimeout(resolve, wait);
        restream = () => { backoff = 500; clearTimeout(t); resolve(); };
      });
    }
  }

  // readEvents parses the text/event-stream format (lines end in CRLF, LF
  // or CR; a blank line ends an event; lines starting ":" are comments,
  // like the node's keepalives) and calls onEvent for each event with
  // data, until the stream ends.
  async function readEvents(reader, onEvent) {
    const dec = new TextDecoder();
    let buf = "", data = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += dec.decode(value, { stream: true });
      for (;;) {
        const m = /\r\n|\r|\n/.exec(buf);
        // A lone CR at the end may be the first half of a CRLF.
        if (!m || (m[0] === "\r" && m.index === buf.length - 1)) break;
        const line = buf.slice(0, m.index);
        buf = buf.slice(m.index + m[0].length);
        if (line === "") {
          if (data !== null) onEvent(data);
          data = null;
        } else if (line === "data" || line.startsWith("data:")) {
          const v = line.slice(5).replace(/^ /, "");
          data = data === null ? v : data + "\n" + v;
        }
      }
    }
  }
  if (streaming) follow();
  loop();
})();
