#!/usr/bin/env node
// Print the shapes of the AI SDK's own UI message stream schemas as JSON, so
// tests/streaming/test_protocol.py can check the Python types (think/_protocol.py)
// against them:
//
//   node tests/node/schema.mjs
//   {"chunks": [<shape>, ...], "parts": {"static": [...], "tool": [...],
//                                        "dynamicTool": [...], "data": [...]}}
//   <shape> = {"type": <literal> | "data-*" | "tool-*", "state"?: <literal>,
//              "fields": {<key>: <field>}}
//   <field> = {"optional": bool, "kind": <zod type: string, literal, enum, object, never, ...>,
//              "values"?: [<literal or enum values>], "fields"?: {<key>: <field>} (objects)}
//
// The zod schemas are private to the `ai` package, so this reaches them the one way zod
// offers: a failed parse hands each issue, with the schema that raised it (`inst`), to the
// global `customError` hook. Parsing a function whose `type` is set fails at the very union
// (or object) we want, and its definition lists the options and their fields.

import * as zodCore from 'zod/v4/core';
import { safeValidateUIMessages, uiMessageChunkSchema } from 'ai';

let raised = [];
zodCore.config({
  customError: (issue) => {
    raised.push(issue.inst);
    return undefined;
  },
});

/** The schema that rejects `value` at the outermost level. */
async function rejecting(validate, value) {
  raised = [];
  const result = await validate(value);
  if (result.success) throw new Error(`expected ${String(value.type)} to be rejected`);
  const last = raised.at(-1);
  if (last == null) throw new Error(`no schema raised for ${String(value.type)}`);
  return last;
}

function notAnObject(type) {
  const probe = () => undefined;
  probe.type = type;
  return probe;
}

function unwrap(schema) {
  let inner = schema;
  while (['optional', 'pipe', 'lazy'].includes(inner._zod.def.type)) {
    const def = inner._zod.def;
    if (def.type === 'optional') inner = def.innerType;
    else if (def.type === 'lazy') inner = def.getter();
    // A pipe checks its input, then parses it (`in`), or lets anything in and checks it on
    // the way out (the parts' JSON-value checks): the typed end is the one that describes it.
    else inner = def.in._zod.def.type === 'unknown' ? def.out : def.in;
  }
  return inner;
}

function field(schema) {
  const inner = unwrap(schema);
  const def = inner._zod.def;
  const out = { optional: schema._zod.optin === 'optional', kind: def.type };
  if (def.type === 'literal') out.values = [...def.values];
  if (def.type === 'enum') out.values = Object.values(def.entries);
  if (def.type === 'object') out.fields = fields(def.shape);
  return out;
}

function fields(zodShape) {
  return Object.fromEntries(Object.entries(zodShape).map(([k, v]) => [k, field(v)]));
}

// `pattern` names a type that is a prefix check, not a literal (`data-*`, `tool-*`).
function shape(object, pattern) {
  const def = unwrap(object)._zod.def;
  const own = fields(def.shape);
  const type = own.type.kind === 'literal' ? own.type.values[0] : pattern;
  const result = { type, fields: own };
  if (own.state?.kind === 'literal') result.state = own.state.values[0];
  return result;
}

function options(union, pattern = 'data-*') {
  return unwrap(union)._zod.def.options.map((option) => shape(option, pattern));
}

const chunkSchema = uiMessageChunkSchema();
const chunks = options(await rejecting((v) => chunkSchema.validate(v), notAnObject('none')));

async function partSchema(type) {
  const validate = (part) =>
    safeValidateUIMessages({ messages: [{ id: 'm', role: 'assistant', parts: [part] }] });
  return rejecting(validate, notAnObject(type));
}

const parts = {
  static: options(await partSchema('text')),
  tool: options(await partSchema('tool-probe'), 'tool-*'),
  dynamicTool: options(await partSchema('dynamic-tool')),
  data: [shape(await partSchema('data-probe'), 'data-*')],
};

process.stdout.write(`${JSON.stringify({ chunks, parts })}\n`);
