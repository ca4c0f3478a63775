// The tracker dashboard: one page, no libraries. Live state arrives once a second as
// server-sent events (/api/events); tables that can be large (swarms, peers) are fetched
// a page at a time. Every value from the node is written with textContent, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { tab: "config", node: null, lastEvent: 0, swarm: { page: 1, sort: "-peers", query: "" }, detail: null, peerPage: 1 };

// ---------- small helpers

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
function row(cells, cls) {
  const tr = el("tr", null, cls);
  for (const c of cells) {
    const td = c instanceof Node ? (() => { const t = el("td"); t.appendChild(c); return t; })() : el("td", c);
    if (typeof c === "number") td.className = "num";
    tr.appendChild(td);
  }
  return tr;
}
function fill(tbody, rows) { tbody.replaceChildren(...rows); }
function bytes(n) {
  if (n === null || n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0, v = Number(n);
  while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return (i ? v.toFixed(1) : v) + " " + units[i];
}
function ago(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return ms + " ms ago";
  if (ms < 120000) return (ms / 1000).toFixed(1) + " s ago";
  return Math.round(ms / 60000) + " min ago";
}
function clock(ms) { return new Date(ms).toLocaleTimeString(); }
let readTokenDeclined = false;
// A read, with the stored token when there is one: a dashboard beyond loopback gives
// peer data only to the admin or the viewer token, asked for once after a 401.
async function getJSON(path) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const t = token();
    const r = await fetch(path, { cache: "no-store", headers: t ? { Authorization: "Bearer " + t } : {} });
    const body = await r.json().catch(() => ({ error: "unreadable answer" }));
    if (r.status === 401 && attempt === 0 && !readTokenDeclined) {
      localStorage.removeItem("tracker-admin-token");
      if (await askToken()) continue;
      readTokenDeclined = true;  // not asked again at every refresh; a control asks anew
    }
    if (r.status === 401 && session) loadSession();  // the session ended (signed out, user disabled)
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }
}

// ---------- tabs

function showTab(name) {
  if (!document.getElementById("tab-" + name)) name = "config";
  state.tab = name;
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll("section.tab")) s.hidden = s.id !== "tab-" + name;
  if (location.hash !== "#" + name) history.replaceState(null, "", "#" + name);
  refreshTab();
}
function refreshTab() {
  if (state.tab === "swarms") { loadSwarms(); if (state.detail) loadPeers(); }
  if (state.tab === "activity") loadHistory();
  if (state.tab === "torrents") loadTorrents();
  if (state.tab === "users") loadUsers();
}

// ---------- live status (server-sent events)

function connect() {
  const source = new EventSource("/api/events");
  source.addEventListener("status", (e) => {
    state.lastEvent = Date.now();
    const frame = JSON.parse(e.data);
    const first = !state.node;
    state.node = frame.node;
    renderNode(frame.node);
    renderTrackers(frame.trackers, frame.node);
    setReachable(true);
    if (first) loadSettings();
  });
  source.onerror = () => { if (Date.now() - state.lastEvent > 2500) setReachable(false); };
}
function setReachable(up) {
  $("unreachable").hidden = up;
  const link = $("link");
  link.textContent = up ? "live" : "node unreachable — retrying";
  link.className = "link " + (up ? "up" : "down");
}
// EventSource reconnects by itself; this only notices that nothing arrives.
setInterval(() => { if (state.lastEvent && Date.now() - state.lastEvent > 3000) setReachable(false); }, 1000);

function roleOf(n) { return n.service === "running" ? n.role : n.service; }

function renderNode(n) {
  $("node-name").textContent = n.mode === "standalone" ? "(standalone)" : (n.id ? "n" + n.id : "(id pending)");
  const role = roleOf(n);
  $("role").textContent = role;
  $("role").className = "badge " + role;
  $("epoch").textContent = n.mode === "cluster" ? "epoch " + n.epoch : "";
  $("service").textContent = n.service === "failed" ? "failure provoked" : n.service;
  $("btn-start").disabled = n.service !== "stopped";
  $("btn-stop").disabled = n.service === "stopped";
  $("btn-provoke").disabled = n.service !== "running";
  $("btn-recover").disabled = n.service !== "failed";
  const facts = [
    ["role", role], ["serving peers", n.serving ? "yes" : "no"], ["epoch", n.epoch], ["master", n.master ? "n" + n.master : "—"],
    ["last committed", n.lastCommitted + " (" + n.lastCommittedEpoch + ")"], ["in sync", n.inSync ? "yes" : "no"],
    ["swarms / peers", n.swarms + " / " + n.peers], ["requests / replies / errors", n.datagrams + " / " + n.replies + " / " + n.errorReplies],
    ["store", (n.storeHealthy ? "healthy" : "FAILING") + (n.storeBacklog ? ", backlog " + n.storeBacklog : "")],
    ["broker", n.mode === "cluster" ? (n.brokerConnected ? "connected to " + (n.broker.connectedTo || "?") : "disconnected" + (n.broker.problem ? ": " + n.broker.problem : ""))
      + (n.broker.authenticated ? ", authenticated" : ", NOT authenticated") : "—"],
    ["uptime", Math.round(n.uptimeMs / 1000) + " s"],
  ];
  fill($("node-facts"), facts.map(([k, v]) => row([k, v])));
  $("broker-link").textContent = n.mode === "cluster"
    ? (n.brokerConnected ? "connected" : "disconnected") + ", " + n.broker.sent + " sent, " + n.broker.received + " received, "
      + n.broker.badClusterMessages + " rejected, " + n.broker.connectionsLost + " reconnects"
    : "standalone (no cluster)";
}

function renderTrackers(rows, n) {
  fill($("trackers").tBodies[0], rows.map((t) => {
    // Nodes advertise their dashboard's URL: a link to it.
    let address = t.address;
    if (/^http:\/\/[\w.:\[\]-]+$/.test(t.address)) { address = el("a", t.address); address.href = t.address + "/#trackers"; }
    const tr = row([t.id, t.role, t.epoch, address, t.isSelf ? "this node" : ago(t.lastKeepaliveMsAgo), t.lastCommitted, t.inSync ? "yes" : "no"],
      (t.silent ? "silent " : "") + (t.isSelf ? "self" : ""));
    tr.dataset.id = t.id;
    tr.dataset.role = t.role;
    return tr;
  }));
}

async function loadSettings() {
  try {
    const rows = await getJSON("/api/config");
    state.settings = rows;
    fill($("settings"), rows.map((s) => row(s.source ? [s.key, s.value, s.source] : [s.key, s.value])));
    const editable = await getJSON("/api/config/editable");
    $("edit-settings").hidden = !editable.file || !editable.keys.length;
    $("edit-key").replaceChildren(...editable.keys.map((k) => { const o = el("option", k); o.value = k; return o; }));
    $("edit-result").textContent = editable.file ? "saved to " + editable.file + "; takes effect on the next Start" : "";
  } catch (e) { /* the next status event retries */ state.node = null; }
}

// ---------- controls

function token() { return localStorage.getItem("tracker-admin-token"); }
// One dialog at a time: reads refused together share the answer.
let tokenAsked = null;
function askToken() {
  if (tokenAsked) return tokenAsked;
  tokenAsked = new Promise((resolve) => {
    const dialog = $("token-dialog");
    $("token-input").value = "";
    dialog.onclose = () => {
      tokenAsked = null;
      const t = $("token-input").value.trim();
      if (dialog.returnValue === "ok" && t) {
        localStorage.setItem("tracker-admin-token", t);
        readTokenDeclined = false;
        resolve(t);
      } else resolve(null);
    };
    dialog.showModal();
  });
  return tokenAsked;
}
// ---------- sign-in: a session cookie (HttpOnly, SameSite=Strict) instead of a token

let session = null;  // {name, role} while signed in
function showSession() {
  $("session-user").textContent = session ? `signed in as ${session.name} (${session.role})` : "";
  $("signin").hidden = !!session;
  $("signout").hidden = !session;
}
async function loadSession() {
  const r = await fetch("/api/session", { cache: "no-store" }).catch(() => null);
  session = r && r.ok ? await r.json() : null;
  showSession();
}
function signIn() {
  const dialog = $("signin-dialog");
  $("signin-result").textContent = "";
  dialog.onclose = async () => {
    if (dialog.returnValue !== "ok") return;
    const body = JSON.stringify({ name: $("signin-name").value.trim(), password: $("signin-password").value });
    $("signin-password").value = "";
    const r = await fetch("/api/session", { method: "POST", body, headers: { "X-Tracker-CSRF": "1" } }).catch(() => null);
    const answer = r ? await r.json().catch(() => ({})) : { error: "node unreachable" };
    if (r && r.ok) { session = answer; readTokenDeclined = true; showSession(); refreshTab(); return; }
    $("signin-result").textContent = "refused: " + (answer.error || "node unreachable");
    dialog.showModal();
  };
  dialog.showModal();
}
async function signOut() {
  await fetch("/api/session", { method: "DELETE", headers: { "X-Tracker-CSRF": "1" } }).catch(() => null);
  session = null;
  showSession();
}

// A control request with the admin token, asked for once and again after a 401, or on
// the strength of a sign-in. Writes the outcome into `out`; returns whether the node
// accepted.
async function authorized(method, path, body, out) {
  if (session && !token()) {
    out.textContent = "…";
    const r = await fetch(path, { method, body, headers: { "X-Tracker-CSRF": "1" } }).catch(() => null);
    if (!r) { out.textContent = "node unreachable"; return false; }
    const answer = await r.json().catch(() => ({}));
    if (r.status === 401) await loadSession();
    out.textContent = r.ok ? answer.result : "refused: " + (answer.error || r.statusText);
    return r.ok;
  }
  let t = token() || await askToken();
  if (!t) { out.textContent = "no token given"; return false; }
  out.textContent = "…";
  for (let attempt = 0; attempt < 2; attempt++) {
    const r = await fetch(path, { method, body, headers: { Authorization: "Bearer " + t } }).catch(() => null);
    if (!r) { out.textContent = "node unreachable"; return false; }
    const answer = await r.json().catch(() => ({}));
    if (r.status === 401 && attempt === 0) {
      localStorage.removeItem("tracker-admin-token");
      t = await askToken();
      if (!t) { out.textContent = "no token given"; return false; }
      continue;
    }
    out.textContent = r.ok ? answer.result : "refused: " + (answer.error || r.statusText);
    return r.ok;
  }
  return false;
}
function control(path) { return authorized("POST", "/api/" + path, undefined, $("control-result")); }

// ---------- swarms

let swarmTimer = null;
async function loadSwarms() {
  const s = state.swarm;
  const q = new URLSearchParams({ query: s.query, sort: s.sort, page: s.page, size: 50 });
  try {
    const page = await getJSON("/api/swarms?" + q);
    if (page.pages && s.page > page.pages) { s.page = page.pages; return loadSwarms(); }
    $("swarm-count").textContent = page.total + " swarm" + (page.total === 1 ? "" : "s");
    $("swarm-page").textContent = page.page + " / " + Math.max(1, page.pages);
    $("swarm-prev").disabled = page.page <= 1;
    $("swarm-next").disabled = page.page >= page.pages;
    fill($("swarms").tBodies[0], page.rows.map((r) => {
      const name = r.name ? el("span", r.name) : el("span", r.infoHash, "mono");
      const tr = row([name, bytes(r.size), r.seeders, r.leechers, r.completed, r.peers], "clickable");
      tr.dataset.hash = r.infoHash;
      tr.onclick = () => { state.detail = { hash: r.infoHash, name: r.name || r.infoHash }; state.peerPage = 1; loadPeers(); };
      return tr;
    }));
  } catch (e) { $("swarm-count").textContent = "cannot list swarms: " + e.message; }
}
async function loadPeers() {
  const d = state.detail;
  if (!d) return;
  $("swarm-detail").hidden = false;
  $("detail-name").textContent = d.name;
  try {
    const page = await getJSON("/api/swarms/" + d.hash + "/peers?page=" + state.peerPage + "&size=50");
    $("peer-count").textContent = page.total + " peer" + (page.total === 1 ? "" : "s");
    $("peer-page").textContent = page.page + " / " + Math.max(1, page.pages);
    $("peer-prev").disabled = page.page <= 1;
    $("peer-next").disabled = page.page >= page.pages;
    fill($("peers").tBodies[0], page.rows.map((p) =>
      row([el("span", p.peerID, "mono"), p.client || "—", p.address, bytes(p.downloaded), bytes(p.left), bytes(p.uploaded), ago(p.lastAnnounceMsAgo)])));
  } catch (e) { $("peer-count").textContent = e.message; fill($("peers").tBodies[0], []); }
}

// ---------- torrents

async function loadTorrents() {
  try {
    const rows = await getJSON("/api/torrents");
    loadAccess();
    fill($("torrents").tBodies[0], rows.map((t) => {
      const link = el("a", "download");
      link.href = "/api/torrents/" + t.infoHash + "/file";
      const remove = el("button", "remove");
      remove.onclick = async () => { if (await authorized("DELETE", "/api/torrents/" + t.infoHash, undefined, $("torrent-result"))) loadTorrents(); };
      const actions = el("span");
      actions.append(link, " ", remove);
      const tr = row([t.name, bytes(t.size), t.files, el("span", t.infoHash, "mono"), clock(t.registeredAt), actions]);
      tr.dataset.hash = t.infoHash;
      return tr;
    }));
  } catch (e) { $("torrent-result").textContent = "cannot list torrents: " + e.message; }
}
// The cluster's access policy: its mode, its first rules, and changes sent as one
// request per 1,000 hashes (the API's limit per change).
async function loadAccess() {
  try {
    const a = await getJSON("/api/access?limit=200");
    $("access-summary").textContent = `mode ${a.mode}: ${a.allowed} allowed, ${a.denied} denied info hashes, ` +
      `${a.registered} registered torrents` + (a.allowed + a.denied > a.rules.length ? ` (first ${a.rules.length} rules shown)` : "");
    if (document.activeElement !== $("access-mode")) $("access-mode").value = a.mode;
    fill($("access-rules").tBodies[0], a.rules.map((r) => {
      const remove = el("button", "remove");
      remove.onclick = async () => { if (await setRules("remove", [r.infoHash])) loadAccess(); };
      return row([el("span", r.infoHash, "mono"), r.rule, remove]);
    }));
    const allows = a.clients.filter((c) => c.rule === "allow").length;
    $("clients-summary").textContent = !a.clients.length ? "every client is served" :
      `${a.clients.length} client rules; the longest matching prefix decides; ` +
      (allows ? "a client no rule names is refused (allow list)" : "a client no rule names is served (deny list)");
    fill($("client-rules").tBodies[0], a.clients.map((c) => {
      const remove = el("button", "remove");
      remove.onclick = async () => { if (await setClients("remove", [c.prefix])) loadAccess(); };
      return row([el("span", c.prefix, "mono"), c.rule, remove]);
    }));
  } catch (e) { $("access-result").textContent = "cannot read the access policy: " + e.message; }
}
// The users and their keys: read with the admin token only (keys are secrets).
async function loadUsers() {
  try {
    const u = await getJSON("/api/users?limit=500");
    $("users-summary").textContent = `${u.count} users; access mode ${u.mode}` +
      (u.mode === "private" ? ": announces need an enabled user's key" : ": keys are not asked for") +
      (u.count > u.users.length ? ` (first ${u.users.length} shown)` : "");
    fill($("users").tBodies[0], u.users.map((x) => {
      const act = (action, label) => {
        const b = el("button", label);
        b.onclick = async () => { if (await userChange({ action, name: x.name })) loadUsers(); };
        return b;
      };
      const actions = el("span", "");
      actions.append(act(x.enabled ? "disable" : "enable", x.enabled ? "disable" : "enable"), act("key", "new key"), act("remove", "remove"));
      return row([x.name, x.role, x.enabled ? "enabled" : "disabled", el("span", x.key || "-", "mono"), x.announces, x.completed,
        bytes(x.uploaded), bytes(x.downloaded), actions]);
    }));
  } catch (e) { $("users-summary").textContent = "cannot list users: " + e.message; }
}
function userChange(body) { return authorized("POST", "/api/users", JSON.stringify(body), $("user-result")); }
async function addUser() {
  const name = $("user-name").value.trim();
  if (!name) { $("user-result").textContent = "enter a name first"; return; }
  if (await userChange({ action: "add", name, role: $("user-role").value })) { $("user-name").value = ""; loadUsers(); }
}
async function setClients(rule, prefixes) {
  return authorized("POST", "/api/access/clients", JSON.stringify({ rule, prefixes }), $("client-result"));
}
async function applyClients() {
  const prefixes = $("client-prefixes").value.split(/\s+/).filter((p) => p);
  if (!prefixes.length) { $("client-result").textContent = "enter peer-id prefixes first"; return; }
  if (await setClients($("client-rule").value, prefixes)) { $("client-prefixes").value = ""; loadAccess(); }
}
async function setRules(rule, hashes) {
  for (let i = 0; i < hashes.length; i += 1000) {
    const body = JSON.stringify({ rule, infoHashes: hashes.slice(i, i + 1000) });
    if (!await authorized("POST", "/api/access/rules", body, $("access-result"))) return false;
  }
  return true;
}
async function applyRules() {
  const hashes = $("access-hashes").value.split("\n").map((l) => l.replace(/#.*/, "").trim()).filter((l) => l);
  if (!hashes.length) { $("access-result").textContent = "enter info hashes first"; return; }
  if (await setRules($("access-rule").value, hashes)) { $("access-hashes").value = ""; loadAccess(); }
}
async function uploadTorrent() {
  const file = $("torrent-file").files[0];
  if (!file) { $("torrent-result").textContent = "choose a .torrent file first"; return; }
  if (await authorized("POST", "/api/torrents", file, $("torrent-result"))) { $("torrent-file").value = ""; loadTorrents(); }
}

// ---------- activity: charts and timeline, drawn as SVG

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}
function chart(node, samples, series, w = 600, h = 140) {
  const from = Date.now() - 300000, to = Date.now();
  let max = 1;
  for (const s of samples) for (const f of series) if (s[f.key] != null) max = Math.max(max, s[f.key]);
  const x = (t) => ((t - from) / (to - from)) * w;
  const y = (v) => h - 12 - (v / max) * (h - 24);
  const parts = [svg("line", { x1: 0, y1: y(0), x2: w, y2: y(0), class: "grid" }), svg("line", { x1: 0, y1: y(max), x2: w, y2: y(max), class: "grid" }),
    svg("text", { x: 2, y: y(max) - 2, class: "axis" }, String(Math.round(max * 10) / 10)), svg("text", { x: 2, y: h - 2, class: "axis" }, "5 min ago"),
    svg("text", { x: w - 24, y: h - 2, class: "axis" }, "now")];
  for (const f of series) {
    const pts = samples.filter((s) => s[f.key] != null && s.at >= from).map((s) => x(s.at).toFixed(1) + "," + y(s[f.key]).toFixed(1));
    if (pts.length) parts.push(svg("polyline", { points: pts.join(" "), class: "line " + (f.cls || "") }));
  }
  node.replaceChildren(...parts);
}
async function loadHistory() {
  try {
    const h = await getJSON("/api/history");
    chart($("chart-announces"), h.samples, [{ key: "announces" }]);
    chart($("chart-latency"), h.samples, [{ key: "commitMeanMs" }, { key: "commitMaxMs", cls: "max" }]);
    const from = Date.now() - 300000;
    $("timeline").replaceChildren(svg("line", { x1: 0, y1: 20, x2: 600, y2: 20, class: "grid" }),
      ...h.events.filter((e) => e.at >= from).map((e) => svg("circle", { cx: ((e.at - from) / 300000) * 600, cy: 20, r: 5, class: "ev-" + e.kind }, undefined)));
    fill($("events").tBodies[0], h.events.slice().reverse().slice(0, 50).map((e) => row([clock(e.at), e.text, e.epoch])));
  } catch (e) { /* unreachable: the banner says so */ }
}

// ---------- wiring

document.addEventListener("DOMContentLoaded", () => {
  for (const b of document.querySelectorAll("#tabs button")) b.onclick = () => showTab(b.dataset.tab);
  for (const b of document.querySelectorAll("button[data-control]")) b.onclick = () => control(b.dataset.control);
  for (const th of document.querySelectorAll("#swarms th[data-sort]")) {
    th.onclick = () => {
      const field = th.dataset.sort, s = state.swarm;
      // A new column starts A→Z for names, largest first for numbers; a second click flips it.
      const first = field === "name" ? field : "-" + field;
      s.sort = s.sort === first ? (first.startsWith("-") ? field : "-" + field) : first;
      for (const o of document.querySelectorAll("#swarms th")) o.className = "";
      th.className = "sorted " + (s.sort.startsWith("-") ? "desc" : "asc");
      s.page = 1;
      loadSwarms();
    };
  }
  let debounce = null;
  $("swarm-search").oninput = (e) => {
    clearTimeout(debounce);
    debounce = setTimeout(() => { state.swarm.query = e.target.value; state.swarm.page = 1; loadSwarms(); }, 250);
  };
  $("swarm-prev").onclick = () => { state.swarm.page = Math.max(1, state.swarm.page - 1); loadSwarms(); };
  $("swarm-next").onclick = () => { state.swarm.page += 1; loadSwarms(); };
  $("peer-prev").onclick = () => { state.peerPage = Math.max(1, state.peerPage - 1); loadPeers(); };
  $("peer-next").onclick = () => { state.peerPage += 1; loadPeers(); };
  $("torrent-upload").onclick = uploadTorrent;
  $("access-apply").onclick = applyRules;
  $("client-apply").onclick = applyClients;
  $("user-add").onclick = addUser;
  $("signin").onclick = signIn;
  $("signout").onclick = signOut;
  loadSession();
  $("access-mode-save").onclick = async () => {
    if (await authorized("PUT", "/api/access/mode", JSON.stringify({ mode: $("access-mode").value }), $("access-result"))) loadAccess();
  };
  $("edit-save").onclick = () => authorized("PUT", "/api/config", JSON.stringify({ [$("edit-key").value]: $("edit-value").value }), $("edit-result"));
  $("detail-close").onclick = () => { state.detail = null; $("swarm-detail").hidden = true; };
  showTab(location.hash.slice(1) || "config");
  window.addEventListener("hashchange", () => showTab(location.hash.slice(1)));
  connect();
  // Tables that are not in the status stream follow it at the same pace.
  swarmTimer = setInterval(refreshTab, 1000);
});
