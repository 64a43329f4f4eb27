// clanker attention for OpenCode: a launch-owned server plugin.
//
// clanker writes this file, with its shared transport in place of the marker line below, into
// the launch's private directory and loads it
// through OPENCODE_CONFIG_CONTENT ({"plugin": ["file://<this file>"]}). It turns
// OpenCode's own bus events into clanker's lifecycle envelopes and delivers them
// to the grid socket named in its environment, or, on an SSH host, as frames on
// its terminal (below). Without the launch's CLANKER_ATTENTION_* variables it
// does nothing at all.
//
// Checked against opencode-ai 1.18.33 (docs/harnesses/opencode.md, "Attention"):
//   session.status {sessionID, status: {type: "busy" | "idle" | "retry"}}
//   permission.asked {id, sessionID, ...} / permission.replied {sessionID, requestID, reply}
//   question.asked {id, sessionID, ...} / question.replied, question.rejected {sessionID, requestID}
//   session.created / session.updated / session.deleted {sessionID, info: {id, parentID?, directory}}
//   session.error {sessionID?, error?: {name}}
//
// What leaves this file: event names, session ids, request ids, a per-turn
// epoch and the root session's directory. Never prompts, titles, tool
// arguments, answers or error text.

import fs from "node:fs";
import net from "node:net";
import tty from "node:tty";

const TIMEOUT_MS = 1000; // one deliver request: connect, write, read the reply (or write its frame)
const MAX_QUEUED = 256; // envelopes waiting for delivery; past it delivery stops
const MAX_BATCH = 16; // envelopes per deliver request (the grid's bound)
const MAX_PENDING_EVENTS = 256; // native events waiting for handling; past it handling stops
const MAX_KNOWN_SESSIONS = 256; // remembered session parentage
const LOOKUP_MS = 2000; // client.session.get, when an event did not say

// -- validation ------------------------------------------------------------------------------

function id(value) {
  // sessionId / inputId: 1-256 printable ASCII characters (OpenCode mints ASCII ids).
  return typeof value === "string" && /^[\x20-\x7e]{1,256}$/.test(value) ? value : null;
}

function directory(value) {
  // cwd: absolute, printable, at most 1024 UTF-8 bytes; anything else is left out.
  if (typeof value !== "string" || !value.startsWith("/")) return null;
  if (!/^(?:[^\p{C}\p{Z}]| )+$/u.test(value)) return null;
  return Buffer.byteLength(value, "utf8") <= 1024 ? value : null;
}

// @clanker-attention-transport (clanker/attention/extension_transport.js)

const ROUTE = route(); // null: not a clanker launch

// -- delivery --------------------------------------------------------------------------------

const outbox = [];
let sending = false;
let stopped = ROUTE === null; // a full queue or a refused credential stops delivery for good

function deliver(envelope) {
  if (stopped) return;
  if (outbox.length >= MAX_QUEUED) {
    outbox.length = 0;
    stopped = true;
    return;
  }
  outbox.push(envelope);
  if (!sending) pump();
}

function pump() {
  if (stopped || outbox.length === 0) {
    sending = false;
    return;
  }
  sending = true;
  const batch = outbox.splice(0, MAX_BATCH);
  deliverRequest(ROUTE, batch).then(
    (stop) => {
      if (stop) {
        // a refused credential, or a terminal that does not read: stop rather than wait
        outbox.length = 0;
        stopped = true;
      }
      pump();
    },
    () => pump(),
  );
}

// -- what is known about sessions --------------------------------------------------------------

const parentage = new Map(); // session id -> {root: boolean, directory: string | null}

function remember(sessionID, root, dir) {
  if (parentage.has(sessionID)) parentage.delete(sessionID);
  parentage.set(sessionID, { root, directory: dir });
  while (parentage.size > MAX_KNOWN_SESSIONS) parentage.delete(parentage.keys().next().value);
}

function learn(info) {
  // session.created / session.updated carry the session's own record.
  if (!info || typeof info !== "object") return;
  const sessionID = id(info.id);
  if (sessionID === null) return;
  const parent = info.parentID;
  if (parent === undefined || parent === null) remember(sessionID, true, directory(info.directory));
  else if (typeof parent === "string" && parent !== "") remember(sessionID, false, null);
}

async function lookup(client, sessionID) {
  // Parentage that no event has told yet: ask OpenCode itself. Anything but a
  // record with this id leaves it unknown, and an unknown session is ignored.
  const known = parentage.get(sessionID);
  if (known) return known;
  try {
    const result = await Promise.race([
      client.session.get({ path: { id: sessionID } }),
      new Promise((resolve) => setTimeout(() => resolve(null), LOOKUP_MS).unref?.()),
    ]);
    const info = result && result.data;
    if (info && info.id === sessionID) learn(info);
  } catch {}
  return parentage.get(sessionID) ?? null;
}

// -- turns -----------------------------------------------------------------------------------

const turns = new Map(); // root session id -> {turn, inputs: Set, outcome}
let epoch = 0;

function envelope(event, sessionID, fields, nativeEvent) {
  const out = { event, scope: "root", sessionId: sessionID, nativeEvent };
  for (const [key, value] of Object.entries(fields)) if (value !== null && value !== undefined) out[key] = value;
  return out;
}

function where(known, fallback) {
  return known.directory ?? fallback;
}

async function handle(event, client, fallbackDirectory) {
  if (!event || typeof event !== "object") return;
  const type = event.type;
  const props = event.properties;
  if (typeof type !== "string" || !props || typeof props !== "object") return;

  if (type === "session.created" || type === "session.updated") {
    learn(props.info);
    return;
  }

  if (type === "session.deleted") {
    const info = props.info;
    const sessionID = id(info && info.id);
    if (sessionID === null) return;
    learn(info);
    const known = parentage.get(sessionID);
    parentage.delete(sessionID);
    turns.delete(sessionID);
    if (known && known.root) {
      deliver(envelope("session_ended", sessionID, { cwd: where(known, fallbackDirectory) }, type));
    }
    return;
  }

  const sessionID = id(props.sessionID);
  if (sessionID === null) return;

  if (type === "session.status") {
    const status = props.status && props.status.type;
    if (status !== "busy" && status !== "idle") return; // "retry" is still the same turn
    const open = turns.get(sessionID);
    if (status === "busy" && open) return; // OpenCode repeats busy within one turn
    if (status === "idle" && !open) return; // nothing of ours to settle
    const known = await lookup(client, sessionID);
    if (!known || !known.root) return; // a child, or parentage unknown: never the pane
    const cwd = where(known, fallbackDirectory);
    if (status === "busy") {
      if (turns.has(sessionID)) return;
      epoch += 1;
      const turn = `${process.pid}-${epoch}`;
      turns.set(sessionID, { turn, inputs: new Set(), outcome: "turn_completed" });
      deliver(envelope("turn_started", sessionID, { turnId: turn, cwd }, type));
    } else {
      const current = turns.get(sessionID);
      if (!current) return;
      turns.delete(sessionID);
      deliver(envelope(current.outcome, sessionID, { turnId: current.turn, cwd }, type));
    }
    return;
  }

  if (type === "session.error") {
    // The turn's outcome; the idle that follows settles it.
    const current = turns.get(sessionID);
    if (!current) return;
    const name = props.error && props.error.name;
    current.outcome = name === "MessageAbortedError" ? "turn_interrupted" : "turn_failed";
    return;
  }

  if (type === "permission.asked" || type === "question.asked") {
    const request = id(props.id);
    const current = turns.get(sessionID);
    if (request === null || !current || current.inputs.has(request)) return;
    current.inputs.add(request);
    deliver(envelope("input_requested", sessionID, { turnId: current.turn, inputId: request }, type));
    return;
  }

  if (type === "permission.replied" || type === "question.replied" || type === "question.rejected") {
    const request = id(props.requestID);
    const current = turns.get(sessionID);
    if (request === null || !current || !current.inputs.has(request)) return;
    current.inputs.delete(request);
    deliver(envelope("input_resolved", sessionID, { turnId: current.turn, inputId: request }, type));
  }
}

// -- the plugin ------------------------------------------------------------------------------

let chain = Promise.resolve();
let waiting = 0;
let overflowed = false;

export const ClankerAttention = async (input) => {
  if (ROUTE === null) return {};
  const client = input && input.client;
  const fallbackDirectory = directory(input && input.directory);
  return {
    event: async ({ event } = {}) => {
      // Never awaited work: events are handled in order on a private chain.
      if (overflowed) return;
      if (waiting >= MAX_PENDING_EVENTS) {
        overflowed = true;
        return;
      }
      waiting += 1;
      chain = chain
        .then(() => handle(event, client, fallbackDirectory))
        .catch(() => {})
        .then(() => {
          waiting -= 1;
        });
    },
  };
};
