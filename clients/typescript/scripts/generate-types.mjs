#!/usr/bin/env node
// Generates src/types.d.ts from the OpenAPI document the service serves
// (functions/docs/site/openapi.json, built by `make docs`): one TypeScript declaration per
// component schema. Standard library only.
//
//   node scripts/generate-types.mjs            write src/types.d.ts
//   node scripts/generate-types.mjs --check    exit 1 if src/types.d.ts is not what the current
//                                              openapi.json generates (or if src/index.d.ts
//                                              imports a type that no longer exists)
//   --openapi PATH                             another OpenAPI document (default: the repo's)
//
// Should openapi.json describe a response model only as "an object" (pydantic emits
// {"type": "object", "additionalProperties": true} for a model with a custom serializer), or not
// at all, DOCUMENTED below fills exactly that one from docs/api.md. It never overrides a schema
// that openapi.json spells out: there, each documented field must exist in openapi.json (else the
// generator fails: docs and service disagree), and the entry is reported as redundant. The tests
// (test/live.test.js) check every answer of the service against these schemas.

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
export const PACKAGE_ROOT = resolve(HERE, "..");
export const DEFAULT_OPENAPI = resolve(PACKAGE_ROOT, "../../functions/docs/site/openapi.json");
export const TYPES_FILE = resolve(PACKAGE_ROOT, "src/types.d.ts");
export const INDEX_TYPES_FILE = resolve(PACKAGE_ROOT, "src/index.d.ts");

/**
 * Fields docs/api.md documents for the schemas openapi.json leaves open ("an object") or lacks.
 * Empty: openapi.json spells out every model today. An entry belongs here only while the document
 * does not describe its model; the generator reports it once the document does.
 */
export const DOCUMENTED = {};

const DOCUMENTED_NOTE = "Not described by openapi.json: fields as docs/api.md documents them.";

export function loadOpenApi(path = DEFAULT_OPENAPI) {
  return JSON.parse(readFileSync(path, "utf8"));
}

const isOpen = (schema) => !schema.properties && !schema.$ref && !schema.anyOf && !schema.oneOf && !schema.allOf;

/**
 * The component schemas with DOCUMENTED applied: { schemas, documented: [names filled from the
 * docs], redundant: [DOCUMENTED entries openapi.json now spells out] }. Throws when openapi.json
 * spells out a schema without a field the docs document.
 */
export function effectiveSchemas(openapi, documentedFields = DOCUMENTED) {
  const schemas = { ...(openapi.components?.schemas ?? {}) };
  const documented = [];
  const redundant = [];
  for (const [name, doc] of Object.entries(documentedFields)) {
    const given = schemas[name];
    if (given === undefined || isOpen(given)) {
      schemas[name] = { type: "object", additionalProperties: false, ...doc, "x-documented": true };
      documented.push(name);
      continue;
    }
    const missing = Object.keys(doc.properties).filter((field) => !(field in (given.properties ?? {})));
    if (missing.length > 0) {
      throw new Error(
        `openapi.json's ${name} has no ${missing.join(", ")}, which docs/api.md documents: ` +
          "the service and its docs disagree (or DOCUMENTED in scripts/generate-types.mjs is stale)",
      );
    }
    redundant.push(name);
  }
  return {
    schemas: Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))),
    documented,
    redundant,
  };
}

// -- schema → TypeScript -----------------------------------------------------------------------

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const refName = (pointer) => {
  const match = /^#\/components\/schemas\/(.+)$/.exec(pointer);
  if (!match) throw new Error(`unsupported $ref ${pointer}`);
  return match[1];
};
const literal = (value) => JSON.stringify(value);
const unique = (types) => [...new Set(types)];
const union = (types) => {
  const members = unique(types);
  return members.includes("unknown") ? "unknown" : members.join(" | ");
};
const wrap = (type) => (/[|&]/.test(type) ? `(${type})` : type);

function constraints(schema) {
  const notes = [];
  for (const key of ["minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "pattern"]) {
    if (schema[key] !== undefined) notes.push(`${key} ${schema[key]}`);
  }
  for (const member of schema.anyOf ?? []) notes.push(...constraints(member));
  if (schema.items && schema.type === "array") notes.push(...constraints(schema.items).map((n) => `items: ${n}`));
  return notes;
}

function docComment(schema, indent) {
  const lines = [];
  if (schema.description) lines.push(...String(schema.description).split("\n"));
  if (schema["x-documented"]) lines.push(DOCUMENTED_NOTE);
  const notes = constraints(schema);
  if (notes.length > 0) lines.push(`Constraints: ${unique(notes).join("; ")}.`);
  if (schema.default !== undefined) lines.push(`@default ${JSON.stringify(schema.default)}`);
  if (lines.length === 0) return "";
  const safe = lines.map((line) => line.replaceAll("*/", "*\\/").trimEnd());
  if (safe.length === 1) return `${indent}/** ${safe[0]} */\n`;
  return `${indent}/**\n${safe.map((line) => `${indent} * ${line}`.trimEnd()).join("\n")}\n${indent} */\n`;
}

export function tsType(schema, indent = "") {
  if (schema === true || schema === undefined || schema === null) return "unknown";
  if (schema.$ref) return refName(schema.$ref);
  if ("const" in schema) return literal(schema.const);
  if (Array.isArray(schema.enum)) return union(schema.enum.map(literal));
  if (schema.anyOf) return union(schema.anyOf.map((member) => tsType(member, indent)));
  if (schema.oneOf) return union(schema.oneOf.map((member) => tsType(member, indent)));
  if (schema.allOf) return unique(schema.allOf.map((member) => wrap(tsType(member, indent)))).join(" & ");
  const type = schema.type;
  if (Array.isArray(type)) return union(type.map((one) => tsType({ ...schema, type: one }, indent)));
  switch (type) {
    case "string":
      return "string";
    case "integer":
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    case "null":
      return "null";
    case "array":
      return `${wrap(tsType(schema.items, indent))}[]`;
    case "object":
      return objectType(schema, indent);
    default:
      return schema.properties ? objectType(schema, indent) : "unknown";
  }
}

function members(schema, indent) {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  const properties = schema.properties ?? {};
  const lines = [];
  for (const [name, property] of Object.entries(properties)) {
    const key = IDENTIFIER.test(name) ? name : literal(name);
    const optional = required.has(name) ? "" : "?";
    lines.push(`${docComment(property, inner)}${inner}${key}${optional}: ${tsType(property, inner)};`);
  }
  for (const name of schema.required ?? []) {
    if (!(name in properties)) lines.push(`${inner}${IDENTIFIER.test(name) ? name : literal(name)}: unknown;`);
  }
  const extra = schema.additionalProperties;
  if (extra === true || (extra && typeof extra === "object")) {
    const valueType = lines.length > 0 || extra === true ? "unknown" : tsType(extra, inner);
    lines.push(`${inner}[key: string]: ${valueType};`);
  }
  return lines;
}

function objectType(schema, indent) {
  const lines = members(schema, indent);
  return lines.length === 0 ? "Record<string, never>" : `{\n${lines.join("\n")}\n${indent}}`;
}

/** The text of src/types.d.ts for an OpenAPI document. */
export function generateTypes(openapi) {
  const { schemas } = effectiveSchemas(openapi);
  const out = [
    "// GENERATED by clients/typescript/scripts/generate-types.mjs from functions/docs/site/openapi.json",
    `// (${openapi.info?.title ?? "API"}, version ${openapi.info?.version ?? "?"}). Do not edit: run`,
    "// `node clients/typescript/scripts/generate-types.mjs` after `make docs`.",
    "",
  ];
  for (const [name, schema] of Object.entries(schemas)) {
    if (!IDENTIFIER.test(name)) throw new Error(`component name ${name} is not a TypeScript identifier`);
    const comment = docComment(schema, "");
    const isObject = (schema.type === "object" || (!schema.type && schema.properties)) && !schema.anyOf;
    if (isObject) {
      const lines = members(schema, "");
      out.push(`${comment}export interface ${name} {${lines.length ? `\n${lines.join("\n")}\n` : ""}}`, "");
    } else {
      out.push(`${comment}export type ${name} = ${tsType(schema, "")};`, "");
    }
  }
  return `${out.join("\n").trimEnd()}\n`;
}

/** The names src/index.d.ts imports from ./types.js. */
export function importedTypeNames(indexText) {
  const names = [];
  for (const match of indexText.matchAll(/import\s+type\s*\{([^}]*)\}\s*from\s*["']\.\/types\.js["']/g)) {
    for (const part of match[1].split(",")) {
      const name = part.trim().split(/\s+as\s+/)[0].trim();
      if (name) names.push(name);
    }
  }
  return names;
}

function firstDifference(expected, actual) {
  const a = expected.split("\n");
  const b = actual.split("\n");
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    if (a[i] !== b[i]) {
      return `line ${i + 1}:\n  generated: ${a[i] ?? "(end of file)"}\n  committed: ${b[i] ?? "(end of file)"}`;
    }
  }
  return "";
}

function main(argv) {
  const check = argv.includes("--check");
  const at = argv.indexOf("--openapi");
  const openapiPath = at >= 0 ? resolve(argv[at + 1]) : DEFAULT_OPENAPI;
  const openapi = loadOpenApi(openapiPath);
  const { documented, redundant } = effectiveSchemas(openapi);
  const source = relative(resolve(PACKAGE_ROOT, "../.."), openapiPath).split("\\").join("/");
  const text = generateTypes(openapi);
  const shownTypes = relative(process.cwd(), TYPES_FILE) || TYPES_FILE;
  if (redundant.length > 0) {
    console.error(
      `note: openapi.json now spells out ${redundant.join(", ")}; ` +
        "their DOCUMENTED entries in scripts/generate-types.mjs can go",
    );
  }
  if (!check) {
    writeFileSync(TYPES_FILE, text);
    console.log(
      `wrote ${shownTypes} from ${source}` +
        (documented.length ? ` (from docs/api.md, not in openapi.json: ${documented.join(", ")})` : ""),
    );
    return 0;
  }
  let committed = "";
  try {
    committed = readFileSync(TYPES_FILE, "utf8");
  } catch {
    committed = "";
  }
  const problems = [];
  if (committed !== text) {
    problems.push(
      `${shownTypes} differs from what ${source} generates (${firstDifference(text, committed)})\n` +
        "  run: node clients/typescript/scripts/generate-types.mjs",
    );
  }
  const exported = new Set([...text.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]));
  const missing = importedTypeNames(readFileSync(INDEX_TYPES_FILE, "utf8")).filter((n) => !exported.has(n));
  if (missing.length > 0) {
    problems.push(`src/index.d.ts imports ${missing.join(", ")} from ./types.js, which no longer exports them`);
  }
  if (problems.length > 0) {
    console.error(`types drift:\n${problems.join("\n")}`);
    return 1;
  }
  console.log(`${shownTypes} is what ${source} generates (${exported.size} types)`);
  return 0;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (error) {
    console.error(`generate-types: ${error.message}`);
    process.exitCode = 2;
  }
}
