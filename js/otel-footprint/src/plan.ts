/**
 * The plan: mounted maps, their validation (the Python recorder's `PlanError` rules), the
 * `maps.mounted` payload, and the engagement changes a verify-mode pass reports.
 */

import { type JsonObject } from './codec.js';

/** The reference's default renewal grace. */
export const DEFAULT_RENEWAL_GRACE = 3;

/** One mounted map of the plan (the reference's `{id, memberIds, toolNames, nonParkable?}`). */
export interface MountedMap {
  readonly id: string;
  readonly memberIds: readonly string[];
  readonly toolNames: readonly string[];
  readonly nonParkable?: boolean;
}

/** The agent's own kernel decision (verify mode): the kernel's change JSON. */
export type EngagementChange =
  | {
      readonly kind: 'engaged';
      readonly mapId: string;
      readonly iteration: number;
      readonly by: string;
      readonly witness?: string;
      readonly reengaged?: boolean;
      readonly upgraded?: boolean;
      readonly tenantChanged?: boolean;
      readonly at?: string;
      readonly foundedBy?: string;
    }
  | {
      readonly kind: 'parked';
      readonly mapId: string;
      readonly iteration: number;
      readonly by: string;
      readonly idleCalls: number;
      readonly witness?: string;
    };

/** A plan the kernel cannot be mounted with (the Python recorder's `PlanError`). */
export class PlanError extends Error {
  override readonly name = 'PlanError';
}

export function validatePlan(maps: readonly MountedMap[], renewalGrace: number): void {
  if (!Number.isInteger(renewalGrace) || renewalGrace < 1) {
    throw new PlanError(`renewalGrace must be an integer >= 1, got ${String(renewalGrace)}`);
  }
  if (maps.length === 0) throw new PlanError('nothing is mounted that the kernel could manage: the plan has no maps');
  const seen = new Set<string>();
  maps.forEach((mounted, index) => {
    if (typeof mounted.id !== 'string') throw new PlanError(`maps[${index}].id must be a string`);
    const where = `map '${mounted.id}'`;
    if (seen.has(mounted.id)) throw new PlanError(`${where} is mounted twice: map ids must be unique`);
    seen.add(mounted.id);
    for (const [label, values] of [
      ['memberIds', mounted.memberIds],
      ['toolNames', mounted.toolNames],
    ] as const) {
      if (!Array.isArray(values) || !values.every((v) => typeof v === 'string')) {
        throw new PlanError(`${where}: ${label} must be a list of strings`);
      }
    }
    if (mounted.memberIds.length === 0) throw new PlanError(`${where} has no members: memberIds must not be empty`);
    if (mounted.nonParkable !== undefined && typeof mounted.nonParkable !== 'boolean') {
      throw new PlanError(`${where}: nonParkable must be a boolean when given`);
    }
  });
}

export function planJson(maps: readonly MountedMap[], renewalGrace: number): JsonObject {
  return {
    maps: maps.map((m) => ({
      id: m.id,
      memberIds: [...m.memberIds],
      toolNames: [...m.toolNames],
      ...(m.nonParkable === undefined ? {} : { nonParkable: m.nonParkable }),
    })),
    renewalGrace,
  };
}

/** The change JSON without `kind`, in the kernel's canonical key order (`change_to_json`). */
export function changePayload(change: EngagementChange): Record<string, unknown> {
  const out: Record<string, unknown> = { mapId: change.mapId, iteration: change.iteration, by: change.by };
  if (change.kind === 'parked') {
    out['idleCalls'] = change.idleCalls;
  } else {
    if (change.reengaged === true) out['reengaged'] = true;
    if (change.upgraded === true) out['upgraded'] = true;
    if (change.tenantChanged === true) out['tenantChanged'] = true;
    if (change.at !== undefined) out['at'] = change.at;
    if (change.foundedBy !== undefined) out['foundedBy'] = change.foundedBy;
  }
  if (change.witness !== undefined) out['witness'] = change.witness;
  return out;
}
