// The opencode-memoryd page: plain DOM over the REST API (/api/openapi.json describes it).
"use strict";

// The token lives in this tab (sessionStorage is per origin, port included), never in a
// cookie: a browser sends a host's cookies to every port of it.
const state = { csrf: null, token: null, scope: { kind: "all", id: null, label: "" }, offset: 0,
  limit: 50, total: 0, selected: null, view: "memories" };
const $ = (id) => document.getElementById(id);
/** "1 project", "2 projects": `n` and the noun in its number. */
const plural = (n, one, many = one + "s") => `${n} ${n === 1 ? one : many}`;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

// Dates in the browser's locale.
function when(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

function toast(message, isError) {
  const t = $("toast");
  t.textContent = message;
  t.className = "toast show" + (isError ? " error" : "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = "toast"; }, 4000);
}

async function api(method, path, body, bearer, code) {
  const headers = { "Accept": "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.csrf) headers["X-CSRF-Token"] = state.csrf;
  if (bearer || state.token) headers["Authorization"] = "Bearer " + (bearer || state.token);
  if (code) headers["X-Login-Code"] = code;
  const res = await fetch(path, { method, headers, credentials: "omit",
    body: body === undefined ? undefined : JSON.stringify(body) });
  // the session's token is replaced now and then: the answer carries the new one
  const rotated = res.headers.get("X-Session-Token");
  if (rotated && state.token) {
    state.token = rotated;
    sessionStorage.setItem("memoryd-token", rotated);
  }
  let payload = null;
  try { payload = await res.json(); } catch (e) { payload = null; }
  // one envelope, the control socket's: {"result": ...} or {"error": {"type", "message", "kind"}}
  if (!res.ok || !payload || !("result" in payload)) {
    const err = new Error((payload && payload.error && payload.error.message) || res.statusText);
    err.status = res.status;
    throw err;
  }
  return payload.result;
}

async function login() {
  // `opencode-memoryd web` opens #code=… (a one-time code); #token=… is the web-token
  // file's access token. Either gives this tab a session token of its own.
  const m = location.hash.match(/(token|code)=([^&]+)/);
  if (m) {
    history.replaceState(null, "", location.pathname);  // it leaves the address bar
    const secret = decodeURIComponent(m[2]);
    const s = m[1] === "token" ? await api("POST", "/api/session", undefined, secret)
      : await api("POST", "/api/session", undefined, undefined, secret);
    state.token = s.token;
    sessionStorage.setItem("memoryd-token", state.token);
    state.csrf = s.csrf_token;
    return;
  }
  state.token = sessionStorage.getItem("memoryd-token");
  if (!state.token) throw new Error("no token");
  const s = await api("GET", "/api/session");
  state.csrf = s.csrf_token;
}

// -- sidebar and stats -------------------------------------------------------------------

async function loadScopes() {
  const [p, stats] = await Promise.all([api("GET", "/api/projects"), api("GET", "/api/stats")]);
  const list = $("scopes");
  list.replaceChildren();
  const all = p.projects.reduce((n, x) => n + x.counts.active, p.user.counts.active);
  const item = (kind, id, label, count, root) => {
    const current = state.scope.kind === kind && state.scope.id === id;
    return el("li", {}, el("button", { type: "button", "aria-current": current ? "true" : "false",
      "data-scope": kind, "data-id": id || "", title: root || label,
      onclick: () => selectScope(kind, id, label) },
      el("span", {}, label, root ? el("span", { class: "root", text: root }) : null),
      el("span", { class: "count", "aria-label": plural(count, "memory", "memories"), text: String(count) })));
  };
  list.append(item("all", null, "All memories", all));
  list.append(item("user", null, "User scope", p.user.counts.active));
  for (const x of p.projects) list.append(item("project", x.id, x.name, x.counts.active, x.root));
  const m = stats.memories;
  $("stats").textContent = `${m.active} active · ${m.retired} retired · ` +
    (m.pending ? `${m.pending} pending your confirmation · ` : "") +
    `${plural(stats.projects, "project")} · ${plural(stats.journal.entries, "journal entry", "journal entries")}`;
}

function selectScope(kind, id, label) {
  state.scope = { kind, id, label: kind === "all" ? "" : label };
  state.offset = 0;
  state.selected = null;
  $("detail").hidden = true;
  loadScopes().catch(showError);
  if (state.view === "journal") loadJournal().catch(showError); else loadMemories().catch(showError);
}

// -- memories ------------------------------------------------------------------------------

function scopeParams(params) {
  if (state.scope.kind === "project") params.set("project", state.scope.id);
  if (state.scope.kind === "user") params.set("scope", "user");
}

async function loadMemories() {
  const q = $("q").value.trim();
  const type = $("f-type").value;
  const status = $("f-status").value;
  $("scope-name").textContent = state.scope.label ? "· " + state.scope.label : "";
  let rows, total;
  if (q) {
    const params = new URLSearchParams({ q, limit: "100" });
    if (state.scope.kind === "project") params.set("project", state.scope.id);
    if (status !== "active") params.set("include_retired", "true");
    rows = (await api("GET", "/api/search?" + params)).filter((m) =>
      (!type || m.type === type) && (status !== "retired" || m.status === "retired") &&
      (state.scope.kind !== "user" || m.scope === "user"));
    total = rows.length;
    state.offset = 0;
  } else {
    const params = new URLSearchParams({ status, offset: String(state.offset), limit: String(state.limit) });
    if (type) params.set("type", type);
    scopeParams(params);
    const page = await api("GET", "/api/memories?" + params);
    rows = page.memories;
    total = page.total;
  }
  state.total = total;
  renderRows(rows, Boolean(q));
  const first = total ? state.offset + 1 : 0;
  const last = Math.min(state.offset + rows.length, total);
  $("page-info").textContent = q ? `${total} result${total === 1 ? "" : "s"} for “${q}”` : `${first}–${last} of ${total}`;
  $("result-count").textContent = $("page-info").textContent;
  $("prev").disabled = Boolean(q) || state.offset === 0;
  $("next").disabled = Boolean(q) || state.offset + state.limit >= total;
}

function scopeLabel(m) {
  if (m.scope === "user") return "user";
  const root = m.project_root || m.project_id || "";
  return root.split("/").filter(Boolean).pop() || root;
}

function renderRows(rows, scored) {
  const body = $("memory-rows");
  body.replaceChildren();
  if (!rows.length) {
    body.append(el("tr", {}, el("td", { colspan: "5", class: "hint", text: "No memories here." })));
    return;
  }
  for (const m of rows) {
    const open = () => showDetail(m.id).catch(showError);
    body.append(el("tr", { tabindex: "0", "data-id": m.id,
      "aria-selected": state.selected === m.id ? "true" : "false",
      onclick: open, onkeydown: (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); open(); } } },
      el("td", { class: "content" }, m.content,
        staleNote(m) ? el("span", { class: "stale", text: ` (${staleNote(m)})` }) : null,
        scored && m.score !== undefined ? el("span", { class: "score", text: ` (score ${m.score.toFixed(3)})` }) : null),
      el("td", {}, el("span", { class: "badge", text: m.type })),
      el("td", { title: m.project_root || "", text: scopeLabel(m) }),
      el("td", {}, el("time", { datetime: saidAt(m), text: when(saidAt(m)) })),
      el("td", {}, el("span", { class: "badge " + m.status, text: m.status }),
        m.pending ? el("span", { class: "badge pending", text: "pending" }) : null)));
  }
}

// When the user said it (the message's time); older memories have only created_at.
function saidAt(m) { return m.said_at || m.created_at; }

// What a dream found the project no longer has (opencode_memoryd.staleness.stale_note).
const CHANGES = { path: () => "no longer in the worktree", dependency: (w) => `no longer in ${w}`,
  script: (w) => `no longer a script of ${w}` };
function staleNote(m) {
  if (!m.stale || !m.stale.length) return "";
  return "may be out of date: " + m.stale.map((x) =>
    `${x.what} changed on ${x.since} (${(CHANGES[x.kind] || (() => "changed"))(x.where || "?")})`).join("; ");
}

function list(items, render) {
  if (!items || !items.length) return el("span", { class: "hint", text: "none" });
  return el("ul", {}, items.map((x) => el("li", {}, render(x))));
}

async function showDetail(id) {
  const shown = await api("GET", "/api/memories/" + encodeURIComponent(id));
  state.selected = id;
  for (const tr of $("memory-rows").querySelectorAll("tr")) {
    tr.setAttribute("aria-selected", tr.dataset.id === id ? "true" : "false");
  }
  renderDetail(shown);
}

function renderDetail(shown) {
  state.shown = shown;
  const m = shown.memory, lin = shown.lineage;
  const d = $("detail");
  const retired = m.status === "retired";
  const textBlock = el("p", { class: "text", id: "detail-text", text: m.content });
  const pending = m.pending && !retired;
  const actions = el("div", { class: "actions" },
    pending ? el("button", { type: "button", id: "confirm", class: "primary", onclick: () => answer(m.id, "confirm") }, "Confirm") : null,
    pending ? el("button", { type: "button", id: "reject", class: "danger", onclick: () => answer(m.id, "reject") }, "Reject") : null,
    retired ? null : el("button", { type: "button", id: "edit", onclick: () => startEdit(m, textBlock, actions) }, "Edit"),
    retired ? null : el("button", { type: "button", id: "forget", class: "danger", onclick: () => forget(m.id) }, "Forget"),
    retired && m.retired_reason === "forgotten"
      ? el("button", { type: "button", id: "restore", class: "primary", onclick: () => restore(m.id) }, "Restore") : null,
    el("button", { type: "button", id: "close-detail", onclick: closeDetail }, "Close"));
  const dreams = (lin.dreams || []).map((e) => `${e.action || "dream"} ${e.run_id} · ${e.status} · ${when(e.started_at)}`);
  d.replaceChildren(
    el("h3", { id: "detail-title" }, "Memory ", el("code", { text: m.id })),
    textBlock, actions,
    el("dl", {},
      el("dt", { text: "Type" }), el("dd", { id: "detail-type", text: m.type }),
      el("dt", { text: "Status" }), el("dd", { id: "detail-status" }, m.status + (m.retired_reason ? ` (${m.retired_reason})` : "")),
      el("dt", { text: "Scope" }), el("dd", { text: m.scope === "user" ? "user" : `project ${m.project_root || m.project_id}` }),
      el("dt", { text: "Source" }), el("dd", { text: m.source + (m.section ? ` · section ${m.section}` : "") }),
      el("dt", { text: "Asserted by" }), el("dd", { id: "detail-provenance", text: (m.provenance || "-") + (pending ? " · pending your confirmation: in no context block until you confirm it" : "") }),
      el("dt", { text: "Said" }), el("dd", { id: "detail-said" }, el("time", { datetime: saidAt(m), text: when(saidAt(m)) })),
      el("dt", { text: "Freshness" }), el("dd", { id: "detail-stale", class: staleNote(m) ? "stale" : "", text: staleNote(m) || "nothing it names is known to be gone" }),
      el("dt", { text: "Created" }), el("dd", {}, el("time", { datetime: m.created_at, text: when(m.created_at) })),
      el("dt", { text: "Updated" }), el("dd", {}, el("time", { datetime: m.updated_at, text: when(m.updated_at) })),
      el("dt", { text: "Sessions" }), el("dd", {}, list(lin.sessions, (s) => el("code", { text: s }))),
      el("dt", { text: "Messages" }), el("dd", {}, list(lin.message_ids, (s) => el("code", { text: s }))),
      el("dt", { text: "Merged from" }), el("dd", { class: "lineage" }, list(lin.merged_from, (x) => `${x.content} (${x.id})`)),
      el("dt", { text: "Superseded by" }), el("dd", { text: lin.superseded_by || "-" }),
      el("dt", { text: "Dreams and edits" }), el("dd", { class: "lineage" }, list(dreams, (x) => x)),
      el("dt", { text: "History" }), el("dd", { class: "history" }, list(m.history, (h) =>
        el("span", {}, `“${h.content}” (${h.type}), replaced ${when(h.edited_at)}`)))));
  d.hidden = false;
  d.focus();
}

function closeDetail() {
  $("detail").hidden = true;
  const row = state.selected && $("memory-rows").querySelector(`tr[data-id="${state.selected}"]`);
  state.selected = null;
  if (row) row.focus();
}

function startEdit(m, textBlock, actions) {
  const area = el("textarea", { id: "edit-content", "aria-label": "Memory text" });
  area.value = m.content;
  const types = ["user", "feedback", "project", "reference"];
  const type = el("select", { id: "edit-type", "aria-label": "Type" },
    (types.includes(m.type) ? types : [m.type]).map((t) => el("option", { value: t, selected: t === m.type }, t)));
  const cancel = () => renderDetail(state.shown);
  const save = async () => {
    try {
      const body = { content: area.value };
      if (type.value !== m.type) body.type = type.value;
      const r = await api("PATCH", "/api/memories/" + encodeURIComponent(m.id), body);
      toast(r.status === "edited" ? "Saved." : "Nothing changed.");
      await Promise.all([showDetail(m.id), loadMemories(), loadScopes()]);
    } catch (e) { showError(e); }
  };
  const form = el("div", { class: "edit", onkeydown: (e) => {
    if (e.key === "Escape") { e.preventDefault(); cancel(); }
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); save(); } } },
    area, el("div", { class: "actions" }, type,
      el("button", { type: "button", id: "save", class: "primary", onclick: save }, "Save"),
      el("button", { type: "button", id: "cancel", onclick: cancel }, "Cancel")));
  textBlock.replaceWith(form);
  actions.hidden = true;
  area.focus();
}

async function forget(id) {
  try {
    await api("DELETE", "/api/memories/" + encodeURIComponent(id));
    toast("Forgotten. It can be restored from the retired memories.");
    await Promise.all([showDetail(id), loadMemories(), loadScopes()]);
  } catch (e) { showError(e); }
}

// The agent's user-scope note waits for the user: confirm it (it reaches every project's
// block) or reject it (forgotten).
async function answer(id, verb) {
  try {
    await api("POST", "/api/memories/" + encodeURIComponent(id) + "/" + verb, {});
    toast(verb === "confirm" ? "Confirmed: it is yours now." : "Rejected and forgotten.");
    await Promise.all([showDetail(id), loadMemories(), loadScopes()]);
  } catch (e) { showError(e); }
}

async function restore(id) {
  try {
    await api("POST", "/api/memories/" + encodeURIComponent(id) + "/restore", {});
    toast("Restored.");
    await Promise.all([showDetail(id), loadMemories(), loadScopes()]);
  } catch (e) { showError(e); }
}

// -- the journal ---------------------------------------------------------------------------

async function loadJournal() {
  const params = new URLSearchParams({ limit: "100" });
  if (state.scope.kind === "project") params.set("project", state.scope.id);
  if (state.scope.kind === "user") params.set("user", "true");
  const page = await api("GET", "/api/journal?" + params);
  const box = $("journal");
  box.replaceChildren();
  if (!page.entries.length) box.append(el("p", { class: "hint", text: "No dreams yet." }));
  for (const e of page.entries) box.append(renderEntry(e));
}

function renderEntry(e) {
  const action = e.action || "dream";
  const where = e.scope === "user" ? "user scope" : (e.project_root || e.project_key || "");
  const counts = Object.entries(e.counts || {}).filter(([, n]) => n).map(([k, n]) => `${k} ${n}`).join(" · ");
  const canUndo = action === "dream" && e.status === "ok" && !e.dry_run && !e.undone;
  const ops = e.operations || [];
  return el("article", { class: "entry", "data-run": e.run_id, "data-action": action },
    el("header", {},
      el("h3", {}, `${action} · ${e.status}`, e.dry_run ? " (dry run)" : "", e.undone ? " (undone)" : ""),
      el("time", { class: "meta", datetime: e.started_at, text: when(e.started_at) }),
      el("span", { class: "meta", text: where }),
      el("span", { class: "meta", text: `${e.trigger || ""} · ${e.mode || ""}${e.model ? " · " + e.model : ""}` }),
      el("span", { class: "meta", text: `tokens ${e.tokens_in || 0} in / ${e.tokens_out || 0} out` }),
      canUndo ? el("button", { type: "button", class: "danger undo", onclick: () => undo(e) }, "Undo") : null),
    el("p", { class: "meta" }, el("code", { text: e.run_id }), counts ? " · " + counts : "", e.reason ? " · " + e.reason : ""),
    ops.length ? el("table", {},
      el("thead", {}, el("tr", {}, el("th", { text: "Operation" }), el("th", { text: "Memories" }),
        el("th", { text: "Result" }), el("th", { text: "Reason" }))),
      el("tbody", {}, ops.map((op) => el("tr", {},
        el("td", { class: "op-" + op.op, text: op.op }),
        el("td", {}, list(op.texts, (t) => t)),
        el("td", { text: op.new_text || (op.new_id ? "kept as " + op.new_id.slice(0, 8) : "") }),
        el("td", { text: op.reason || "" }))))) : null,
    (e.rejected || []).length ? el("div", { class: "rejected" }, "Rejected:",
      list(e.rejected, (r) => `${(r.group || []).length} memories: ${r.reason}`)) : null);
}

async function undo(e) {
  const where = e.scope === "user" ? "the user scope" : (e.project_root || e.project_key);
  if (!window.confirm(`Undo dream ${e.run_id} of ${where}? Its memories go back to what they were before it.`)) return;
  try {
    await api("POST", "/api/journal/" + encodeURIComponent(e.run_id) + "/undo", {});
    toast("Dream undone.");
    await Promise.all([loadJournal(), loadScopes()]);
  } catch (err) { showError(err); }
}

// -- wiring --------------------------------------------------------------------------------

function showView(view) {
  state.view = view;
  $("memories-view").hidden = view !== "memories";
  $("journal-view").hidden = view !== "journal";
  $("tab-memories").setAttribute("aria-pressed", String(view === "memories"));
  $("tab-journal").setAttribute("aria-pressed", String(view === "journal"));
  (view === "journal" ? loadJournal() : loadMemories()).catch(showError);
}

function showError(e) {
  if (e && e.status === 401) {
    sessionStorage.removeItem("memoryd-token");
    $("login-reason").textContent = e.message;
    $("app").hidden = true; $("login").hidden = false; return;
  }
  toast(e && e.message ? e.message : String(e), true);
}

async function main() {
  try {
    await login();
  } catch (e) {
    $("login").hidden = false;
    return;
  }
  $("app").hidden = false;
  $("filters").addEventListener("submit", (ev) => { ev.preventDefault(); state.offset = 0; loadMemories().catch(showError); });
  $("f-type").addEventListener("change", () => { state.offset = 0; loadMemories().catch(showError); });
  $("f-status").addEventListener("change", () => { state.offset = 0; loadMemories().catch(showError); });
  $("clear").addEventListener("click", () => { $("q").value = ""; state.offset = 0; loadMemories().catch(showError); });
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); loadMemories().catch(showError); });
  $("next").addEventListener("click", () => { state.offset += state.limit; loadMemories().catch(showError); });
  $("tab-memories").addEventListener("click", () => showView("memories"));
  $("tab-journal").addEventListener("click", () => showView("journal"));
  document.addEventListener("keydown", (ev) => {
    const typing = ["INPUT", "TEXTAREA", "SELECT"].includes(document.activeElement.tagName);
    if (ev.key === "/" && !typing) { ev.preventDefault(); showView("memories"); $("q").focus(); }
    if (ev.key === "Escape" && !typing && !$("detail").hidden) closeDetail();
  });
  await Promise.all([loadScopes(), loadMemories()]).catch(showError);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", main);
// an address with a new token pasted into this tab: start again with it
window.addEventListener("hashchange", () => { if (/(token|code)=/.test(location.hash)) location.reload(); });
