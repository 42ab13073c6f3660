// Webhook triggers, in both setups: a person with capability `triggers` makes one and gets its URL once; a POST to
// that URL with no bearer token is taken at once (200 `{accepted: true}`) and starts an unattended turn of the
// trigger's owner told the prompt and the event, whose reply reaches the conversation and turn.stopped, never the
// response. An event key seen within 24 hours is a duplicate (fifty concurrent posts of one key start one run); a
// signed trigger refuses an unsigned event; fires are rate-limited per trigger; a rotation's old URL answers for a
// day; others see triggers only as the conversations' rule lets them, and only the owner changes one.
import { createHmac } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { verifyEventSignature } from '@agentplane/lib/crypto/signatures';
import { WebhookHandler, type HandlerRequest } from '../fakes/webhook-handler.js';
import { availableSetups, ScaleServices } from '../harness/runtime.js';
import { chatWorld, CHAT_CAPABILITIES, eventually, type ChatWorld } from './fixture.js';

interface Trigger {
  id: string;
  name: string;
  url: string;
  url_hint: string;
  signed: boolean;
  signing_secret?: string;
  previous_url_until: string | null;
  fire_count: number;
  subject: string;
}

const capabilities = [...CHAT_CAPABILITIES, 'triggers'];

describe.each(availableSetups())('webhook triggers (%s)', (setup) => {
  let services: ScaleServices | undefined;
  let world: ChatWorld;
  let receiver: WebhookHandler;
  let alice: string;

  const make = async (token: string, body: Record<string, unknown>) => {
    const res = await world.rt.endUser('/triggers', token, { method: 'POST', body: JSON.stringify({ name: 'CRM', prompt: 'A CRM event came in: act on it.', ...body }) });
    expect(res.status, await res.clone().text()).toBe(201);
    return (await res.json()) as Trigger;
  };
  const fire = (url: string, event: unknown, headers: Record<string, string> = {}) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(event) });
  const stoppedOf = (triggerId: string) =>
    receiver.requests.filter((request) => request.headers['x-event-type'] === 'turn.stopped' && (JSON.parse(request.body) as { data: { origin: { trigger_id?: string } } }).data.origin.trigger_id === triggerId);
  const dataOf = (request: HandlerRequest) => (JSON.parse(request.body) as { data: Record<string, unknown> }).data;
  const runsOf = async (triggerId: string) =>
    (await world.rt.runtime.database.db.selectFrom('trigger_events').select(['run_id', 'state', 'event_key']).where('trigger_id', '=', triggerId).execute());

  beforeAll(async () => {
    if (setup === 'scale') services = await ScaleServices.start();
    receiver = await WebhookHandler.start();
    world = await chatWorld({ ...((await services?.env()) ?? {}), DELIVERY_TICK_MS: '100' });
    const ceiling = world.tenant.configuration.ceiling;
    const pushed = await world.tenant.reconfigure({ ceiling: { ...ceiling, capabilities: [...ceiling.capabilities, 'triggers'] }, webhook: { url: `${receiver.url}/events` } } as never);
    expect(pushed.status, await pushed.clone().text()).toBe(200);
    alice = await world.token({ capabilities, sub: 'acme:alice', scope: 'acme:alice' });
  }, 120_000);
  afterAll(async () => {
    await world?.stop();
    await receiver?.stop();
    await services?.stop();
  });
  beforeEach(() => {
    world.fake.clearScripts();
    receiver.requests.length = 0;
    receiver.reply({ status: 204 });
  });

  it('takes an event with no bearer token at once, and runs the prompt with the event for the owner; the reply goes to turn.stopped', async () => {
    const trigger = await make(alice, {});
    expect(trigger.url).toMatch(new RegExp(`/triggers/trg_[A-Za-z0-9_-]{43}$`));
    expect(trigger.url.endsWith(trigger.url_hint)).toBe(true);
    world.fake.script('Lead Acme Corp assigned to Bob.');
    const local = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    const res = await fire(local, { type: 'lead.created', lead: { company: 'Acme Corp' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ accepted: true });
    await eventually(async () => stoppedOf(trigger.id).length === 1, 'turn.stopped');
    const stopped = dataOf(stoppedOf(trigger.id)[0]!);
    expect(stopped).toMatchObject({ status: 'completed', content: 'Lead Acme Corp assigned to Bob.', subject: 'acme:alice', origin: { kind: 'trigger', trigger_id: trigger.id } });
    const request = world.fake.chatRequests().at(-1)!;
    const told = request.messages.at(-1) as { content: string };
    expect(told.content).toContain('A CRM event came in: act on it.');
    expect(told.content).toContain('"company": "Acme Corp"');
    expect(((request.tools ?? []) as { function: { name: string } }[]).map((tool) => tool.function.name)).not.toContain('ask_user');
    const messages = (await (await world.rt.endUser(`/chat/sessions/${stopped.session_id}/messages`, alice)).json()) as { role: string; content: string }[];
    expect(messages.at(-1)).toMatchObject({ role: 'assistant', content: 'Lead Acme Corp assigned to Bob.' });
    // The list never shows a URL.
    const listed = (await (await world.rt.endUser('/triggers', alice)).json()) as { triggers: Trigger[] };
    expect(JSON.stringify(listed)).not.toContain(trigger.url.split('/').at(-1)!);
    expect(listed.triggers.find((t) => t.id === trigger.id)).toMatchObject({ fire_count: 1, subject: 'acme:alice' });
  });

  it('starts one run for fifty concurrent posts of one event key, and answers the rest duplicate', async () => {
    const trigger = await make(alice, {});
    world.fake.script(...Array.from({ length: 5 }, () => 'Handled.'));
    const local = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => fire(local, { n: i }, { 'X-Event-Id': 'evt-42' }).then(async (res) => ({ status: res.status, body: await res.json() }))));
    expect(answers.every((answer) => answer.status === 200)).toBe(true);
    expect(answers.filter((answer) => (answer.body as { duplicate?: boolean }).duplicate !== true)).toHaveLength(1);
    expect(answers.filter((answer) => (answer.body as { duplicate?: boolean }).duplicate === true)).toHaveLength(49);
    // Idempotency-Key keys too; with neither, the body's hash does.
    expect(await (await fire(local, { a: 1 }, { 'Idempotency-Key': 'evt-42' })).json()).toEqual({ accepted: true, duplicate: true });
    expect(await (await fire(local, { same: 'body' })).json()).toEqual({ accepted: true });
    expect(await (await fire(local, { same: 'body' })).json()).toEqual({ accepted: true, duplicate: true });
    await eventually(async () => (await runsOf(trigger.id)).every((event) => event.state === 'settled'), 'the runs to settle');
    const keys = (await runsOf(trigger.id)).map((event) => event.event_key);
    expect(keys).toHaveLength(2);
    expect(keys).toContain('evt-42');
    expect(keys.find((key) => key !== 'evt-42')).toMatch(/^sha256:[0-9a-f]{64}$/);
    // Past 24 hours the key is free again.
    await sql`update trigger_events set received_at = now() - interval '25 hours' where trigger_id = ${trigger.id} and event_key = 'evt-42'`.execute(world.rt.runtime.database.db);
    expect(await (await fire(local, { n: 'later' }, { 'X-Event-Id': 'evt-42' })).json()).toEqual({ accepted: true });
  });

  it('refuses an unsigned or wrongly signed event to a signed trigger, and takes a signed one', async () => {
    const trigger = await make(alice, { signed: true });
    expect(trigger.signing_secret).toMatch(/^whsec_/);
    world.fake.script('Signed event handled.');
    const local = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    const body = JSON.stringify({ deal: 'won' });
    const post = (signature?: string) => fetch(local, { method: 'POST', headers: { 'content-type': 'application/json', ...(signature ? { 'X-Signature': signature } : {}) }, body });
    expect((await post()).status).toBe(401);
    const wrong = await post(`sha256=${createHmac('sha256', 'whsec_other').update(body).digest('hex')}`);
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ code: 'invalid_signature' });
    const right = await post(`sha256=${createHmac('sha256', trigger.signing_secret!).update(body).digest('hex')}`);
    expect(right.status).toBe(200);
    expect(await right.json()).toEqual({ accepted: true });
    await eventually(async () => stoppedOf(trigger.id).length === 1, 'turn.stopped');
    // What the project receives is signed with its own webhook secret.
    const secret = ((await (await world.rt.admin(`/tenants/${world.tenant.tenantId}/webhook-secret`)).json()) as { webhook_secret: string }).webhook_secret;
    const delivered = stoppedOf(trigger.id)[0]!;
    expect(verifyEventSignature(delivered.headers['x-signature'] as string, { id: String(delivered.headers['x-delivery-id']), timestamp: delivered.headers['x-delivery-timestamp'] as string, body: delivered.body }, secret)).toBe(true);
  });

  it('takes no replay of a signed event: a body-signed one is keyed by its body, a v1 one signs its id and time', async () => {
    const trigger = await make(alice, { signed: true });
    const local = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    const body = JSON.stringify({ invoice: 'paid', amount: 120 });
    const send = (headers: Record<string, string>) => fetch(local, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
    const bodySigned = `sha256=${createHmac('sha256', trigger.signing_secret!).update(body).digest('hex')}`;
    world.fake.script('Paid invoice noted.');
    expect(await (await send({ 'X-Signature': bodySigned, 'X-Event-Id': 'evt-1' })).json()).toEqual({ accepted: true });
    // The same capture with a new, unsigned event id is the same event.
    expect(await (await send({ 'X-Signature': bodySigned, 'X-Event-Id': 'evt-2-forged' })).json()).toEqual({ accepted: true, duplicate: true });

    const v1 = (id: string, timestamp: number) => `v1=${createHmac('sha256', trigger.signing_secret!).update(`${id}.${timestamp}.`).update(body).digest('hex')}`;
    const now = Math.floor(Date.now() / 1000);
    world.fake.script('Second payment noted.');
    const fresh = await send({ 'X-Signature': v1('evt-3', now), 'X-Event-Id': 'evt-3', 'X-Event-Timestamp': String(now) });
    expect(await fresh.json()).toEqual({ accepted: true });
    // Replayed at once: the same id. With another id, or later: the signature no longer holds.
    expect(await (await send({ 'X-Signature': v1('evt-3', now), 'X-Event-Id': 'evt-3', 'X-Event-Timestamp': String(now) })).json()).toEqual({ accepted: true, duplicate: true });
    expect((await send({ 'X-Signature': v1('evt-3', now), 'X-Event-Id': 'evt-4', 'X-Event-Timestamp': String(now) })).status).toBe(401);
    const old = now - 600;
    const stale = await send({ 'X-Signature': v1('evt-5', old), 'X-Event-Id': 'evt-5', 'X-Event-Timestamp': String(old) });
    expect(stale.status).toBe(401);
    expect(await stale.json()).toMatchObject({ code: 'invalid_signature' });
    await eventually(async () => stoppedOf(trigger.id).length === 2, 'turn.stopped of both events');
  });

  it('limits the events a trigger takes a minute, answering 429 with Retry-After', async () => {
    const trigger = await make(alice, { rate_per_minute: 2 });
    world.fake.script('One.', 'Two.');
    const local = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    expect((await fire(local, { n: 1 })).status).toBe(200);
    expect((await fire(local, { n: 2 })).status).toBe(200);
    const limited = await fire(local, { n: 3 });
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await limited.json()).toMatchObject({ code: 'trigger_rate_limited' });
    expect((await runsOf(trigger.id))).toHaveLength(2);
  });

  it('rotates to a new URL, the old one answering for 24 hours; a made-up or removed URL is 404', async () => {
    const trigger = await make(alice, {});
    const old = trigger.url.replace(/^https?:\/\/[^/]+/, world.rt.url);
    const rotated = await world.rt.endUser(`/triggers/${trigger.id}/rotate`, alice, { method: 'POST' });
    expect(rotated.status).toBe(200);
    const renewed = (await rotated.json()) as Trigger;
    expect(renewed.url).not.toBe(trigger.url);
    expect(renewed.signing_secret).toBeUndefined();
    expect(Date.parse(renewed.previous_url_until!) - Date.now()).toBeGreaterThan(23.9 * 3_600_000);
    world.fake.script('Old.', 'New.');
    expect((await fire(old, { via: 'old' })).status).toBe(200);
    expect((await fire(renewed.url.replace(/^https?:\/\/[^/]+/, world.rt.url), { via: 'new' })).status).toBe(200);
    await sql`update triggers set previous_until = now() - interval '1 second' where id = ${trigger.id}`.execute(world.rt.runtime.database.db);
    const expired = await fire(old, { via: 'old' });
    expect(expired.status).toBe(404);
    expect(JSON.stringify(await expired.json())).not.toContain(old.split('/').at(-1)!);
    expect((await fire(`${world.rt.url}/triggers/trg_made-up`, {})).status).toBe(404);
    // An event is JSON: a form would be read as empty (and keyed as every other empty body), so it is refused.
    const form = await fetch(renewed.url.replace(/^https?:\/\/[^/]+/, world.rt.url), { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'lead=Ada' });
    expect(form.status).toBe(415);
    expect((await world.rt.endUser(`/triggers/${trigger.id}`, alice, { method: 'DELETE' })).status).toBe(200);
    expect((await fire(renewed.url.replace(/^https?:\/\/[^/]+/, world.rt.url), { via: 'new' })).status).toBe(404);
  });

  it('lets a person keep 50 triggers, however many ask for the last place at once', async () => {
    const token = await world.token({ capabilities, sub: 'acme:erin', scope: 'acme:erin' });
    const first = await make(token, {});
    await sql`insert into triggers (id, tenant_id, owner, name, prompt, slug_hash, url_hint, rate_per_minute, acts_as)
      select gen_random_uuid(), tenant_id, owner, name, prompt, md5(random()::text || n::text), url_hint, rate_per_minute, acts_as
      from triggers, generate_series(1, 48) as n where id = ${first.id}`.execute(world.rt.runtime.database.db);
    const answers = await Promise.all(Array.from({ length: 6 }, () => world.rt.endUser('/triggers', token, { method: 'POST', body: JSON.stringify({ name: 'More', prompt: 'More.' }) })));
    expect(answers.map((answer) => answer.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const { rows } = await sql<{ n: string }>`select count(*) as n from triggers where owner = 'acme:erin'`.execute(world.rt.runtime.database.db);
    expect(Number(rows[0]!.n)).toBe(50);
  });

  it('needs capability triggers; others see a trigger only as they see conversations, and only its owner changes it', async () => {
    const without = await world.token({ capabilities: CHAT_CAPABILITIES, sub: 'acme:alice', scope: 'acme:alice' });
    expect((await world.rt.endUser('/triggers', without)).status).toBe(403);
    expect((await world.rt.endUser('/triggers', without, { method: 'POST', body: JSON.stringify({ name: 'x', prompt: 'y' }) })).status).toBe(403);
    const trigger = await make(alice, {});
    const bob = await world.token({ capabilities, sub: 'acme:bob', scope: 'acme:bob' });
    expect((await world.rt.endUser(`/triggers/${trigger.id}/rotate`, bob, { method: 'POST' })).status).toBe(404);
    expect((await world.rt.endUser(`/triggers/${trigger.id}`, bob, { method: 'DELETE' })).status).toBe(404);
    expect(((await (await world.rt.endUser('/triggers', bob)).json()) as { triggers: Trigger[] }).triggers.map((t) => t.id)).not.toContain(trigger.id);
    const admin = await world.token({ capabilities, sub: 'ops:root', scope: 'ops:root', roles: ['admin'] });
    expect(((await (await world.rt.endUser('/triggers', admin)).json()) as { triggers: Trigger[] }).triggers.map((t) => t.id)).toContain(trigger.id);
    const refused = await world.rt.endUser(`/triggers/${trigger.id}`, admin, { method: 'DELETE' });
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({ code: 'not_owner' });
  });
});
