// clanker attention for Oh My Pi: a launch-owned extension (`omp launch --extension <this file>`).
//
// It reports the main agent's lifecycle to clanker's grid, from inside omp's own process:
//   main agent_start        -> turn_started   (a turn epoch this extension keeps in memory)
//   main session_stop       -> turn_completed (turn_failed when the last assistant message
//                              stopped on an error; turn_interrupted when it was aborted)
//   main session_shutdown   -> session_ended
//   main session_start      -> location_changed (the session's directory)
//   main session_switch / session_branch -> session_ended for the previous session, then
//                              location_changed for the new one
// agent_end never settles a turn, and sub-agents or agents of unknown kind never report at all.
// OMP has no input-wait event: none is reported.
//
// Checked against omp 18.2.3 (docs/harnesses/omp.md, "Attention"). It needs the launch's
// CLANKER_ATTENTION_SOCKET, CLANKER_ATTENTION_TERMINAL and CLANKER_ATTENTION_TOKEN (on an SSH
// host: CLANKER_ATTENTION_TRANSPORT=tty and its credential file, below); without them it
// registers nothing. It never forwards prompts, titles, tool arguments or
// error text, never blocks omp's event handling, and swallows every error of its own.

import * as fs from "node:fs";
import * as net from "node:net";
import * as tty from "node:tty";

const TIMEOUT_MS = 1000; // one request: connect, write, read the reply (or write its frame)
const MAX_QUEUED = 256; // past this, deliveries stop for good
const MAX_BATCH = 16; // envelopes per request (the grid's limit)
const MAX_ID_CHARS = 256;
const MAX_CWD_BYTES = 1024;

// @clanker-attention-transport (clanker/attention/extension_transport.js)

const ROUTE = route(); // null: not a clanker launch

// ---- delivery: one queue per process, serialized, never awaited by a handler ----------------

const queue = [];
let sending = false;
let stopped = false;

function deliver(envelopes) {
  if (stopped || envelopes.length === 0) return;
  if (queue.length + envelopes.length > MAX_QUEUED) {
    stopped = true; // the grid is not keeping up: stop rather than grow
    queue.length = 0;
    return;
  }
  queue.push(...envelopes);
  if (!sending) {
    sending = true;
    void pump();
  }
}

async function pump() {
  try {
    while (queue.length > 0 && !stopped) {
      const batch = queue.splice(0, MAX_BATCH);
      // A terminal that does not read, or a refused credential, stops delivery for good.
      if (await deliverRequest(ROUTE, batch)) stopped = true;
    }
  } catch {
    // swallowed: attention is best effort, omp keeps working
  } finally {
    sending = false;
  }
}

// ---- validation (the grid refuses a batch with one malformed envelope) -----------------------

const NOT_PRINTABLE = /[\p{C}\p{Z}]/u;

function printable(text) {
  return !NOT_PRINTABLE.test(text.replaceAll(" ", ""));
}

function validId(value) {
  if (typeof value !== "string" || value.length === 0) return false;
  return [...value].length <= MAX_ID_CHARS && printable(value);
}

function validCwd(value) {
  return (
    typeof value === "string" &&
    value.startsWith("/") &&
    Buffer.byteLength(value, "utf8") <= MAX_CWD_BYTES &&
    printable(value)
  );
}

// ---- what omp's context proves -------------------------------------------------------------

// The main agent. Where omp names the agent's kind (ctx.agent.kind) only "main" is main.
// omp 18.2.3 has no ctx.agent: there a sub-agent's session runs without UI (hasUI false,
// mode "print"), so only the interactive TUI's own session (mode "tui" with UI) is main.
// Anything else is of unknown kind and never reports.
function isMain(ctx) {
  try {
    if (ctx === null || typeof ctx !== "object") return false;
    const agent = ctx.agent;
    if (agent !== undefined) {
      return agent !== null && typeof agent === "object" && agent.kind === "main";
    }
    return ctx.mode === "tui" && ctx.hasUI === true;
  } catch {
    return false;
  }
}

function sessionOf(ctx) {
  try {
    const id = ctx.sessionManager.getSessionId();
    return validId(id) ? id : null;
  } catch {
    return null;
  }
}

function cwdOf(ctx) {
  try {
    const cwd = ctx.cwd;
    return validCwd(cwd) ? cwd : null;
  } catch {
    return null;
  }
}

function envelope(event, sessionId, native, fields = {}) {
  const out = { event, scope: "root", sessionId, ...fields, nativeEvent: native };
  for (const key of Object.keys(out)) if (out[key] === null || out[key] === undefined) delete out[key];
  return out;
}

// ---- the main agent's lifecycle ------------------------------------------------------------

const EPOCH_PREFIX = `${process.pid}-${Date.now().toString(36)}`;
let epochs = 0;
let mainSession = null; // the main session this extension last reported
let turn = null; // the open turn's epoch id

function ended(native) {
  const out = [];
  if (mainSession !== null) out.push(envelope("session_ended", mainSession, native));
  mainSession = null;
  turn = null;
  return out;
}

// The main session as omp has it now; a different one than last reported ends that one first.
function current(ctx, native) {
  const session = sessionOf(ctx);
  if (session === null) return { session, out: [] };
  const out = mainSession !== null && mainSession !== session ? ended(native) : [];
  mainSession = session;
  return { session, out };
}

function located(ctx, native) {
  const { session, out } = current(ctx, native);
  const cwd = cwdOf(ctx);
  if (session !== null && cwd !== null) out.push(envelope("location_changed", session, native, { cwd }));
  return out;
}

function agentStart(ctx) {
  const { session, out } = current(ctx, "agent_start");
  if (session === null) return out;
  epochs += 1;
  turn = `${EPOCH_PREFIX}-${epochs}`;
  out.push(envelope("turn_started", session, "agent_start", { turnId: turn, cwd: cwdOf(ctx) }));
  return out;
}

function settled(event) {
  try {
    const reason = event?.last_assistant_message?.stopReason;
    if (reason === "error") return "turn_failed";
    if (reason === "aborted") return "turn_interrupted";
  } catch {}
  return "turn_completed";
}

function sessionStop(event, ctx) {
  const session = sessionOf(ctx);
  if (session === null || turn === null || session !== mainSession) return [];
  const out = [envelope(settled(event), session, "session_stop", { turnId: turn, cwd: cwdOf(ctx) })];
  turn = null;
  return out;
}

function sessionShutdown(ctx) {
  const session = sessionOf(ctx);
  if (session !== null && mainSession === null) mainSession = session;
  const out = ended("session_shutdown");
  if (out.length === 1) {
    const cwd = cwdOf(ctx);
    if (cwd !== null && out[0].sessionId === session) out[0].cwd = cwd;
  }
  return out;
}

// Each handler returns at once (undefined: session_stop never asks for a continuation).
function on(pi, name, map) {
  pi.on(name, (event, ctx) => {
    try {
      if (isMain(ctx)) deliver(map(event, ctx));
    } catch {
      // swallowed
    }
    return undefined;
  });
}

export default function clankerAttention(pi) {
  if (ROUTE === null) return; // not a clanker launch: inert
  try {
    on(pi, "session_start", (_, ctx) => located(ctx, "session_start"));
    on(pi, "session_switch", (_, ctx) => located(ctx, "session_switch"));
    on(pi, "session_branch", (_, ctx) => located(ctx, "session_branch"));
    on(pi, "agent_start", (_, ctx) => agentStart(ctx));
    on(pi, "session_stop", (event, ctx) => sessionStop(event, ctx));
    on(pi, "session_shutdown", (_, ctx) => sessionShutdown(ctx));
  } catch {
    // an omp without these events: stay silent
  }
}
