// Drives the example server with the official OpenAI client. The server must be running:
// OPENAI_BASE_URL points at its /v1 and DEEPINFER_SERVED_MODEL names its model (the Go test
// TestOpenAIClient starts it on a loopback port and runs this with `node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import OpenAI from 'openai';

const baseURL = process.env.OPENAI_BASE_URL;
const model = process.env.DEEPINFER_SERVED_MODEL;
assert.ok(baseURL && model, 'set OPENAI_BASE_URL and DEEPINFER_SERVED_MODEL');
const client = new OpenAI({ baseURL, apiKey: 'not-checked', maxRetries: 0 });

const greedy = { temperature: 0, max_tokens: 16 };
const hello = [{ role: 'user', content: 'Write a haiku about the sea.' }];

async function streamedText(stream) {
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) {
      text += choice.delta?.content ?? choice.text ?? '';
      finish = choice.finish_reason ?? finish;
    }
  }
  return { text, finish };
}

async function metric(name) {
  const res = await fetch(baseURL.replace(/\/v1\/?$/, '') + '/metrics');
  const m = new RegExp(`deepinfer_${name} (\\d+)`).exec(await res.text());
  return Number(m[1]);
}

test('lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [model]);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
});

test('chat completion', async () => {
  const res = await client.chat.completions.create({ model, messages: hello, ...greedy });
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.ok(res.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res.usage.prompt_tokens > 0 && res.usage.completion_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
});

test('streamed chat completion equals the unstreamed one', async () => {
  const whole = await client.chat.completions.create({ model, messages: hello, ...greedy });
  const stream = await client.chat.completions.create({
    model, messages: hello, ...greedy, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage = null;
  process.stdout.write('streamed chat completion: ');
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const delta = chunk.choices[0]?.delta?.content ?? '';
    if (delta) chunks++;
    process.stdout.write(delta);
    text += delta;
  }
  process.stdout.write(`\n(${chunks} content chunks, usage ${JSON.stringify(usage)})\n`);
  assert.ok(chunks > 1, 'the text came in pieces');
  assert.equal(text, whole.choices[0].message.content);
  assert.deepEqual(usage, whole.usage);
});

test('completion, streamed and not, n and logprobs', async () => {
  const res = await client.completions.create({ model, prompt: 'def fib(n):', ...greedy, n: 2, logprobs: 2 });
  assert.equal(res.object, 'text_completion');
  assert.equal(res.choices.length, 2);
  assert.equal(res.choices[0].text, res.choices[1].text, 'greedy completions agree');
  const lp = res.choices[0].logprobs;
  assert.equal(lp.tokens.length, lp.token_logprobs.length);
  assert.equal(lp.tokens.join(''), res.choices[0].text);
  assert.ok(lp.top_logprobs.every((top) => Object.keys(top).length <= 2));
  const { text } = await streamedText(
    await client.completions.create({ model, prompt: 'def fib(n):', ...greedy, stream: true }));
  assert.equal(text, res.choices[0].text);
});

test('seeded sampling repeats; stop strings stop', async () => {
  const params = { model, messages: hello, max_tokens: 24, temperature: 1, top_p: 0.9, seed: 1234 };
  const a = await client.chat.completions.create(params);
  const b = await client.chat.completions.create(params);
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const full = a.choices[0].message.content;
  const stop = full.slice(4, 6);
  const stopped = await client.chat.completions.create({ ...params, stop: [stop] });
  assert.equal(stopped.choices[0].finish_reason, 'stop');
  assert.ok(!stopped.choices[0].message.content.includes(stop));
});

test('json_schema response format parses', async () => {
  const schema = {
    type: 'object',
    properties: { city: { type: 'string', maxLength: 16 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    required: ['city', 'days'],
    additionalProperties: false,
  };
  for (const stream of [false, true]) {
    const params = {
      model, messages: [{ role: 'user', content: 'Plan a trip as JSON.' }], max_tokens: 200, seed: 7,
      response_format: { type: 'json_schema', json_schema: { name: 'trip', schema, strict: true } },
    };
    const text = stream
      ? (await streamedText(await client.chat.completions.create({ ...params, stream: true }))).text
      : (await client.chat.completions.create(params)).choices[0].message.content;
    const trip = JSON.parse(text);
    assert.equal(typeof trip.city, 'string');
    assert.ok(trip.city.length <= 16);
    assert.ok(Number.isInteger(trip.days) && trip.days >= 1 && trip.days <= 7);
  }
});

test('tool calls come back as tool_calls', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'The weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false },
    },
  }];
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const res = await client.chat.completions.create({ model, messages, tools, tool_choice, max_tokens: 300, seed: 3 });
    const choice = res.choices[0];
    assert.equal(choice.finish_reason, 'tool_calls');
    assert.equal(choice.message.tool_calls[0].type, 'function');
    assert.equal(choice.message.tool_calls[0].function.name, 'get_weather');
    assert.equal(typeof JSON.parse(choice.message.tool_calls[0].function.arguments).city, 'string');
  }
  // Streamed, and the call and its result sent back in the next turn.
  const stream = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 300, seed: 3, stream: true });
  let call = null;
  let finish = null;
  for await (const chunk of stream) {
    call = chunk.choices[0]?.delta?.tool_calls?.[0] ?? call;
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'tool_calls');
  assert.equal(call.function.name, 'get_weather');
  const next = await client.chat.completions.create({
    model, tools, max_tokens: 8,
    messages: [...messages, { role: 'assistant', content: null, tool_calls: [{ id: call.id, type: 'function', function: call.function }] },
      { role: 'tool', tool_call_id: call.id, content: '{"temperature": 21}' }],
  });
  assert.equal(next.choices[0].message.role, 'assistant');
});

test('16 concurrent streaming requests', async () => {
  const prompts = Array.from({ length: 16 }, (_, i) => `Request number ${i % 4}:`);
  const alone = await Promise.all([0, 1, 2, 3].map(async (i) =>
    (await client.completions.create({ model, prompt: prompts[i], ...greedy })).choices[0].text));
  const texts = await Promise.all(prompts.map(async (prompt) =>
    (await streamedText(await client.completions.create({ model, prompt, ...greedy, stream: true }))).text));
  texts.forEach((text, i) => assert.equal(text, alone[i % 4], `request ${i}`));
});

test('a client that aborts mid-stream cancels its generation', async () => {
  const generatedBefore = await metric('generated_tokens_total');
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages: hello, max_tokens: 1900, temperature: 0, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content && ++chunks === 5) controller.abort();
    }
  } catch (err) {
    // Depending on when the abort lands, the iteration ends quietly or with an abort error.
    assert.ok(err.name === 'APIUserAbortError' || err.name === 'AbortError', String(err));
  }
  assert.ok(controller.signal.aborted);
  assert.ok(chunks >= 5 && chunks < 100, `${chunks} chunks came after the abort`);
  let running = await metric('running_generations');
  for (let i = 0; i < 200 && running > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    running = await metric('running_generations');
  }
  assert.equal(running, 0, 'the generation still runs after its client left');
  // Nothing else runs meanwhile: had it gone on, the generation would have made 1900 tokens.
  const generated = (await metric('generated_tokens_total')) - generatedBefore;
  assert.ok(generated < 1000, `${generated} tokens were generated for a client that left after 5`);
});

test('bad requests get 4xx with an error object', async () => {
  const cases = [
    [() => client.chat.completions.create({ model: 'no-such-model', messages: hello }), 404],
    [() => client.chat.completions.create({ model, messages: hello, max_tokens: -1 }), 400],
    [() => client.completions.create({ model, prompt: 'x', max_tokens: -1 }), 400],
    [() => client.chat.completions.create({ model, messages: [] }), 400],
    [() => client.chat.completions.create({ model, messages: hello, temperature: -2 }), 400],
    [() => client.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'x' }] }), 400],
    [() => client.chat.completions.create({
      model, messages: hello, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'nonsense' } } },
    }), 400],
  ];
  for (const [call, status] of cases) {
    await assert.rejects(call, (err) => {
      assert.ok(err instanceof OpenAI.APIError, String(err));
      assert.equal(err.status, status);
      assert.equal(typeof err.error?.message, 'string');
      assert.ok(err.error.message.length > 0);
      assert.equal(err.error.type, 'invalid_request_error');
      return true;
    });
  }
  assert.equal((await assert.rejects(client.chat.completions.create({ model, messages: hello, max_tokens: -1 }),
    (err) => err.error.param === 'max_tokens')), undefined);
  // The client always sends valid JSON: send a broken body by hand.
  const res = await fetch(baseURL.replace(/\/?$/, '/chat/completions'), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"model": "' + model + '", "messages": [',
  });
  assert.equal(res.status, 400);
  const body = await res.json();
  assert.equal(body.error.type, 'invalid_request_error');
  assert.match(body.error.message, /JSON/);
});
