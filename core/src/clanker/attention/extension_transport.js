// clanker attention: the terminal transport every in-process JavaScript extension shares.
//
// One source for all of them: clanker.attention.extension_source puts this text, once, where
// a harness's extension has its marker line, when the provider writes the extension into the
// launch's private directory. The harness loads that one combined file.
//
// It is a fragment of an ES module, not a module: no import or export of its own, so it reads
// the same in an extension's `.js` and `.mjs`. The extension around it provides `fs`
// (node:fs), `net` (node:net), `tty` (node:tty) and `TIMEOUT_MS`, and calls `route()` (where
// its deliveries go) and `deliverRequest()` (one batch of envelopes along it: to the grid's
// socket, or as a frame on the terminal).

// -- on an SSH host: frames on the terminal --------------------------------------------------
//
// There the launch says CLANKER_ATTENTION_TRANSPORT=tty and CLANKER_ATTENTION_CREDENTIAL names
// its credential file ({"v": 1, "terminal", "token"}: a regular file of this user, mode 0600, in
// clanker's launch directory on the host; the token is never in a command line). Each deliver
// request is written to this process's own terminal as one OSC frame, the frame clanker's hook
// bridge writes (ESC ] 7717 ; clanker-attention ; <base64 of the JSON request> BEL, at most
// 32 KiB); the launcher on the person's machine takes it out of the terminal stream before
// anything is shown and hands it to the grid. Nothing comes back: a frame written whole counts
// as delivered. A terminal that cannot be found, or that takes longer than TIMEOUT_MS to accept
// a frame, stops delivery for good (at most one write is ever outstanding).

const FRAME_START = "\x1b]7717;clanker-attention;";
const FRAME_END = "\x07";
const MAX_FRAME_BYTES = 32768;
const MAX_CREDENTIAL_BYTES = 4096;

/** The launch's terminal and token from its credential file, or null. */
function hostCredential(file) {
  if (typeof file !== "string" || !file.startsWith("/")) return null;
  let fd = null;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    const info = fs.fstatSync(fd);
    if (!info.isFile() || info.uid !== process.getuid() || (info.mode & 0o077) !== 0) return null;
    if (info.size > MAX_CREDENTIAL_BYTES) return null;
    const value = JSON.parse(fs.readFileSync(fd, "utf8"));
    const valid = (text) => typeof text === "string" && /^[\x21-\x7e]{1,256}$/.test(text);
    if (value && value.v === 1 && valid(value.terminal) && valid(value.token)) {
      return { terminal: value.terminal, token: value.token };
    }
  } catch {
    // unreadable or malformed: no delivery at all
  } finally {
    if (fd !== null) {
      try {
        fs.closeSync(fd);
      } catch {}
    }
  }
  return null;
}

/** This process's terminal, open for writing: its controlling terminal, else the first of its
 * standard descriptors that is a pseudo-terminal of this user; null when there is none. */
function openTerminal() {
  const flags = fs.constants.O_WRONLY | fs.constants.O_NOCTTY;
  try {
    return fs.openSync("/dev/tty", flags);
  } catch {}
  for (const number of [1, 2, 0]) {
    let fd = null;
    try {
      const target = fs.readlinkSync(`/proc/self/fd/${number}`);
      if (!target.startsWith("/dev/pts/")) continue;
      fd = fs.openSync(target, flags | fs.constants.O_NOFOLLOW);
      if (tty.isatty(fd) && fs.fstatSync(fd).uid === process.getuid()) return fd;
    } catch {}
    if (fd !== null) {
      try {
        fs.closeSync(fd);
      } catch {}
    }
  }
  return null;
}

let terminalFd; // undefined until the first frame; null: there is no terminal

/** Write one request as a frame; resolves true when all of it was written in time. */
function writeFrame(request) {
  const data = Buffer.from(
    FRAME_START + Buffer.from(JSON.stringify(request), "utf8").toString("base64") + FRAME_END,
    "ascii",
  );
  if (data.length > MAX_FRAME_BYTES) return Promise.resolve(false);
  if (terminalFd === undefined) terminalFd = openTerminal();
  if (terminalFd === null) return Promise.resolve(false);
  const fd = terminalFd;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (ok) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), TIMEOUT_MS);
    const rest = (offset) => {
      fs.write(fd, data, offset, data.length - offset, null, (error, written) => {
        if (error || settled) return finish(false);
        if (offset + written < data.length) rest(offset + written);
        else finish(true);
      });
    };
    rest(0);
  });
}

// -- the route, and one deliver request along it ---------------------------------------------

const MAX_REPLY_BYTES = 65536;

/** Where deliveries go, from the launch's environment: `{socket, terminal, token}`, with
 * `socket` null on an SSH host (frames on the terminal); null when this is no clanker launch. */
function route() {
  if (process.env.CLANKER_ATTENTION_TRANSPORT === "tty") {
    const host = hostCredential(process.env.CLANKER_ATTENTION_CREDENTIAL);
    return host && { socket: null, terminal: host.terminal, token: host.token };
  }
  const socket = process.env.CLANKER_ATTENTION_SOCKET;
  const terminal = process.env.CLANKER_ATTENTION_TERMINAL;
  const token = process.env.CLANKER_ATTENTION_TOKEN;
  return socket && terminal && token ? { socket, terminal, token } : null;
}

/** Send one deliver request of `envelopes` along `target` (a `route()`); resolves true when
 * delivery must stop for good: a terminal that did not take the frame, or a grid that refused
 * the credential. A lost reply or a failed connection loses that batch only. Never rejects. */
function deliverRequest(target, envelopes) {
  const request = { v: 1, op: "deliver", terminal: target.terminal, token: target.token, envelopes };
  if (target.socket === null) return writeFrame(request).then((written) => !written);
  return new Promise((resolve) => {
    let settled = false;
    let buffer = "";
    let socket;
    const finish = (reply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      try {
        socket?.destroy();
      } catch {}
      resolve(reply !== null && typeof reply === "object" && reply.ok === false
        && reply.error === "unauthorized");
    };
    const timer = setTimeout(() => finish(null), TIMEOUT_MS);
    try {
      socket = net.createConnection({ path: target.socket });
      socket.setEncoding("utf8");
      socket.on("connect", () => socket.write(`${JSON.stringify(request)}\n`));
      socket.on("data", (chunk) => {
        buffer += chunk;
        const end = buffer.indexOf("\n");
        if (end < 0) {
          if (buffer.length > MAX_REPLY_BYTES) finish(null);
          return;
        }
        let reply = null;
        try {
          reply = JSON.parse(buffer.slice(0, end));
        } catch {}
        finish(reply);
      });
      socket.on("error", () => finish(null));
      socket.on("close", () => finish(null));
    } catch {
      finish(null);
    }
  });
}
