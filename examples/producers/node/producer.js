// A pushgw producer in Node.js with Debian's node-redis (the `redis` v4 package of npm: the
// same code runs after `npm install redis`).
//
// Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a
// call that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads
// each result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the
// results stream, and reads the feedback stream. Prints one line per result and exits 0 when
// every event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.
//
// With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
// through the gateway's HTTP API and reads the call's result there, then a
// call ringing two devices answered on one (POST …/answer).
//
//   NODE_PATH=/usr/share/nodejs REDIS_URL=redis://127.0.0.1:6379/0 node producer.js
"use strict";
const crypto = require("crypto");
const { createClient } = require("redis");

const env = process.env;
const url = env.REDIS_URL || "redis://127.0.0.1:6379/0";
const app = env.PUSHGW_APP || "acme";
const prefix = env.PUSHGW_PREFIX || "pushgw";
const voipToken = env.VOIP_TOKEN || "a0a0a0a0a0a0a0a0";
const alertToken = env.ALERT_TOKEN || "b0b0b0b0b0b0b0b0";
const timeoutMs = Number(env.TIMEOUT_S || "10") * 1000;
const phone = { id: "bob-phone", voip_token: env.PHONE_VOIP_TOKEN || "c0c0c0c0c0c0c0c0",
                alert_token: env.PHONE_ALERT_TOKEN || "c1c1c1c1c1c1c1c1" };
const ipad = { id: "bob-ipad", voip_token: env.IPAD_VOIP_TOKEN || "c2c2c2c2c2c2c2c2",
               alert_token: env.IPAD_ALERT_TOKEN || "c3c3c3c3c3c3c3c3" };
// With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
const devices = [phone, ipad].concat(env.PIXEL_FCM_TOKEN ? [{ id: "bob-pixel", fcm_token: env.PIXEL_FCM_TOKEN }] : []);

const key = `${prefix}:{${app}}:`; // the app's keys: pushgw:{acme}:calls, …
const group = "producer-node";      // this producer's group on the results stream
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

async function main() {
  const r = createClient({ url });
  await r.connect();
  const deadline = Date.now() + timeoutMs;

  // Our own consumer group on the results stream, created before we write, at its end ($).
  try {
    await r.xGroupCreate(key + "results", group, "$", { MKSTREAM: true });
  } catch (e) {
    if (!String(e.message).includes("BUSYGROUP")) throw e;
  }

  const entries = new Map(); // calls entry id (results carry it as `entry`) -> event
  async function send(event, name) {
    entries.set(await r.xAdd(key + "calls", "*", { event: JSON.stringify(event) }), name);
  }
  // The event's result, from its per-event key (no scan of the results stream).
  async function resultById(eventId, kind = "result:") {
    while (Date.now() < deadline) {
      const found = await r.get(key + kind + eventId);
      if (found && found.startsWith("{")) return JSON.parse(found); // absent, or in_flight:…: not finished yet
      await sleep(50);
    }
    return null;
  }

  const callId = "call-node-" + crypto.randomBytes(6).toString("hex"); // fresh: the idempotency key
  await send({ v: 1, id: callId, type: "incoming_call", voip_token: voipToken, alert_token: alertToken,
               deadline: Date.now() + 30000, voip: { caller: "+15551234567", callerName: "Alice" } }, callId);
  const results = new Map([[callId, await resultById(callId)]]);
  // The caller hangs up: the cancel's own result is under cancel-result:ID.
  await send({ v: 1, id: callId, type: "call_cancelled" }, "cancel:" + callId);
  const badId = callId + "-bad";
  await send({ v: 1, id: badId, type: "incoming_call", voip_token: "not-hex" }, badId);
  results.set("cancel:" + callId, await resultById(callId, "cancel-result:"));
  results.set(badId, await resultById(badId));
  // A call that rings both of Bob's devices; he answers on the phone a second later, and the
  // iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
  const multiId = callId + "-multi";
  await send({ v: 1, id: multiId, type: "incoming_call", devices, deadline: Date.now() + 30000,
               voip: { caller: "+15551234567", callerName: "Alice" } }, multiId);
  await sleep(1000);
  await send({ v: 1, id: multiId, type: "call_answered", device: "bob-phone" }, "answer:" + multiId);
  results.set(multiId, await resultById(multiId));
  results.set("answer:" + multiId, await resultById(multiId, "cancel-result:"));

  let ok = true;
  for (const [name, res] of results) {
    if (!res) { console.log(`result ${name} none: no result within ${timeoutMs / 1000} s`); ok = false; continue; }
    const detail = res.cause || res.reason || res.first_outcome || res.ended || "-";
    console.log(`result ${res.id} ${res.type} ${res.outcome} ${detail}`);
  }

  // The same results through our consumer group: each entry names the calls entry it answers.
  let seen = 0;
  while (seen < entries.size && Date.now() < deadline) {
    const streams = await r.xReadGroup(group, "worker-1", { key: key + "results", id: ">" }, { COUNT: 100, BLOCK: 500 });
    for (const stream of streams || []) {
      for (const { id, message } of stream.messages) {
        if (entries.has(JSON.parse(message.result).entry)) seen += 1;
        await r.xAck(key + "results", group, id);
      }
    }
  }
  console.log(`group ${group} ${seen} results`);
  ok = ok && seen === entries.size;

  // The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
  // a call that waits for its result, its cancel, and the result read by id (fetch: Node 18+).
  const ingestUrl = process.env.INGEST_URL, ingestKey = process.env.INGEST_KEY;
  if (ingestUrl && ingestKey) {
    const api = async (method, path, event) => (await fetch(`${ingestUrl}/v1/apps/${app}/calls${path}`, {
      method, body: event === undefined ? undefined : JSON.stringify(event),
      headers: { Authorization: `Bearer ${ingestKey}`, "Content-Type": "application/json" } })).json();
    const apiId = "call-node-api-" + crypto.randomBytes(6).toString("hex");
    const done = await api("POST", "?wait=5s", { v: 1, id: apiId, type: "incoming_call",
      voip_token: process.env.API_VOIP_TOKEN || "a1a1a1a1a1a1a1a1", voip: { caller: "+15551234567", callerName: "Alice" } });
    console.log(`api call ${apiId} ${done.result?.outcome}`);
    const cancelled = (await api("POST", `/${apiId}/cancel?wait=5s`)).result || {};
    console.log(`api cancel ${apiId} ${cancelled.outcome} ${cancelled.cancelled_after || "-"}`);
    const read = await api("GET", `/${apiId}`);
    console.log(`api result ${apiId} ${read.result?.outcome}`);
    ok = ok && read.status === "done";
    // A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
    const multiId = apiId + "-multi";
    const devices = [{ id: "bob-phone", voip_token: process.env.API_PHONE_TOKEN || "b0b0b0b0b0b0b0b0" },
      { id: "bob-ipad", voip_token: process.env.API_IPAD_TOKEN || "b2b2b2b2b2b2b2b2" }];
    await api("POST", "", { v: 1, id: multiId, type: "incoming_call", devices, deadline: Date.now() + 30000,
      voip: { caller: "+15551234567", callerName: "Alice" } });
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const answered = (await api("POST", `/${multiId}/answer?wait=5s`, { device: "bob-phone" })).result || {};
    console.log(`api answer ${multiId} ${answered.outcome}`);
    const multi = (await api("GET", `/${multiId}?wait=5s`)).result || {};
    console.log(`api result ${multiId} ${multi.outcome} ${multi.ended || "-"}`);
    ok = ok && answered.outcome === "answered";
  }

  for (const { message: f } of await r.xRevRange(key + "feedback", "+", "-", { COUNT: 100 })) {
    if (f.token === voipToken || f.token === alertToken) {
      console.log(`feedback ${f.channel} ${f.token} ${f.reason} ${f.timestamp}`);
    }
  }
  await r.quit();
  process.exitCode = ok ? 0 : 1;
}

main().catch((e) => { console.error(e); process.exitCode = 1; });
