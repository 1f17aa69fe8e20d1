// Runs the platform's sender (../shared/seeds/sender) as written, for hookgate's end-to-end test;
// build-sender.mjs compiles it with this file. Its WebhookService, with one subscription at
// HOOKGATE_URL whose secret is PLATFORM_SECRET, emits EVENTS task.completed events; once its
// dispatcher has delivered each one (or given it up), one JSON line per event says how.
// Importing the service also runs the usage example at the bottom of its file, which emits to
// api.example.com; that dispatcher is its own.
import { WebhookService } from "seeds/sender/webhook-service";

const service = new WebhookService();
const subscription = service.subscriptions.create(process.env.HOOKGATE_URL, ["task.completed"]);
subscription.secret = process.env.PLATFORM_SECRET;

const events = Number(process.env.EVENTS);
for (let i = 0; i < events; i++) {
  await service.emit("task.completed", { task_id: `task_${i}`, status: "succeeded", version: 2, result: { text: "done" } });
}
const queue = service.dispatcher.queue;
while (queue.some((delivery) => delivery.status === "pending")) {
  await new Promise((resolve) => setTimeout(resolve, 100));
}
for (const delivery of queue) {
  const line = { event_id: delivery.payload.id, status: delivery.status, attempts: delivery.attempt + 1, error: delivery.lastError ?? "" };
  process.stdout.write(JSON.stringify(line) + "\n");
}
process.exit(0);
