// Runs the task service's receiver (../shared/seeds/receiver/webhook-demo.mjs, RECEIVER_FILE) as
// written, for hookgate's end-to-end test. What differs is outside its code: it listens on
// 127.0.0.1:RECEIVER_PORT instead of its hard-coded 3000 (the tests run side by side); every
// answer it gives to /webhook/ai is printed as a JSON line (the Hookgate-Event-Id it was handed,
// its status and its body); and its clock may run RECEIVER_CLOCK_AHEAD_MS ahead, so that an
// outage of seconds is, to its 300 s window, one of minutes.
import http from "node:http";
import { pathToFileURL } from "node:url";

const ahead = Number(process.env.RECEIVER_CLOCK_AHEAD_MS ?? 0);
const now = Date.now;
Date.now = () => now() + ahead;

const port = Number(process.env.RECEIVER_PORT);
const listen = http.Server.prototype.listen;
http.Server.prototype.listen = function (_port, ...rest) {
  return listen.call(this, port, "127.0.0.1", ...rest.filter((arg) => typeof arg === "function"));
};

const createServer = http.createServer;
http.createServer = function (handler) {
  return createServer.call(http, (req, res) => {
    const end = res.end;
    res.end = function (chunk, ...rest) {
      if (req.url === "/webhook/ai") {
        const line = { event_id: req.headers["hookgate-event-id"] ?? "", status: res.statusCode, body: String(chunk ?? "") };
        process.stdout.write(JSON.stringify(line) + "\n");
      }
      return end.call(this, chunk, ...rest);
    };
    return handler(req, res);
  });
};

await import(pathToFileURL(process.env.RECEIVER_FILE).href);
