// The committed types are what the service's OpenAPI document generates, and the hand-written
// declarations describe what src/index.js exports.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as sdk from "../src/index.js";
import {
  DOCUMENTED,
  INDEX_TYPES_FILE,
  TYPES_FILE,
  effectiveSchemas,
  generateTypes,
  importedTypeNames,
  loadOpenApi,
} from "../scripts/generate-types.mjs";

test("src/types.d.ts is what functions/docs/site/openapi.json generates", () => {
  const generated = generateTypes(loadOpenApi());
  assert.equal(
    readFileSync(TYPES_FILE, "utf8"),
    generated,
    "run: node clients/typescript/scripts/generate-types.mjs",
  );
});

test("every type src/index.d.ts imports is generated", () => {
  const generated = generateTypes(loadOpenApi());
  const exported = new Set([...generated.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]));
  const imported = importedTypeNames(readFileSync(INDEX_TYPES_FILE, "utf8"));
  assert.ok(imported.length > 10);
  assert.deepEqual(imported.filter((name) => !exported.has(name)), []);
});

test("every type comes from openapi.json: no hand-written entry it already spells out", () => {
  const { documented, redundant } = effectiveSchemas(loadOpenApi());
  assert.deepEqual(redundant, [], "remove these DOCUMENTED entries from scripts/generate-types.mjs");
  assert.deepEqual(documented.sort(), Object.keys(DOCUMENTED).sort());
});

test("documented fields fill only what openapi.json leaves open, and never contradict it", () => {
  const openapi = loadOpenApi();
  const jobOut = {
    properties: { jobId: { type: "string" }, status: { type: "string" } },
    required: ["jobId", "status"],
  };
  const open = structuredClone(openapi);
  open.components.schemas.JobOut = { type: "object", additionalProperties: true };
  const filled = effectiveSchemas(open, { JobOut: jobOut });
  assert.deepEqual(filled.documented, ["JobOut"]);
  assert.deepEqual(filled.schemas.JobOut.properties, jobOut.properties);
  assert.deepEqual(effectiveSchemas(openapi, { JobOut: jobOut }).redundant, ["JobOut"]);
  const spelledOut = structuredClone(openapi);
  spelledOut.components.schemas.JobOut = { type: "object", properties: { jobId: { type: "string" } } };
  assert.throws(() => effectiveSchemas(spelledOut, { JobOut: jobOut }), /JobOut has no status/);
});

test("src/index.d.ts declares every runtime export of src/index.js", () => {
  const declarations = readFileSync(INDEX_TYPES_FILE, "utf8");
  const declared = new Set([
    ...[...declarations.matchAll(/^export declare (?:class|const|function) (\w+)/gm)].map((m) => m[1]),
    ...[...declarations.matchAll(/^export \{ (\w+) as (\w+) \}/gm)].map((m) => m[2]),
    ...(/^export default /m.test(declarations) ? ["default"] : []),
  ]);
  assert.deepEqual(Object.keys(sdk).filter((name) => !declared.has(name)), []);
  assert.deepEqual([...declared].filter((name) => !(name in sdk)), []);
});
