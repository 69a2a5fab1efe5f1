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
  // Durations are compact and never wrap (their cells say white-space:
  // nowrap): an age is "42s", "4m05s", "3h07m" or "2d04h".
  function fmtDur(ms) {
    const s = Math.max(0, Math.floor(ms / 1000)), pad = (n) => String(n).padStart(2, "0");
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + pad(s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + pad(Math.floor(s / 60) % 60) + "m";
    return Math.floor(s / 86400) + "d" + pad(Math.floor(s / 3600) % 24) + "h";
  }
  // fmtGoDur shortens a duration as lockd writes it (Go's "24h0m0s",
  // "1m30s", "1.5s", "500ms") by leaving out its zero units: "24h",
  // "1m30s". It keeps hours (no days): it reads as what lockctl takes.
  const GO_UNIT_MS = { h: 3600000, m: 60000, s: 1000, ms: 1, us: 1e-3, "µs": 1e-3, ns: 1e-6 };
  const GO_PART = /(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g;
  function fmtGoDur(d) {
    d = String(d || "");
    if (!/^(\d+(?:\.\d+)?(h|ms|m|s|us|µs|ns))+$/.test(d)) return d || "–";
    let ms = 0;
    for (const [, n, unit] of d.matchAll(GO_PART)) ms += parseFloat(n) * GO_UNIT_MS[unit];
    if (ms === 0) return "0s";
    if (ms < 1000) return +ms.toFixed(3) + "ms";
    const h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, sec = +((ms % 60000) / 1000).toFixed(3);
    return (h ? h + "h" : "") + (m ? m + "m" : "") + (sec ? sec + "s" : "");
  }
  // isoAt writes a time as ISO 8601 in this browser's zone, with the
  // date and the offset: 2026-12-04T23:07:37+01:00.
  function isoAt(ms) {
    const t = new Date(ms), pad = (n) => String(n).padStart(2, "0");
    const off = -t.getTimezoneOffset(), a = Math.abs(off);
    const zone = off === 0 ? "Z" : (off > 0 ? "+" : "-") + pad(Math.floor(a / 60)) + ":" + pad(a % 60);
    return t.getFullYear() + "-" + pad(t.getMonth() + 1) + "-" + pad(t.getDate()) + "T" +
      pad(t.getHours()) + ":" + pad(t.getMinutes()) + ":" + pad(t.getSeconds()) + zone;
  }
  // A clock time on the page with its date and zone in the tooltip.
  const timeEl = (ms) => el("time", { datetime: isoAt(ms), title: isoAt(ms) }, new Date(ms).toLocaleTimeString());
  const ageText = (a) => (a.dataset.verb ? a.dataset.verb + " " : "") + fmtDur(Date.now() - Number(a.dataset.t));
  // age is how long ago something began, counting on while the page is
  // open; its tooltip says when (table time printed as calendar time, as
  // lockd's other shown times are).
  function age(verb, key, now, since) {
    const began = since ? Date.parse(since) : NaN;
    if (!isNaN(began)) {
      const a = el("span", { class: "age", "data-verb": verb, "data-t": began - tableSkew,
        title: "since " + isoAt(began) + " (table time: the leader's clock, which stood still while the cluster was down)" });
      a.textContent = ageText(a);
      return a;
    }
    const s = seenAt(key, now);
    const a = el("span", { class: "age", "data-verb": s.pre ? "seen for" : verb, "data-t": s.t,
      title: (s.pre ? "seen by this page since it loaded, " + isoAt(s.t) + " (lockd's log no longer holds when it began)"
        : "appeared at " + isoAt(s.t) + ", as this page saw it (within a poll)") + " (this browser's clock)" });
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
      timeEl(c.t), " ", c.text, " ", sessNodes(c.session)));
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
    $("h-quorum").replaceChildren(quorum(st));
    $("members-count").textContent = members.length;
    const items = members.map((m) => {
      // This node knows its own raft state; for the others it knows the
      // leader and the raft configuration.
      let role;
      if (m.id === st.node_id) role = st.state;
      else if (m.id === leader) role = "leader";
      else if (!m.voter) role = "non-voter";
      else role = leader ? "follower" : "voter";
      return el("li", { "data-member": m.id, "data-kind": memberKind(role, m.status),
        title: m.id + ": raft " + role + (m.voter ? " (voter)" : "") + ", gossip " + m.status +
          "; HTTP " + (m.http_addr || "–") + ", raft " + (m.raft_addr || "–") + (m.gossip_addr ? ", gossip " + m.gossip_addr : "") },
        el("span", { class: "dot" }), el("span", { class: "mono" }, m.id),
        m.id === st.node_id ? el("span", { class: "self" }, "this node") : null,
        el("span", { class: "badge " + role }, role), el("span", { class: "badge " + m.status }, m.status),
        el("span", { class: "mono addr" }, m.http_addr || "–"));
    });
    if (items.length === 0) items.push(el("li", { class: "none" }, "No members known."));
    $("members").replaceChildren(...items);
  }
  // memberKind is what a member's colour says: down or suspect as this
  // node's gossip sees it, else its raft role ("unknown" without a leader
  // to tell followers by).
  function memberKind(role, status) {
    if (status === "dead" || status === "left" || role === "shutdown") return "down";
    if (status === "suspect") return "suspect";
    return ["leader", "follower", "candidate", "non-voter"].includes(role) ? role : "unknown";
  }
  // quorum shows the node's own judgement of its quorum (its status's
  // quorum_lost and quorum: the voters its raft reaches), not a count of
  // its own: the node decides, and answers writes by it.
  function quorum(st) {
    const q = st.quorum || { voters: 0, reachable: [], needed: 0 };
    if (!q.voters) return el("span", { class: "quorum bad", title: "this node is in no cluster yet" }, "no voters");
    const up = (q.reachable || []).length;
    const cls = st.quorum_lost ? "bad" : up >= q.needed ? "ok" : "warn";
    return el("span", { class: "quorum " + cls, "data-quorum": cls,
      title: "a leader needs a majority: " + q.needed + " of " + q.voters + " voters; reachable as this node's raft sees them: " +
        ((q.reachable || []).join(", ") || "none") },
    up + "/" + q.voters + " voters reachable" + (st.quorum_lost ? " — quorum lost" : ""));
  }

  // ---- locks -------------------------------------------------------------

  // breakable is a lock name that wraps, when it must, after a "/".
  const breakable = (name) => name.split("/").flatMap((part, i) => (i ? ["/", el("wbr"), part] : [part]));

  function chip(cls, parts) {
    return el("span", { class: "chip " + cls }, ...parts);
  }

  // holdValue shows what a holder says about itself (a leader's address,
  // docs/api.md "Leader election"), cut short in the chip, whole on hover.
  const holdValue = (h) => h.value ? el("span", { class: "val", title: "value: " + h.value }, "= " + h.value) : null;

  function renderLocks(locks, prefix, truncated, now) {
    $("locks-count").textContent = (truncated ? "first " : "") + locks.length + (prefix ? " under " + JSON.stringify(prefix) : "");
    const rows = locks.map((l) => {
      const holders = (l.holders || []).map((h) => chip("holder", [
        sessNodes(h.session), el("span", { class: "k" }, h.mode),
        el("span", {}, h.weight + "×" + h.count), el("span", { class: "tok", title: "fencing token" }, "#" + h.token),
        holdValue(h), age("held for", holdKey(l, h), now, h.since)]));
      const waiters = (l.waiters || []).map((w) => chip("waiter", [
        sessNodes(w.session), el("span", { class: "k" }, w.mode),
        el("span", {}, "w" + w.weight), el("span", { class: "k", title: "request id" }, w.request_id),
        age("waiting", waitKey(l, w), now, w.since)]));
      const delayed = l.delayed_until ? el("div", { class: "delayed" }, "lock-delay until ", timeEl(Date.parse(l.delayed_until))) : null;
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
    $("graph-panel").classList.remove("wide");
    if (denied) {
      $("graph-count").textContent = "";
      box.replaceChildren(el("p", { class: "empty denied" }, "The wait-for graph needs a management token (admin on every name): " + denied));
      return;
    }
    edges = edges.filter((e) => e.from !== e.to);
    if (edges.length === 0) {
      $("graph-count").textContent = "";
      box.replaceChildren(el("p", { class: "empty" }, "No waiters."));
      return;
    }
    const nodes = [...new Set(edges.flatMap((e) => [e.from, e.to]))].sort((a, b) => String(a).localeCompare(String(b)));
    const waiting = new Set(edges.map((e) => e.from));
    const cyc = cycleNodes(nodes, edges);
    $("graph-count").textContent = edges.length + (edges.length === 1 ? " edge" : " edges") + (cyc.size ? " · deadlock" : "");
    const kind = (n) => (cyc.has(n) ? "cycle" : waiting.has(n) ? "waiting" : "holding");
    if (edges.length > GRAPH.maxEdges) {
      box.replaceChildren(...mostWaitedFor(nodes, edges, kind), graphLegend(cyc.size, false, 0));
      return;
    }
    const labels = graphLabels(nodes);
    const g = layoutGraph(nodes, edges, cyc, labels, edges.length <= GRAPH.maxNamed);
    $("graph-panel").classList.toggle("wide", edges.length > GRAPH.maxNamed || g.width > 900);
    const unnamed = g.routes.filter((r) => r.edge.locks.length && !r.label).length;
    box.replaceChildren(graphSVG(g, nodes, labels, kind, cyc), graphLegend(cyc.size, edges.length > GRAPH.maxNamed, unnamed));
  }

  // graphSVG draws a laid out graph: boxes, then edges, their lock names
  // over the edges, then the sessions' dots and labels.
  function graphSVG(g, nodes, labels, kind, cyc) {
    const label = (n) => labels.get(n).join(" ");
    // Never drawn larger than its own size (text stays 12px at most).
    const svg = el("svg:svg", { viewBox: "0 0 " + g.width + " " + g.height, role: "img", "aria-label": "wait-for graph",
      style: "max-width:" + g.width + "px" });
    const defs = el("svg:defs", {});
    for (const [id, color] of [["arrow", "#b98a3e"], ["arrow-cycle", "#d64545"]]) {
      defs.append(el("svg:marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: color })));
    }
    const boxes = el("svg:g", {}), paths = el("svg:g", {}), names = el("svg:g", {}), dots = el("svg:g", {});
    for (const r of g.routes) {
      const e = r.edge, inCycle = cyc.has(e.from) && cyc.has(e.to);
      paths.append(el("svg:g", { class: "wait", "data-from": e.from, "data-to": e.to },
        el("svg:title", {}, label(e.from) + " waits for " + label(e.to) + (e.locks.length ? " on " + e.locks.join(", ") : "")),
        el("svg:path", { class: "edge" + (inCycle ? " cycle" : ""), d: r.d, "marker-end": "url(#" + (inCycle ? "arrow-cycle" : "arrow") + ")" })));
      if (r.label) names.append(el("svg:text", { class: "elabel", x: r.label.x, y: r.label.y }, el("svg:title", {}, e.locks.join(", ")), r.label.text));
    }
    for (const n of nodes) {
      const p = g.pos.get(n), lines = labels.get(n);
      boxes.append(el("svg:rect", { class: "nodebox " + kind(n), "data-session": n, x: p.x, y: p.y - p.h / 2, width: g.colW, height: p.h, rx: 6 }));
      dots.append(el("svg:g", { class: "node " + kind(n), "data-kind": kind(n), "data-session": n },
        el("svg:title", {}, "session " + n + (nameOf(n) ? " (" + nameOf(n) + ")" : "") + (kind(n) === "holding" ? "" : ", waiting") + (cyc.has(n) ? ", on a cycle (deadlock)" : "")),
        el("svg:circle", { cx: p.x + 11, cy: p.y, r: 4.5 }),
        ...lines.map((line, i) => el("svg:text", { x: p.x + 21, y: p.y + (i - (lines.length - 1) / 2) * 15, class: i ? "sid" : null }, line))));
    }
    svg.append(defs, boxes, paths, names, dots);
    return svg;
  }

  // graphLegend says what the graph's colours and lines mean.
  function graphLegend(cycles, namesOnHover, unnamed) {
    return el("ul", { class: "legend", id: "graph-legend", "aria-label": "graph colours" },
      el("li", { "data-kind": "holding" }, el("span", { class: "sw-dot" }), "holds, waits for nothing"),
      el("li", { "data-kind": "waiting" }, el("span", { class: "sw-dot" }), "waits"),
      el("li", { "data-kind": "cycle" }, el("span", { class: "sw-dot" }), "on a cycle (deadlock)"),
      el("li", {}, el("span", { class: "sw" }), "waiting session → the session it waits for (a holder, or a waiter queued ahead of it)"),
      cycles ? el("li", {}, el("span", { class: "sw cycle" }), "cycle (deadlock)") : null,
      namesOnHover ? el("li", {}, "lock names on hover") : null,
      unnamed ? el("li", {}, unnamed + " lock " + (unnamed === 1 ? "name" : "names") + " on hover only (no room)") : null);
  }

  // mostWaitedFor stands for a graph too big to draw: the sessions most
  // waited for, which are what an operator looks for first.
  function mostWaitedFor(nodes, edges, kind) {
    const waiters = new Map(nodes.map((n) => [n, 0]));
    for (const e of edges) waiters.set(e.to, waiters.get(e.to) + 1);
    const top = [...waiters].filter(([, k]) => k > 0).sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0]))).slice(0, 10);
    return [el("p", { class: "empty" }, "Too big to draw (" + edges.length + " edges among " + nodes.length + " sessions). Most waited for:"),
      el("ul", { class: "detail" }, top.map(([n, k]) => el("li", { "data-kind": kind(n), "data-session": n },
        el("span", { class: "sw-dot" }), sessNodes(n), " · " + k + " waiting")))];
  }

  // ---- wait-for graph layout ---------------------------------------------
  // The graph is drawn in columns, left to right, as Graphviz's dot draws
  // ranks: a session that waits for nothing (a holder) in the rightmost
  // column, each waiter left of what it waits for, so that arrows point
  // right; the arrow that closes a cycle (a deadlock) points back. Each
  // connected part has a band of its own, parts with a deadlock first.
  // Within a column the order is the one of the fewest crossings found
  // (barycentre sweeps, then swaps of neighbours), so a graph that can be
  // drawn without crossing edges is, as a rule. An edge over several
  // columns runs through a lane in each column between, one lane per
  // waiter, so it passes no session. A lock name sits on the last stretch
  // of its edge, in the gap between two columns (never over a session),
  // where it meets no other name; a name with no such place is left to
  // the edge's tooltip.

  // Sizes in px, but lane and partGap: in rows. Lock names go on graphs
  // of up to maxNamed edges; one of more than maxEdges is not drawn.
  const GRAPH = { pad: 8, rowH: 52, boxH: 36, lane: 0.4, partGap: 0.3, maxLabel: 20, arrow: 14, maxNamed: 12, maxEdges: 500 };
  // textWidth measures text in the page's monospace font (the graph's
  // CSS, app.css: --mono) at font ("600 12px": a weight and a size).
  let measure = null, mono = "";
  function textWidth(text, font) {
    if (!measure) {
      measure = document.createElement("canvas").getContext("2d");
      mono = getComputedStyle(document.documentElement).getPropertyValue("--mono").trim() || "monospace";
    }
    measure.font = font + " " + mono;
    return measure.measureText(text).width;
  }
  // midCut shortens a lock name to n characters by leaving out segments
  // in its middle, keeping the first and as many of the last as fit
  // ("reports/…/summary"), else characters in its middle.
  function midCut(s, n) {
    if (s.length <= n) return s;
    const segs = s.split("/");
    for (let k = segs.length - 2; k >= 1 && segs.length > 2; k--) {
      const cut = segs[0] + "/…/" + segs.slice(segs.length - k).join("/");
      if (cut.length <= n) return cut;
    }
    const head = Math.ceil((n - 1) / 2);
    return s.slice(0, head) + "…" + s.slice(s.length - (n - 1 - head));
  }

  // layoutGraph returns where everything goes: pos (session -> {x, y,
  // h}: the box's left, middle and height), colW, width, height, and
  // routes (one per edge: {edge, d: its path, label: {x, y, text} or
  // null}). Lock names are measured to size the gaps between columns.
  function layoutGraph(nodes, edges, cyc, labels, withNames) {
    const colW = Math.ceil(Math.max(...nodes.map((n) => Math.max(...labels.get(n).map((l, i) =>
      textWidth(l, i ? "11px" : "600 12px")))))) + 30;
    const names = edges.map((e) => {
      if (!withNames || !e.locks.length) return "";
      const more = e.locks.length > 1 ? " +" + (e.locks.length - 1) : "";
      return midCut(e.locks[0], GRAPH.maxLabel - more.length) + more;
    });
    const nameW = names.map((t) => (t ? Math.ceil(textWidth(t, "11px")) + 6 : 0));
    const gap = names.some(Boolean) ? Math.min(230, Math.max(100, Math.max(...nameW) + 2 * GRAPH.arrow + 20)) : 64;
    const parts = graphParts(nodes, edges, cyc).map(rankPart);
    const cols = Math.max(...parts.map((p) => p.ranks.length));
    const xLeft = (rank) => GRAPH.pad + (cols - 1 - rank) * (colW + gap);
    const pos = new Map(), ends = [];
    let top = GRAPH.pad;
    for (const p of parts) {
      for (const [n, y] of p.y) {
        const x = xLeft(p.rank.get(n));
        pos.set(n, { x, y: top + y * GRAPH.rowH, h: isLane(n) ? 0 : GRAPH.boxH });
      }
      top += (p.height + GRAPH.partGap) * GRAPH.rowH;
      ends.push(...p.routes);
    }
    spreadEnds(ends, pos);
    const placed = [], routes = new Array(edges.length);
    for (const r of ends) {
      const pts = routePoints(r, pos, colW);
      const lbl = names[r.i] ? placeName(pts, names[r.i], nameW[r.i], placed) : null;
      routes[r.i] = { edge: edges[r.i], d: pathOf(r.back ? reversed(pts) : pts), label: lbl };
    }
    return { pos, colW, routes, width: Math.ceil(xLeft(0) + colW + GRAPH.pad), height: Math.ceil(top - GRAPH.partGap * GRAPH.rowH + GRAPH.pad) };
  }

  // graphParts splits the graph into its connected parts: those with a
  // deadlock first, then the larger, then by their first session's id.
  function graphParts(nodes, edges, cyc) {
    const up = new Map(nodes.map((n) => [n, n]));
    const root = (n) => { while (up.get(n) !== n) n = up.get(n); return n; };
    for (const e of edges) {
      const a = root(e.from), b = root(e.to);
      if (a !== b) up.set(a, b);
    }
    const by = new Map();
    for (const n of nodes) {
      if (!by.has(root(n))) by.set(root(n), { nodes: [], edges: [] });
      by.get(root(n)).nodes.push(n);
    }
    edges.forEach((e, i) => by.get(root(e.from)).edges.push(i));
    const parts = [...by.values()].map((p) => ({ ...p, all: edges, cyclic: p.nodes.some((n) => cyc.has(n)) }));
    return parts.sort((a, b) => (b.cyclic - a.cyclic) || (b.nodes.length - a.nodes.length) || String(a.nodes[0]).localeCompare(String(b.nodes[0])));
  }

  const laneOf = (from, rank) => "\0" + from + "\0" + rank;
  const isLane = (n) => n.startsWith("\0");

  // rankPart lays a part out in ranks: 0 for a session that waits for
  // nothing, else one more than the highest rank of what it waits for
  // (once cycles are cut, see routesOf). An edge over more than one rank
  // gets lanes in the ranks between, shared by the edges of the same
  // waiter. It returns the part with rank (entry -> rank), ranks (each
  // rank's entries in order), routes ({i, a, b, back, via: the entries
  // from a to b}), y (entry -> row) and height (in rows).
  function rankPart(part) {
    const routes = routesOf(part);
    const next = new Map(part.nodes.map((n) => [n, []]));
    for (const r of routes) next.get(r.a).push(r.b);
    const rank = new Map();
    const rankOf = (n) => {
      if (!rank.has(n)) {
        rank.set(n, 0);
        rank.set(n, Math.max(0, ...next.get(n).map((m) => rankOf(m) + 1)));
      }
      return rank.get(n);
    };
    part.nodes.forEach(rankOf);
    const ranks = [];
    const add = (n, k) => {
      if (isLane(n) && rank.has(n)) return; // the waiter's lane in this rank is there already
      rank.set(n, k);
      (ranks[k] = ranks[k] || []).push(n);
    };
    part.nodes.forEach((n) => add(n, rank.get(n)));
    for (const r of routes) {
      r.via = [r.a];
      for (let k = rank.get(r.a) - 1; k > rank.get(r.b); k--) {
        add(laneOf(r.a, k), k);
        r.via.push(laneOf(r.a, k));
      }
      r.via.push(r.b);
    }
    for (const rk of ranks) rk.sort((x, y) => String(x).localeCompare(String(y)));
    const { nb, below, count } = hopsOf(routes, rank, ranks);
    orderRanks(ranks, below, nb, count);
    const { y, height } = rowsOf(ranks, nb);
    return { ...part, rank, ranks, routes, y, height };
  }
  // routesOf is a part's edges as drawn, from a on the left to b on the
  // right: each cycle cut where a depth-first search in id order closes
  // it, that edge turned round (back: it is drawn pointing left).
  function routesOf(part) {
    const out = new Map(part.nodes.map((n) => [n, []]));
    for (const i of part.edges) out.get(part.all[i].from).push(i);
    const back = new Set(), seen = new Map(); // 1: on the search's path, 2: done
    const visit = (n) => {
      seen.set(n, 1);
      for (const i of out.get(n)) {
        const t = part.all[i].to;
        if (seen.get(t) === 1) back.add(i);
        else if (!seen.has(t)) visit(t);
      }
      seen.set(n, 2);
    };
    part.nodes.forEach((n) => { if (!seen.has(n)) visit(n); });
    return part.edges.map((i) => {
      const e = part.all[i];
      return back.has(i) ? { i, a: e.to, b: e.from, back: true } : { i, a: e.from, b: e.to, back: false };
    });
  }
  // hopsOf finds the hops, the stretches of the routes from one rank to
  // the next (once each): every entry's neighbours a rank higher (nb hi)
  // and lower (nb lo), and below[k], the hops from rank k+1 to rank k.
  function hopsOf(routes, rank, ranks) {
    const seen = new Set(), nb = new Map(), below = ranks.map(() => []);
    for (const n of rank.keys()) nb.set(n, { hi: [], lo: [] });
    for (const r of routes) {
      r.via.slice(1).forEach((w, j) => {
        const u = r.via[j], key = u + "\n" + w;
        if (seen.has(key)) return;
        seen.add(key);
        nb.get(u).lo.push(w);
        nb.get(w).hi.push(u);
        below[rank.get(w)].push([u, w]);
      });
    }
    return { nb, below, count: seen.size };
  }

  // orderRanks orders each rank's entries to cross few edges: sweeps that
  // sort a rank by the mean place of its neighbours in the rank before
  // (right to left, then left to right), keeping the best order seen,
  // then swaps of neighbours while a swap crosses fewer (for graphs of up
  // to 400 hops: each try counts the crossings next to it anew).
  function orderRanks(ranks, below, nb, hops) {
    const at = new Map();
    const place = (k) => ranks[k].forEach((n, i) => at.set(n, i));
    ranks.forEach((_, k) => place(k));
    const crossed = (k) => {
      const hs = below[k] || [];
      let c = 0;
      for (let i = 0; i < hs.length; i++) {
        for (let j = i + 1; j < hs.length; j++) {
          if ((at.get(hs[i][0]) - at.get(hs[j][0])) * (at.get(hs[i][1]) - at.get(hs[j][1])) < 0) c++;
        }
      }
      return c;
    };
    const total = () => ranks.reduce((sum, _, k) => sum + crossed(k), 0);
    const sortBy = (k, side) => {
      const key = new Map(ranks[k].map((n) => {
        const ms = nb.get(n)[side];
        return [n, ms.length ? ms.reduce((sum, m) => sum + at.get(m), 0) / ms.length : at.get(n)];
      }));
      ranks[k].sort((x, y) => key.get(x) - key.get(y) || at.get(x) - at.get(y));
      place(k);
    };
    // Counting crossings costs the square of the hops: a huge graph gets
    // four sweeps, uncounted.
    const counted = hops <= 2000;
    let best = ranks.map((r) => r.slice()), fewest = counted ? total() : Infinity;
    for (let sweep = 0; sweep < (counted ? 8 : 4) && fewest > 0; sweep++) {
      if (sweep % 2 === 0) for (let k = ranks.length - 2; k >= 0; k--) sortBy(k, "hi");
      else for (let k = 1; k < ranks.length; k++) sortBy(k, "lo");
      const c = counted ? total() : Infinity;
      if (c < fewest || !counted) [fewest, best] = [c, ranks.map((r) => r.slice())];
    }
    best.forEach((r, k) => { ranks[k] = r; place(k); });
    const around = (k) => crossed(k) + (k > 0 ? crossed(k - 1) : 0);
    const swap = (k, i) => { [ranks[k][i], ranks[k][i + 1]] = [ranks[k][i + 1], ranks[k][i]]; place(k); };
    for (let round = 0, better = fewest > 0 && hops <= 400; better && round < 8; round++) {
      better = false;
      for (let k = 0; k < ranks.length; k++) {
        for (let i = 0; i + 1 < ranks[k].length; i++) {
          const before = around(k);
          swap(k, i);
          if (around(k) < before) better = true;
          else swap(k, i);
        }
      }
    }
  }

  // rowsOf gives each entry its row: a rank keeps its order and its
  // spacing (a session takes a row, a lane less), each entry as near as
  // it may be to the mean row of its neighbours: in passes from the
  // right, from the left and from the right again. Rows start at 0.
  function rowsOf(ranks, nb) {
    const h = (n) => (isLane(n) ? GRAPH.lane : 1);
    const y = new Map();
    let row = 0;
    ranks[0].forEach((n, i) => {
      row += i ? (h(ranks[0][i - 1]) + h(n)) / 2 : h(n) / 2;
      y.set(n, row);
    });
    const pass = (k, side) => {
      const want = ranks[k].map((n) => {
        const ms = nb.get(n)[side];
        return ms.length ? ms.reduce((sum, m) => sum + y.get(m), 0) / ms.length : y.get(n);
      });
      pack(want, ranks[k].map(h)).forEach((v, i) => y.set(ranks[k][i], v));
    };
    for (let k = 1; k < ranks.length; k++) pass(k, "lo");
    for (let k = ranks.length - 2; k >= 0; k--) pass(k, "hi");
    for (let k = 1; k < ranks.length; k++) pass(k, "lo");
    const top = Math.min(...[...y].map(([n, v]) => v - h(n) / 2));
    for (const [n, v] of y) y.set(n, v - top);
    return { y, height: Math.max(...[...y].map(([n, v]) => v + h(n) / 2)) };
  }
  // pack moves wanted places apart to at least their mean height, keeping
  // their order: the mean of pushing each down from the one above and up
  // from the one below (both keep the spacing, so their mean does).
  function pack(want, h) {
    const n = want.length, down = [], up = [];
    for (let i = 0; i < n; i++) down[i] = i ? Math.max(want[i], down[i - 1] + (h[i - 1] + h[i]) / 2) : want[i];
    for (let i = n - 1; i >= 0; i--) up[i] = i < n - 1 ? Math.min(want[i], up[i + 1] - (h[i] + h[i + 1]) / 2) : want[i];
    return down.map((d, i) => (d + up[i]) / 2);
  }

  // spreadEnds gives the edges at one side of a box points of their own,
  // spread over its height in the order of where they come from, so that
  // two edges between the same sessions (a deadlock of two) stay apart
  // and arrows do not pile up: dy0 where an edge leaves a, dy1 where it
  // reaches b.
  function spreadEnds(routes, pos) {
    const sides = new Map();
    const put = (key, r, other) => {
      if (!sides.has(key)) sides.set(key, []);
      sides.get(key).push({ r, other });
    };
    for (const r of routes) {
      put(r.a + "\0dy0", r, pos.get(r.via[1]).y);
      put(r.b + "\0dy1", r, pos.get(r.via[r.via.length - 2]).y);
    }
    for (const [key, list] of sides) {
      const cut = key.lastIndexOf("\0"), p = pos.get(key.slice(0, cut)), end = key.slice(cut + 1);
      list.sort((u, v) => u.other - v.other || u.r.i - v.r.i);
      const step = list.length > 1 ? Math.min(12, (p.h - 8) / (list.length - 1)) : 0;
      list.forEach(({ r }, j) => { r[end] = (j - (list.length - 1) / 2) * step; });
    }
  }

  // routePoints is an edge's way from a's right side to b's left side:
  // points, each with how it is reached from the one before ("C": a curve
  // across a gap, "L": a straight line along a lane).
  function routePoints(r, pos, colW) {
    const a = pos.get(r.a), b = pos.get(r.b);
    const pts = [{ x: a.x + colW + 1, y: a.y + r.dy0 }];
    for (const n of r.via.slice(1, -1)) {
      const p = pos.get(n);
      pts.push({ x: p.x, y: p.y, how: "C" }, { x: p.x + colW, y: p.y, how: "L" });
    }
    pts.push({ x: b.x - 1, y: b.y + r.dy1, how: "C" });
    return pts;
  }
  // reversed is the way back along pts: an edge drawn backwards.
  function reversed(pts) {
    const out = pts.slice().reverse().map((p) => ({ x: p.x, y: p.y }));
    for (let i = 1; i < out.length; i++) out[i].how = pts[pts.length - i].how;
    return out;
  }
  const r1 = (v) => Math.round(v * 10) / 10;
  // pathOf draws points as an SVG path; a curve leaves and meets its ends
  // level, so that edges between the same two columns cross only where
  // their order does.
  function pathOf(pts) {
    let d = "M" + r1(pts[0].x) + "," + r1(pts[0].y);
    for (let i = 1; i < pts.length; i++) {
      const p = pts[i - 1], q = pts[i], mx = r1((p.x + q.x) / 2);
      d += q.how === "L" ? " L" + r1(q.x) + "," + r1(q.y) : " C" + mx + "," + r1(p.y) + " " + mx + "," + r1(q.y) + " " + r1(q.x) + "," + r1(q.y);
    }
    return d;
  }

  // placeName finds a lock name a place on its edge: on the last curve
  // first, at its middle or to either side, wholly inside the gap between
  // the columns (clear of the boxes and of an arrowhead at either end, an
  // edge drawn backwards has it on the left) and clear of
  // the names placed before. It returns {x, y, text} (the name's middle)
  // or null.
  const NAME_H = 15, SPOTS = [0.5, 0.42, 0.58, 0.34, 0.66, 0.26, 0.74];
  function placeName(pts, text, w, placed) {
    for (let i = pts.length - 1; i > 0; i--) {
      const p = pts[i - 1], q = pts[i];
      if (q.how !== "C") continue;
      const mx = (p.x + q.x) / 2;
      for (const t of SPOTS) {
        const u = 1 - t;
        const x = u * u * u * p.x + 3 * u * t * mx + t * t * t * q.x;
        const y = (u * u * u + 3 * u * u * t) * p.y + (3 * u * t * t + t * t * t) * q.y;
        const b = { l: x - w / 2, r: x + w / 2, t: y - NAME_H / 2, b: y + NAME_H / 2 };
        if (b.l < p.x + GRAPH.arrow || b.r > q.x - GRAPH.arrow) continue;
        if (placed.some((o) => b.l < o.r + 2 && o.l < b.r + 2 && b.t < o.b + 1 && o.t < b.b + 1)) continue;
        placed.push(b);
        return { x: r1(x), y: r1(y), text };
      }
    }
    return null;
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
    const g = ev.target.closest("[data-session]");
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
      el("td", { class: "mono dur", title: "TTL " + s.ttl }, fmtGoDur(s.ttl)),
      el("td", { class: "dur" }, s.since ? age("", "s\0" + s.id, Date.now(), s.since) : el("span", { class: "none" }, "—")),
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
      el("p", { class: "meta" }, "ttl " + fmtGoDur(s.ttl) + " · on_deadlock " + s.on_deadlock + " · lock_delay " + fmtGoDur(s.lock_delay) + (s.ordered ? " · ordered" : "")),
      ...detailList("Held", (s.held || []).map((h) => el("li", { "data-held": h.name },
        el("span", { class: "name" }, h.name), " ", h.mode, " ", h.weight + "×" + h.count, " ",
        el("span", { class: "tok", title: "fencing token" }, "#" + h.token), h.value ? [" ", holdValue(h)] : "",
        h.expires ? [" until ", timeEl(Date.parse(h.expires))] : "")), "Holds nothing."),
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
