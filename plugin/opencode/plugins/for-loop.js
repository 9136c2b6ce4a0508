// for-loop for opencode: passes the session going idle, the user's commands and the agent's tool
// calls to `loop-hook`, and does what it answers. The loop itself lives in loop-hook.
//
// loop-hook reads one JSON object on stdin (`opencode_hook` names the plugin hook, then what
// opencode gave the hook, the session's directory and its info) and answers one object:
// `prompt` is sent to the session as the next user message (or, for a command, in place of the
// command's text), `message` is shown to the user, `deny` stops a tool call with its reason.

import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

// The loop-hook to run: the plugin's `binary` option, $FOR_LOOP_BIN, cargo's bin folder, then
// PATH. Never one inside the session's project, which the agent writes.
function locate(options, directory) {
  const cargo = process.env.CARGO_HOME || path.join(os.homedir(), ".cargo");
  const onPath = (process.env.PATH || "").split(path.delimiter).map((dir) => path.join(dir, "loop-hook"));
  const candidates = [options?.binary, process.env.FOR_LOOP_BIN, path.join(cargo, "bin", "loop-hook"), ...onPath];
  for (const candidate of candidates) {
    if (!candidate || !path.isAbsolute(candidate)) continue;
    const relative = path.relative(directory, candidate);
    if (!relative.startsWith("..") && !path.isAbsolute(relative)) continue;
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return null;
}

// Runs loop-hook with `args` and `payload` on stdin; resolves to its answer, `{}` on any fault.
function ask(binary, args, payload, directory, log) {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    let child;
    try {
      child = spawn(binary, args, { cwd: directory, stdio: ["pipe", "pipe", "pipe"] });
    } catch (error) {
      log(`could not run ${binary}: ${error}`);
      return resolve({});
    }
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", (error) => {
      log(`could not run ${binary}: ${error}`);
      resolve({});
    });
    child.on("close", () => {
      if (stderr.trim()) log(stderr.trim());
      const line = stdout.trim().split("\n").pop() || "{}";
      try {
        const answer = JSON.parse(line);
        resolve(answer && typeof answer === "object" ? answer : {});
      } catch {
        log(`loop-hook answered what is not JSON: ${line}`);
        resolve({});
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

export const ForLoop = async ({ client, directory }, options) => {
  const log = (message, level = "warn") =>
    client.app.log({ body: { service: "for-loop", level, message } }).catch(() => {});
  const show = async (message) => {
    if (!message) return;
    await log(message, "info");
    await client.tui.showToast({ body: { title: "for-loop", message, variant: "info" } }).catch(() => {});
  };
  const session = async (id) => {
    const found = await client.session.get({ path: { id } }).catch(() => null);
    return found?.data ?? null;
  };
  let warned = false;
  const run = async (args, payload, where) => {
    const binary = locate(options, where);
    if (!binary) {
      if (!warned) await show("loop-hook was not found ($FOR_LOOP_BIN, ~/.cargo/bin, PATH): for-loop is off.");
      warned = true;
      return {};
    }
    return ask(binary, args, payload, where, log);
  };
  // One hook at a time per session: an idle that arrives while the last is judged waits for it.
  const queues = new Map();
  const inTurn = (id, work) => {
    const next = (queues.get(id) ?? Promise.resolve()).then(work, work);
    queues.set(id, next.catch((error) => log(`the idle of ${id} was not handled: ${error}`)));
    return next;
  };

  return {
    event: async ({ event }) => {
      if (event.type !== "session.idle") return;
      const id = event.properties?.sessionID;
      if (!id) return;
      // Not awaited: opencode hands events to plugins one at a time, and verify can take minutes.
      inTurn(id, async () => {
        const info = await session(id);
        const where = info?.directory || directory;
        const answer = await run(["stop-hook", "--host", "opencode"], { opencode_hook: "event", event, directory: where, session: info }, where);
        await show(answer.message);
        if (typeof answer.prompt === "string") {
          await client.session.promptAsync({ path: { id }, body: { parts: [{ type: "text", text: answer.prompt }] } });
        }
      });
    },
    "command.execute.before": async (input, output) => {
      const info = await session(input.sessionID);
      const where = info?.directory || directory;
      const answer = await run(["prompt-hook", "--host", "opencode"], { opencode_hook: "command.execute.before", input, directory: where }, where);
      await show(answer.message);
      if (typeof answer.prompt === "string") {
        output.parts.splice(0, output.parts.length, { type: "text", text: answer.prompt });
      }
    },
    "tool.execute.before": async (input, output) => {
      const info = await session(input.sessionID);
      const where = info?.directory || directory;
      const answer = await run(["guard"], { opencode_hook: "tool.execute.before", input, output: { args: output.args }, directory: where }, where);
      await show(answer.message);
      if (typeof answer.deny === "string") throw new Error(answer.deny);
    },
  };
};
