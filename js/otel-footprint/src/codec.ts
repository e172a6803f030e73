/**
 * The payload codec: an upstream camelCase payload as `footprint.<snake_case>` span-event attributes,
 * byte for byte as `otel_footprint/codec.py` (`encode_payload`) writes them in Python.
 *
 * Scalars and homogeneous scalar arrays travel as they are; objects and mixed arrays as compact JSON
 * text written the way Python's `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` writes it
 * (key order kept, non-ASCII as is, floats in Python's shortest `repr` form). `null` / `undefined`
 * fields are left out. JavaScript has one number type: an integral number is an int here (Python would
 * keep `2.0` a float); that is the one place where the two can differ.
 */

import type { AttributeValue, Attributes } from '@opentelemetry/api';

import { names } from './semconv.js';

/** A JSON value as payloads hold it (a `Map` keeps integer-like keys in insertion order). */
export type Json = null | boolean | number | string | readonly Json[] | JsonObject;
/** A JSON object. */
export interface JsonObject {
  readonly [key: string]: Json | undefined;
}
/** A payload: camelCase field -> value; `null` / `undefined` fields are left out. */
export type Payload = Readonly<Record<string, unknown>> | ReadonlyMap<string, unknown>;

const CAMEL_BOUNDARY = /(?<=[a-z0-9])([A-Z])/g;

/** `sourceBreakdown` -> `source_breakdown` (top-level payload keys only). */
export function snakeCase(name: string): string {
  return name.replace(CAMEL_BOUNDARY, '_$1').toLowerCase();
}

// Field names repeat on every event of every run, so their attribute names are memoized: only short
// names, and at most FIELD_CACHE_SIZE of them (as the Python codec's caches).
const CACHED_NAME_CHARS = 64;
const FIELD_CACHE_SIZE = 2048;
const fieldCache = new Map<string, string>();

/** The attribute of a payload field: `activeIds` -> `footprint.active_ids`. */
export function fieldAttribute(field: string): string {
  const cached = fieldCache.get(field);
  if (cached !== undefined) return cached;
  const attribute = names.PREFIX + snakeCase(field);
  if (field.length <= CACHED_NAME_CHARS && fieldCache.size < FIELD_CACHE_SIZE) fieldCache.set(field, attribute);
  return attribute;
}

/** Our event name of an upstream type: `context.evaluated` -> `footprint.context.evaluated`. */
export function eventNameOf(eventType: string): string {
  return names.PREFIX + eventType;
}

type ScalarKind = 'string' | 'bool' | 'int' | 'float';

function scalarKind(value: unknown): ScalarKind | undefined {
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'boolean':
      return 'bool';
    case 'number':
      return Number.isInteger(value) ? 'int' : 'float';
    default:
      return undefined;
  }
}

/** Python's `repr(float)` of a non-integral number: shortest digits, exponent outside 1e-4..1e16. */
export function pythonFloat(value: number): string {
  if (Number.isNaN(value)) return 'NaN';
  if (value === Infinity) return 'Infinity';
  if (value === -Infinity) return '-Infinity';
  // toExponential() without digits gives the shortest digits that read back as the same double.
  const match = /^(-?)(\d)(?:\.(\d+))?e([+-]\d+)$/.exec(value.toExponential());
  if (match === null) return String(value);
  const [, sign = '', head = '', tail = '', exp = '0'] = match;
  const digits = head + tail;
  const exponent = Number(exp);
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
    const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
    const fraction = digits.slice(exponent + 1);
    return `${sign}${whole}.${fraction === '' ? '0' : fraction}`;
  }
  const mantissa = tail === '' ? head : `${head}.${tail}`;
  const magnitude = String(Math.abs(exponent)).padStart(2, '0');
  return `${sign}${mantissa}e${exponent < 0 ? '-' : '+'}${magnitude}`;
}

function pythonNumber(value: number): string {
  if (!Number.isInteger(value)) return pythonFloat(value);
  // Integral numbers are ints; Python writes every digit of an int (JavaScript switches to 1e+21).
  return Math.abs(value) < 1e21 ? String(value === 0 ? 0 : value) : BigInt(value).toString();
}

function entriesOf(value: object): Array<[string, unknown]> {
  if (value instanceof Map) return [...(value as Map<unknown, unknown>)].map(([k, v]) => [String(k), v]);
  return Object.entries(value);
}

/**
 * `value` as Python's `json.dumps(value, ensure_ascii=False, separators=(item, key))` writes it.
 * `undefined` members of objects are left out (as `JSON.stringify` does); in arrays they are `null`.
 */
export function pythonJson(value: unknown, item = ',', key = ':'): string {
  const write = (v: unknown): string => {
    if (v === null || v === undefined) return 'null';
    switch (typeof v) {
      case 'boolean':
        return v ? 'true' : 'false';
      case 'number':
        return pythonNumber(v);
      case 'bigint':
        return v.toString();
      case 'string':
        // JSON.stringify escapes exactly what Python escapes with ensure_ascii=False: the quote, the
        // backslash and the control characters (\b \f \n \r \t by name, the rest as \u00XX).
        return JSON.stringify(v);
      case 'object': {
        const withJson = v as { toJSON?: () => unknown };
        if (typeof withJson.toJSON === 'function') return write(withJson.toJSON());
        if (Array.isArray(v)) return `[${v.map((x: unknown) => write(x)).join(item)}]`;
        const parts: string[] = [];
        for (const [k, x] of entriesOf(v)) {
          if (x === undefined || typeof x === 'function' || typeof x === 'symbol') continue;
          parts.push(`${JSON.stringify(k)}${key}${write(x)}`);
        }
        return `{${parts.join(item)}}`;
      }
      default:
        throw new TypeError(`cannot encode a ${typeof v} as JSON`);
    }
  };
  return write(value);
}

/**
 * One payload value as an attribute value: scalars and homogeneous scalar arrays as they are,
 * objects and mixed arrays as compact JSON text; `undefined` means "leave the attribute out".
 */
export function encodeValue(value: unknown): AttributeValue | undefined {
  if (value === null || value === undefined) return undefined;
  if (scalarKind(value) !== undefined) return value as string | number | boolean;
  if (Array.isArray(value)) {
    const first = value.length === 0 ? 'string' : scalarKind(value[0]);
    if (first !== undefined && value.every((v) => scalarKind(v) === first)) {
      return [...value] as AttributeValue;
    }
  }
  return pythonJson(value);
}

/** A camelCase payload as `footprint.*` attributes (absent fields left out), plus the composition id. */
export function encodePayload(payload: Payload, compositionId?: string): Attributes {
  const attributes: Attributes = {};
  for (const [field, value] of entriesOf(payload)) {
    const encoded = encodeValue(value);
    if (encoded !== undefined) attributes[fieldAttribute(field)] = encoded;
  }
  if (compositionId !== undefined) attributes[names.COMPOSITION_ID] = compositionId;
  return attributes;
}
