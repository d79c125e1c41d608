// Checks a value against a component schema of the OpenAPI document, as the generator sees it
// (DOCUMENTED applied): the tests run every answer of the service through it, so the generated
// types are checked against what the service really sends. The subset of JSON Schema that
// openapi.json and DOCUMENTED use: $ref, anyOf/oneOf/allOf, const, enum, type, properties,
// required, additionalProperties, items. Standard library only.

import { effectiveSchemas, loadOpenApi } from "./generate-types.mjs";

let cached;

/** The component schemas (DOCUMENTED applied) of the repository's openapi.json. */
export function componentSchemas() {
  cached ??= effectiveSchemas(loadOpenApi()).schemas;
  return cached;
}

const typeOf = (value) => {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
};

function problems(value, schema, schemas, at) {
  if (schema === true || schema === undefined) return [];
  if (schema.$ref) {
    const name = schema.$ref.replace("#/components/schemas/", "");
    if (!(name in schemas)) return [`${at}: unknown schema ${name}`];
    return problems(value, schemas[name], schemas, at);
  }
  const found = [];
  for (const member of schema.allOf ?? []) found.push(...problems(value, member, schemas, at));
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    const fits = alternatives.some((member) => problems(value, member, schemas, at).length === 0);
    if (!fits) found.push(`${at}: ${JSON.stringify(value)?.slice(0, 80)} fits none of its alternatives`);
  }
  if ("const" in schema && value !== schema.const) found.push(`${at}: not ${JSON.stringify(schema.const)}`);
  if (schema.enum && !schema.enum.includes(value)) found.push(`${at}: ${JSON.stringify(value)} not in ${schema.enum}`);
  if (schema.type) {
    const actual = typeOf(value);
    const allowed = Array.isArray(schema.type) ? schema.type : [schema.type];
    const ok = allowed.includes(actual) || (actual === "integer" && allowed.includes("number"));
    if (!ok) return [...found, `${at}: ${actual}, not ${allowed.join(" or ")}`];
  }
  if (typeOf(value) === "object" && (schema.properties || schema.required || "additionalProperties" in schema)) {
    const properties = schema.properties ?? {};
    for (const name of schema.required ?? []) {
      if (!(name in value)) found.push(`${at}: no ${name}`);
    }
    for (const [name, item] of Object.entries(value)) {
      if (name in properties) found.push(...problems(item, properties[name], schemas, `${at}.${name}`));
      else if (schema.additionalProperties === false) found.push(`${at}: ${name} is not in the schema`);
      else if (typeof schema.additionalProperties === "object") {
        found.push(...problems(item, schema.additionalProperties, schemas, `${at}.${name}`));
      }
    }
  }
  if (Array.isArray(value) && schema.items) {
    value.forEach((item, index) => found.push(...problems(item, schema.items, schemas, `${at}[${index}]`)));
  }
  return found;
}

/** What in `value` does not fit the component schema `name` (empty when it fits). */
export function conformanceProblems(value, name, schemas = componentSchemas()) {
  if (!(name in schemas)) return [`no component schema ${name}`];
  return problems(value, schemas[name], schemas, name);
}
