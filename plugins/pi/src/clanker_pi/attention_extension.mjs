// clanker attention for Pi: a launch-owned extension (`pi --extension <this file>`).
//
// It turns Pi's extension events into clanker's canonical lifecycle envelopes and
// delivers them to the clanker grid over its Unix socket (one JSON line per
// request), or, on an SSH host, as frames on its terminal (below). It never blocks Pi: deliveries are queued and never awaited by a
// handler, every error is swallowed, and without the launch's variables it does
// nothing at all. It never forwards prompts, titles, tool arguments or error text.
//
// Which events exist depends on Pi's version (docs/harnesses/pi.md, "Attention"):
//   agent_settled        0.80.4 and later (`aborted` since 1.1.0): the only settle there
//   ui_prompt_start/end  0.84.4 and later: foreground dialog waits
//   session_compact_failed 0.84.3 and later
// Before 0.80.4 (e.g. 0.73.1) there is no settled event, so `agent_end` settles.
//
// Plain JavaScript (ES module) so that both Pi's loader and a bare `node` run it.

import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import * as tty from "node:tty";
import { randomBytes } from "node:crypto";

const SHARED = Symbol.for("clanker.attention.pi");
const MAX_QUEUE = 256;
const MAX_BATCH = 16;
const TIMEOUT_MS = 1000;
const MAX_ID = 256;
const MAX_CWD_BYTES = 1024;
const SETTLED_SINCE = [0, 80, 4];
const PACKAGES = ["@mariozechner/pi-coding-agent", "@earendil-works/pi-coding-agent"];
const MAX_PACKAGE_BYTES = 65536;

// @clanker-attention-transport (clanker/attention/extension_transport.js)

/** Process-wide state: it survives Pi replacing the extension runtime (reload, /new, /resume). */
function shared() {
  const existing = globalThis[SHARED];
  if (existing) return existing;
  const config = route();
  if (config === null) return null;
  // The credential stays with this process: tools and sub-processes Pi starts never see it.
  for (const name of Object.keys(process.env)) {
    if (name.startsWith("CLANKER_ATTENTION_")) delete process.env[name];
  }
  const state = {
    ...config,
    prefix: `${process.pid}-${randomBytes(4).toString("hex")}`,
    counter: 0,
    queue: Promise.resolve(),
    queued: 0,
    stopped: false,
    settled: null, // true/false once the version or an agent_settled event says so
    turn: null, // { id, sessionId, outcome: "ok" | "failed" | "aborted" }
    prompt: null, // { inputId, turnId, depth }
  };
  globalThis[SHARED] = state;
  return state;
}

function printable(text) {
  for (const ch of text) {
    if (ch !== " " && /[\p{C}\p{Z}]/u.test(ch)) return false;
  }
  return true;
}

function validId(value) {
  return typeof value === "string" && value.length > 0 && value.length <= MAX_ID && printable(value);
}

function validCwd(value) {
  return (
    typeof value === "string" &&
    value.startsWith("/") &&
    Buffer.byteLength(value, "utf8") <= MAX_CWD_BYTES &&
    printable(value)
  );
}

function sessionIdOf(ctx) {
  try {
    const id = ctx?.sessionManager?.getSessionId?.();
    return validId(id) ? id : null;
  } catch {
    return null;
  }
}

function cwdOf(ctx) {
  try {
    return validCwd(ctx?.cwd) ? ctx.cwd : null;
  } catch {
    return null;
  }
}

function parseVersion(text) {
  const match = typeof text === "string" ? /^(\d+)\.(\d+)\.(\d+)/.exec(text) : null;
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : null;
}

/** The running Pi's version, from the package that holds its entry script, or null. */
function runningVersion() {
  try {
    let dir = path.dirname(fs.realpathSync(process.argv[1]));
    for (let depth = 0; depth < 4; depth++) {
      const file = path.join(dir, "package.json");
      if (fs.existsSync(file) && fs.statSync(file).size <= MAX_PACKAGE_BYTES) {
        const manifest = JSON.parse(fs.readFileSync(file, "utf8"));
        return PACKAGES.includes(manifest?.name) ? parseVersion(manifest.version) : null;
      }
      dir = path.dirname(dir);
    }
  } catch {
    // no readable manifest: the version stays unknown
  }
  return null;
}

function atLeast(version, floor) {
  for (let i = 0; i < 3; i++) {
    if (version[i] !== floor[i]) return version[i] > floor[i];
  }
  return true;
}

function send(state, envelopes) {
  return deliverRequest(state, envelopes).then((stop) => {
    if (stop) state.stopped = true; // a terminal that does not read, or a revoked credential
  });
}

/** Queue envelopes for delivery, in order; never awaited by Pi's handlers. */
function deliver(state, envelopes) {
  if (state.stopped || envelopes.length === 0) return;
  if (state.queued >= MAX_QUEUE) {
    state.stopped = true; // the grid is not keeping up: stop rather than grow
    return;
  }
  for (let i = 0; i < envelopes.length; i += MAX_BATCH) {
    const batch = envelopes.slice(i, i + MAX_BATCH);
    state.queued += 1;
    state.queue = state.queue
      .then(() => (state.stopped ? undefined : send(state, batch)))
      .catch(() => undefined)
      .then(() => {
        state.queued -= 1;
      });
  }
}

function envelope(event, sessionId, extra) {
  return { event, scope: "root", sessionId, ...extra };
}

function nextId(state) {
  state.counter += 1;
  return `${state.prefix}-${state.counter}`;
}

function outcomeOf(message) {
  if (!message || message.role !== "assistant") return null;
  if (message.stopReason === "aborted") return "aborted";
  if (message.stopReason === "error") return "failed";
  return "ok";
}

function settle(state, nativeEvent, aborted) {
  const turn = state.turn;
  if (!turn) return;
  state.turn = null;
  state.prompt = null;
  let event = "turn_completed";
  if (typeof aborted === "boolean") {
    // Pi 1.1.0 and later say whether the run was aborted: that takes precedence.
    if (aborted) event = "turn_interrupted";
    else if (turn.outcome === "failed") event = "turn_failed";
  } else if (turn.outcome === "aborted") event = "turn_interrupted";
  else if (turn.outcome === "failed") event = "turn_failed";
  deliver(state, [envelope(event, turn.sessionId, { turnId: turn.id, nativeEvent })]);
}

function guard(handler) {
  return (event, ctx) => {
    try {
      handler(event, ctx);
    } catch {
      // never let attention disturb Pi
    }
  };
}

export default function clankerAttention(pi) {
  const state = shared();
  if (!state || !pi || typeof pi.on !== "function") return;

  if (state.settled === null) {
    // Unknown version: agent_end settles until an agent_settled event is seen.
    const version = runningVersion();
    if (version) state.settled = atLeast(version, SETTLED_SINCE);
  }

  pi.on("session_start", guard((event, ctx) => {
    const sessionId = sessionIdOf(ctx);
    if (!sessionId) return;
    const out = [envelope("session_started", sessionId, { nativeEvent: "session_start" })];
    const cwd = cwdOf(ctx);
    if (cwd) out.push(envelope("location_changed", sessionId, { cwd, nativeEvent: "session_start" }));
    deliver(state, out);
  }));

  pi.on("agent_start", guard((event, ctx) => {
    const sessionId = sessionIdOf(ctx);
    if (!sessionId) return;
    if (state.turn && state.turn.sessionId === sessionId) return; // a retry or continuation
    state.turn = { id: nextId(state), sessionId, outcome: "ok" };
    state.prompt = null;
    const extra = { turnId: state.turn.id, nativeEvent: "agent_start" };
    const cwd = cwdOf(ctx);
    if (cwd) extra.cwd = cwd;
    deliver(state, [envelope("turn_started", sessionId, extra)]);
  }));

  pi.on("message_end", guard((event) => {
    const outcome = outcomeOf(event?.message);
    if (outcome && state.turn) state.turn.outcome = outcome; // a successful retry replaces an error
  }));

  pi.on("session_compact_failed", guard((event) => {
    if (state.turn) state.turn.outcome = event?.aborted === true ? "aborted" : "failed";
  }));

  pi.on("agent_settled", guard((event) => {
    state.settled = true;
    settle(state, "agent_settled", event?.aborted);
  }));

  pi.on("agent_end", guard((event) => {
    if (state.settled === true || !state.turn) return; // agent_end never settles where agent_settled exists
    const messages = Array.isArray(event?.messages) ? event.messages : [];
    for (let i = messages.length - 1; i >= 0; i--) {
      const outcome = outcomeOf(messages[i]);
      if (outcome) {
        state.turn.outcome = outcome;
        break;
      }
    }
    settle(state, "agent_end", undefined);
  }));

  pi.on("ui_prompt_start", guard(() => {
    const turn = state.turn;
    if (!turn) return; // an idle dialog never creates a turn
    if (state.prompt && state.prompt.turnId === turn.id) {
      state.prompt.depth += 1;
      return;
    }
    state.prompt = { inputId: nextId(state), turnId: turn.id, depth: 1 };
    deliver(state, [envelope("input_requested", turn.sessionId, {
      turnId: turn.id, inputId: state.prompt.inputId, nativeEvent: "ui_prompt_start",
    })]);
  }));

  pi.on("ui_prompt_end", guard(() => {
    const prompt = state.prompt;
    const turn = state.turn;
    if (!prompt || !turn || prompt.turnId !== turn.id) return;
    prompt.depth -= 1;
    if (prompt.depth > 0) return;
    state.prompt = null;
    deliver(state, [envelope("input_resolved", turn.sessionId, {
      turnId: turn.id, inputId: prompt.inputId, nativeEvent: "ui_prompt_end",
    })]);
  }));

  pi.on("session_shutdown", guard((event, ctx) => {
    const reason = event?.reason;
    state.prompt = null;
    if (reason === "reload") return; // the same session goes on in a new runtime
    state.turn = null;
    const sessionId = sessionIdOf(ctx);
    if (!sessionId) return;
    deliver(state, [envelope("session_ended", sessionId, { nativeEvent: "session_shutdown" })]);
  }));
}
