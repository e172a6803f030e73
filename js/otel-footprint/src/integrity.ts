/**
 * The integrity declarations' option types and the result-column rules (`Run.declareTool`,
 * `Run.integritySettings`, `Run.frame`, ...; the methods are the run's).
 */

import { type JsonObject } from './codec.js';
import { isRecord } from './support.js';

export const COLUMN_TYPES: ReadonlySet<string> = new Set(['number', 'string', 'boolean', 'date']);

export const RESULT_SHAPES: ReadonlySet<string> = new Set(['rowset', 'absence', 'bespoke']);

/** Refuse a result-column declaration the column checks could not read (the Python `_check_columns`). */
export function checkColumns(columns: unknown): void {
  if (!isRecord(columns) || Object.keys(columns).length === 0) {
    throw new Error('resultColumns must be a non-empty map of column -> type');
  }
  for (const [column, spec] of Object.entries(columns)) {
    if (column.trim() === '') throw new Error('resultColumns: a column name must not be blank');
    const kind = isRecord(spec) ? spec['type'] : spec;
    if (typeof kind !== 'string' || !COLUMN_TYPES.has(kind)) {
      throw new Error(
        `resultColumns[${JSON.stringify(column)}]: type must be one of ${[...COLUMN_TYPES].sort().join(', ')}, got ${String(kind)}`,
      );
    }
    if (isRecord(spec) && spec['nullable'] !== undefined && typeof spec['nullable'] !== 'boolean') {
      throw new Error(`resultColumns[${JSON.stringify(column)}]: nullable must be a boolean`);
    }
  }
}

/** The shape of a tool's raw return ({@link ToolCall.resultShape}). */
export type ResultShape = 'rowset' | 'absence' | 'bespoke';

/** The type of a result column. */
export type ColumnType = 'number' | 'string' | 'boolean' | 'date';

/** A result column: its type, or `{type, nullable}` ({@link DeclareToolOptions.resultColumns}). */
export type ColumnSpec = ColumnType | { readonly type: ColumnType; readonly nullable?: boolean };

/** Options of {@link Run.declareTool}. */
export interface DeclareToolOptions {
  /** The tools whose results this tool's arguments come from (never blank, never the tool itself). */
  argumentsFrom?: readonly string[];
  /** The columns of the rows the tool returns: column -> type or `{type, nullable}`. */
  resultColumns?: Readonly<Record<string, ColumnSpec>>;
}

/** Options of {@link Run.integritySettings} (the integrity dials of a run). */
export interface IntegritySettingsOptions {
  noticeEmptyLookups?: boolean;
  checkColumnTypes?: 'off' | 'warn' | 'enforce';
  noticePriorTurnEvidence?: boolean;
  posture?: 'observe' | 'dev';
}

/** Options of {@link Run.contextError}. */
export interface ContextErrorOptions {
  predicate?: string;
  iteration?: number;
  advisory?: boolean;
  message?: string;
}

/** The evidence gate's reading of the final answer ({@link Run.evidenceGrounding}). */
export interface EvidenceGrounding {
  fromThisTurn: number;
  fromPriorTurns: number;
  /** The current turn (0: no user turn). */
  currentTurn: number;
  latestPriorTurn?: number;
  toolResultsThisTurn?: number;
  indexTruncated?: boolean;
}

/** Options of {@link Run.toolSemantics}: the facts a tool call settled (the full envelope). */
export interface ToolSemanticsOptions {
  /** Rows `{entity, <field>: value, ...}`. */
  facts?: readonly JsonObject[];
  /** Points `{entity, metric, value, t?}`. */
  series?: readonly JsonObject[];
  measuredAt?: string;
}

/** Options of {@link Run.frame}: what a model call was offered and shown (GenAI conventions). */
export interface FrameOptions {
  /** `gen_ai.tool.definitions`. */
  tools?: readonly JsonObject[];
  /** `gen_ai.system_instructions` (each text as a `{type: 'text', content}` part). */
  system?: readonly string[];
  /** `gen_ai.input.messages` (`{role, parts}`). */
  messages?: readonly JsonObject[];
  /** `gen_ai.output.messages` (`{role, parts}`). */
  output?: readonly JsonObject[];
}
