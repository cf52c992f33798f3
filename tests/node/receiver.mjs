// A webhook receiver written the way a Node.js user would write one: it
// verifies every request with the official standardwebhooks package and
// prints one JSON line per request. The first request is answered 503 (the
// receiver is "down"), later ones 200, so Homing must retry.
import http from "node:http";
import { Webhook } from "standardwebhooks";

const secret = process.env.SECRET;
const wh = new Webhook(secret);
let n = 0;
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    n += 1;
    const body = Buffer.concat(chunks).toString("utf8");
    let verified = false;
    let error = "";
    try {
      wh.verify(body, req.headers);
      verified = true;
    } catch (e) {
      error = String(e && e.message ? e.message : e);
    }
    const status = n === 1 ? 503 : 200;
    console.log(JSON.stringify({ n, id: req.headers["webhook-id"], ts: req.headers["webhook-timestamp"], verified, error, status }));
    res.writeHead(status);
    res.end();
  });
});
server.listen(0, "127.0.0.1", () => {
  console.log(JSON.stringify({ listening: server.address().port }));
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
