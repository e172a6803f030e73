/**
 * The live engagement policy (enforce mode): the engagement kernel, run by the recorder as the agent
 * goes, so the agent can leave out of each model call what the kernel parks.
 *
 * The same kernel and the same translation of recorded facts into a kernel pass as the Python
 * processor (`otel_footprint/kernel/lease.py`, `runs/passes.py` `kernel_pass_of`) and the Python
 * recorder's policy (`record/policy.py`): the vectors generated from the Python side hold this port
 * to it, byte for byte (`scripts/js_vectors.py`, `test/vectors.test.mjs`), and the kernel to the
 * reference's conformance cases.
 *
 * What the policy reads is what the agent states: each pass's cursor move and what rode it (the
 * evaluation, the injected rows, the park card), and the tool calls stated with `toolCall` (their
 * picks, failures and refusals). The Python recorder also reads tool calls an instrumentation recorded
 * in a model call's output; this one reads stated tool calls only.
 */

import type { EngagementChange, MountedMap } from './plan.js';

export type Strength = 'explicit' | 'structural' | 'semantic' | 'lexical' | 'assumed';

const RANK: Readonly<Record<Strength, number>> = { explicit: 4, structural: 3, semantic: 2, lexical: 1, assumed: 0 };
const MOVE_STRENGTH: ReadonlyMap<string, Strength> = new Map<string, Strength>([
  ['model-pick', 'explicit'],
  ['route', 'structural'],
  ['tool-proposal', 'structural'],
  ['continuity', 'structural'],
  ['intent', 'semantic'],
  ['decider', 'semantic'],
  ['entry', 'lexical'],
  ['stay', 'assumed'],
  ['none', 'assumed'],
]);
const NON_MOVES: ReadonlySet<string> = new Set(['stay', 'none']);
/** The park card's injection id: when it rode a pass, it is part of what that pass served. */
export const PARK_CARD_ID = 'agentfootprint:map-status';
const READ_SKILL = 'read_skill';
const SKILL_TARGET_PREFIX = 'skill:';
/** Sources of rows that are conversation, not a contribution a pass serves (as the processor). */
const CONVERSATION_SOURCES: ReadonlySet<string> = new Set(['user', 'assistant', 'tool-result']);

/** The rung of a cursor-move clause; an unknown clause is structural (as in the kernel). */
export function strengthOfMove(clause: string): Strength {
  return MOVE_STRENGTH.get(clause) ?? 'structural';
}

function strongerOf(a: Strength, b: Strength): Strength {
  return RANK[a] >= RANK[b] ? a : b;
}

function tentative(strength: Strength): boolean {
  return strength === 'semantic' || strength === 'lexical' || strength === 'assumed';
}

/** One map's engagement state (the kernel's `MapEngagementRecord`). */
export interface EngagementRecord {
  readonly mapId: string;
  readonly standing: 'engaged' | 'parked';
  readonly by: Strength;
  readonly since: number;
  readonly foundedBy: Strength;
  readonly foundedAt: number;
  readonly idle: number;
  readonly foundedOn?: string;
  readonly at?: string;
  readonly atBy?: Strength;
  readonly atSince?: number;
  readonly witness?: string;
}

/** The kernel's input for one model call (the kernel's `EngagementPass`). */
export interface KernelPass {
  readonly iteration: number;
  readonly currentNode?: string;
  readonly moveBy?: string;
  readonly witness?: string;
  readonly toolResults: readonly string[];
  readonly pendingSkillPick?: string;
  readonly acceptedSkillPicks: readonly string[];
  readonly servedLastPass: readonly string[];
}

export interface Advance {
  readonly next: readonly EngagementRecord[];
  readonly parkedInjectionIds: readonly string[];
  readonly parkedToolNames: readonly string[];
  readonly changes: readonly EngagementChange[];
}

function strongestEvidence(mounted: MountedMap, pass: KernelPass): Strength | undefined {
  const found: Strength[] = [];
  for (const tool of pass.toolResults) if (mounted.toolNames.includes(tool)) found.push('structural');
  const { moveBy, currentNode } = pass;
  if (moveBy !== undefined && !NON_MOVES.has(moveBy) && currentNode !== undefined && mounted.memberIds.includes(currentNode)) {
    found.push(strengthOfMove(moveBy));
  }
  if (pass.pendingSkillPick !== undefined && mounted.memberIds.includes(pass.pendingSkillPick)) found.push('explicit');
  for (const pick of pass.acceptedSkillPicks) if (mounted.memberIds.includes(pick)) found.push('explicit');
  let best: Strength | undefined;
  for (const strength of found) best = best === undefined ? strength : strongerOf(best, strength);
  return best;
}

function moveStrength(pass: KernelPass): Strength {
  return pass.moveBy === undefined ? 'assumed' : strengthOfMove(pass.moveBy);
}

/** Advance every mounted map by one pass (the kernel's `advance_engagement`). */
export function advanceEngagement(
  maps: readonly MountedMap[],
  renewalGrace: number,
  prior: readonly EngagementRecord[] | undefined,
  pass: KernelPass,
): Advance {
  const priorOf = new Map((prior ?? []).map((r) => [r.mapId, r]));
  const next: EngagementRecord[] = [];
  const changes: EngagementChange[] = [];
  const parkedInjectionIds: string[] = [];
  const parkedToolNames: string[] = [];
  for (const mounted of maps) {
    const record = advanceOne(mounted, priorOf.get(mounted.id), pass, renewalGrace, changes);
    if (record === undefined) continue;
    next.push(record);
    if (record.standing === 'parked') {
      parkedInjectionIds.push(...mounted.memberIds);
      parkedToolNames.push(...mounted.toolNames);
    }
  }
  return { next, parkedInjectionIds, parkedToolNames, changes };
}

function withWitness<T extends object>(value: T, witness: string | undefined): T {
  return witness === undefined ? value : { ...value, witness };
}

function advanceOne(
  mounted: MountedMap,
  prior: EngagementRecord | undefined,
  pass: KernelPass,
  grace: number,
  changes: EngagementChange[],
): EngagementRecord | undefined {
  const strongest = strongestEvidence(mounted, pass);
  const { iteration, currentNode: node } = pass;
  if (prior === undefined) {
    // Law A: founded when the cursor lands on a member or evidence names the map.
    const inMap = node !== undefined && mounted.memberIds.includes(node);
    if (!inMap && strongest === undefined) return undefined;
    const by = strongest ?? moveStrength(pass);
    const at = inMap ? node : undefined;
    changes.push(withWitness({ kind: 'engaged', mapId: mounted.id, iteration, by }, pass.witness));
    return {
      mapId: mounted.id,
      standing: 'engaged',
      by,
      since: iteration,
      foundedBy: by,
      foundedAt: iteration,
      idle: 0,
      ...(at === undefined ? {} : { foundedOn: at, at, atBy: moveStrength(pass), atSince: iteration }),
      ...(pass.witness === undefined ? {} : { witness: pass.witness }),
    };
  }
  const moved = node !== undefined && mounted.memberIds.includes(node) && node !== prior.at;
  if (prior.standing === 'parked') {
    // Law B: only explicit or structural evidence recovers a park.
    if (strongest !== 'explicit' && strongest !== 'structural') return prior;
    changes.push(withWitness({ kind: 'engaged', mapId: mounted.id, iteration, by: strongest, reengaged: true }, pass.witness));
    const { witness: _dropped, ...rest } = prior;
    return {
      ...rest,
      standing: 'engaged',
      by: strongest,
      since: iteration,
      idle: 0,
      ...(moved ? { at: node, atBy: moveStrength(pass), atSince: iteration } : {}),
      ...(pass.witness === undefined ? {} : { witness: pass.witness }),
    };
  }
  if (moved) {
    // C1, tenant change: eligibility re-derived from the new member's own evidence.
    const atBy = moveStrength(pass);
    const by = strongerOf(atBy, strongest ?? 'assumed');
    changes.push(
      withWitness(
        { kind: 'engaged', mapId: mounted.id, iteration, by, tenantChanged: true, at: node, foundedBy: prior.foundedBy },
        pass.witness,
      ),
    );
    return { ...prior, by, idle: 0, at: node, atBy, atSince: iteration };
  }
  if (strongest !== undefined) {
    const by = strongerOf(prior.by, strongest);
    if (by === prior.by) return prior.idle === 0 ? prior : { ...prior, idle: 0 };
    changes.push(
      withWitness({ kind: 'engaged', mapId: mounted.id, iteration, by, upgraded: true, foundedBy: prior.foundedBy }, prior.witness),
    );
    return { ...prior, by, idle: 0 };
  }
  // C3: idle counts only when the map's contribution rode the last pass and some tool was called.
  const served = pass.servedLastPass.some((id) => mounted.memberIds.includes(id));
  if (!served || pass.toolResults.length === 0) return prior;
  const idle = prior.idle + 1;
  if (tentative(prior.by) && idle >= grace && mounted.nonParkable !== true) {
    changes.push(withWitness({ kind: 'parked', mapId: mounted.id, iteration, by: prior.by, idleCalls: idle }, prior.witness));
    return { ...prior, idle, standing: 'parked', since: iteration };
  }
  return { ...prior, idle };
}

// ── the live policy ───────────────────────────────────────────────────────────────────────────

/** What the kernel says about one model call: what to leave out of it. */
export interface Decision {
  readonly iteration: number;
  readonly parkedMaps: readonly string[];
  readonly parkedInjectionIds: readonly string[];
  readonly parkedToolNames: readonly string[];
  /** The kernel's changes on this pass (the recorder writes the ones the agent applied). */
  readonly changes: readonly EngagementChange[];
}

/** The cursor move of a pass (`context.evaluated`'s `cursorMove`). */
export interface CursorMove {
  readonly from?: string;
  readonly to?: string;
  readonly by: string;
  readonly witness?: { readonly text: string; readonly keyword?: string };
}

/** @internal What the agent stated about one pass. */
export interface PassState {
  readonly iteration: number;
  move?: CursorMove | undefined;
  activeIds: readonly string[];
  readonly servedIds: Set<string>;
  /** Non-conversation rows injected, first-injected order (the park card aside): what the pass served
   * when the agent asked `plan()` but stated no evaluation. */
  readonly injectedIds: string[];
  /** Characters of the injections `keep()` said to leave out, counted when the pass closes. */
  readonly leftOut: Map<string, number>;
  cardRode: boolean;
  decision?: Decision;
  records: readonly EngagementRecord[];
  readonly evaluations: Array<Record<string, unknown>>;
  written: boolean;
}

/** @internal One tool call stated with `toolCall`: the kernel reads its name and picks (the
 * processor's `picks_of` over the gate's events on the call). */
export class StatedCall {
  readonly picks: Array<{ skillId: string; hop: boolean }> = [];
  /** Skill ids a rejection or a refusing `skill_read` check named. */
  readonly refusedIds = new Set<string>();
  /** A refusing `tool_call` check of `read_skill`: no pick of this call stands. */
  gateClosed = false;
  failed = false;

  constructor(
    readonly iteration: number,
    readonly name: string,
    readonly args: Readonly<Record<string, unknown>>,
  ) {}

  /** A `permission.check` on the call: a refusing result closes the gate for what it targets. */
  permission(capability: string, target: string, result: string): void {
    if (result !== 'deny' && result !== 'halt') return;
    if (capability === 'skill_read') {
      this.refusedIds.add(target);
      if (target.startsWith(SKILL_TARGET_PREFIX)) this.refusedIds.add(target.slice(SKILL_TARGET_PREFIX.length));
    } else if (capability === 'tool_call' && target === READ_SKILL) {
      this.gateClosed = true;
    }
  }
}

/** What the agent left out on the policy's word, measured as it left it out. */
export interface Savings {
  /** Characters of injections and tool definitions left out of model calls. */
  chars: number;
  /** Of those, the parked maps' injections: what shadow mode's riding finding counts. */
  predictedChars: number;
  /** The model calls something was left out of. */
  readonly passes: Set<number>;
}

/** The name of a tool definition in the OpenAI (`{type, function: {name}}`) or flat (`{name}`) shape. */
export function toolNameOf(definition: Readonly<Record<string, unknown>>): string | undefined {
  const fn = definition['function'];
  const name = fn !== null && typeof fn === 'object' ? (fn as Record<string, unknown>)['name'] : definition['name'];
  return typeof name === 'string' ? name : undefined;
}

/** The accepted picks of a stated call: its `picked` ones, else a `read_skill` call's `id` argument
 * unless the call failed or the gate refused it (the hop then told by the graph's edges). */
function picksOf(call: StatedCall): Array<{ skillId: string; hop: boolean | undefined }> {
  if (call.picks.length > 0) return call.picks;
  if (call.failed || call.name !== READ_SKILL || call.gateClosed) return [];
  const id = call.args['id'];
  return typeof id === 'string' && !call.refusedIds.has(id) ? [{ skillId: id, hop: undefined }] : [];
}

/** @internal The kernel's state for one run leg, advanced once per model call, in order. */
export class LivePolicy {
  readonly savings: Savings = { chars: 0, predictedChars: 0, passes: new Set() };
  private state: readonly EngagementRecord[] | undefined;
  private readonly passes: PassState[] = [];
  private readonly calls: StatedCall[] = [];

  constructor(
    readonly maps: readonly MountedMap[],
    readonly renewalGrace: number,
    private readonly edges: ReadonlySet<string> | undefined,
  ) {}

  /** The `{nodes, edges}` graph's edges as `from\u0000to` keys (malformed edges left out). */
  static edgesOf(graph: Readonly<Record<string, unknown>> | undefined): Set<string> | undefined {
    if (graph === undefined) return undefined;
    const edges = new Set<string>();
    const raw = graph['edges'];
    if (Array.isArray(raw)) {
      for (const edge of raw) {
        if (edge === null || typeof edge !== 'object') continue;
        const { from, to } = edge as Record<string, unknown>;
        if (typeof from === 'string' && typeof to === 'string') edges.add(`${from}\u0000${to}`);
      }
    }
    return edges;
  }

  passState(iteration: number): PassState {
    for (let i = this.passes.length - 1; i >= 0; i -= 1) if (this.passes[i]!.iteration === iteration) return this.passes[i]!;
    const state: PassState = {
      iteration,
      activeIds: [],
      servedIds: new Set(),
      injectedIds: [],
      leftOut: new Map(),
      cardRode: false,
      records: [],
      evaluations: [],
      written: false,
    };
    this.passes.push(state);
    return state;
  }

  toolCalled(call: StatedCall): void {
    this.calls.push(call);
  }

  /** Advance the kernel by pass `state` (once; later asks get the same answer). */
  decide(state: PassState): Decision {
    if (state.decision !== undefined) return state.decision;
    const earlier = this.passes.filter((p) => p.iteration < state.iteration);
    const previous = earlier.reduce<PassState | undefined>((a, p) => (a === undefined || p.iteration > a.iteration ? p : a), undefined);
    const served = previous === undefined ? [] : [...previous.activeIds];
    if (previous?.cardRode === true && !served.includes(PARK_CARD_ID)) served.push(PARK_CARD_ID);
    // The re-ask quirk: the latest batch dispatched before this pass, whichever pass asked for it.
    const asked = [...new Set(this.calls.map((c) => c.iteration))].filter((it) => it < state.iteration);
    const latest = asked.length > 0 ? Math.max(...asked) : undefined;
    const batch = this.calls.filter((c) => c.iteration === latest);
    const cursor = this.passes.find((p) => p.iteration === latest)?.move?.to;
    let pending: string | undefined;
    const accepted: string[] = [];
    for (const call of batch) {
      for (const { skillId, hop } of picksOf(call)) {
        if (!accepted.includes(skillId)) accepted.push(skillId);
        const hops = hop ?? (this.edges !== undefined && cursor !== undefined && this.edges.has(`${cursor}\u0000${skillId}`));
        if (hops) pending = skillId;
      }
    }
    const move = state.move;
    const pass: KernelPass = {
      iteration: state.iteration,
      ...(move?.to === undefined ? {} : { currentNode: move.to }),
      ...(move === undefined ? {} : { moveBy: move.by }),
      ...(move?.witness === undefined ? {} : { witness: move.witness.text }),
      toolResults: batch.map((c) => c.name),
      ...(pending === undefined ? {} : { pendingSkillPick: pending }),
      acceptedSkillPicks: accepted,
      servedLastPass: served,
    };
    const advance = advanceEngagement(this.maps, this.renewalGrace, this.state, pass);
    this.state = state.records = advance.next;
    state.decision = {
      iteration: state.iteration,
      parkedMaps: advance.next.filter((r) => r.standing === 'parked').map((r) => r.mapId),
      parkedInjectionIds: advance.parkedInjectionIds,
      parkedToolNames: advance.parkedToolNames,
      changes: advance.changes,
    };
    return state.decision;
  }

  /**
   * What the agent did on the pass, as engagement changes: the kernel's, except that a map it served
   * although the policy parked it was not parked by the agent (a park decided on this call is not
   * written; parked earlier, the agent re-engaged it on its own).
   */
  applied(state: PassState): EngagementChange[] {
    const decision = state.decision;
    if (decision === undefined) return [];
    const served = new Set([...state.activeIds, ...state.servedIds]);
    const ignored = new Set(
      this.maps.filter((m) => decision.parkedMaps.includes(m.id) && m.memberIds.some((id) => served.has(id))).map((m) => m.id),
    );
    const changes = decision.changes.filter((c) => !(c.kind === 'parked' && ignored.has(c.mapId)));
    const parkedNow = new Set(decision.changes.filter((c) => c.kind === 'parked').map((c) => c.mapId));
    for (const record of state.records) {
      if (ignored.has(record.mapId) && !parkedNow.has(record.mapId)) {
        changes.push({ kind: 'engaged', mapId: record.mapId, iteration: state.iteration, by: record.by, reengaged: true });
      }
    }
    return changes;
  }

  /** The evaluations of a closing pass, final: a parked member it did not inject is skipped. */
  finalEvaluations(state: PassState): Array<Record<string, unknown>> {
    const decision = state.decision!;
    return state.evaluations.splice(0).map((payload) => {
      const listed = payload['activeIds'] as string[];
      const active = listed.filter((id) => !decision.parkedInjectionIds.includes(id) || state.servedIds.has(id));
      state.activeIds = active;
      const skipped = payload['skippedDetails'] as Array<Record<string, unknown>>;
      return {
        ...payload,
        activeIds: active,
        skippedDetails: [...skipped, ...listed.filter((id) => !active.includes(id)).map((id) => ({ id, reason: 'parked' }))],
      };
    });
  }

  leftOut(iteration: number, chars: number, injection: boolean): void {
    this.savings.chars += chars;
    if (injection) this.savings.predictedChars += chars;
    this.savings.passes.add(iteration);
  }
}

function sameMove(a: CursorMove | undefined, b: CursorMove | undefined): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** The characters a tool definition takes in a request body (its compact JSON). */
export function definitionChars(definition: Readonly<Record<string, unknown>>): number {
  return [...JSON.stringify(definition)].length;
}

/** @internal One pass's side of the policy: what {@link ModelCall} delegates to in a policy run. */
export class PassPolicy {
  private plannedMove: CursorMove | undefined;

  constructor(
    private readonly live: LivePolicy,
    readonly state: PassState,
  ) {}

  get decision(): Decision | undefined {
    return this.state.decision;
  }

  plan(move: CursorMove | undefined): Decision {
    if (this.state.decision !== undefined && move !== undefined && !sameMove(move, this.plannedMove)) {
      throw new Error('plan() asked with another cursor move than this pass was decided on (by an earlier plan() or evaluated())');
    }
    return this.decide(move);
  }

  /** An evaluation of the pass: decided on its move (or the planned one), written when the pass closes. */
  evaluated(move: CursorMove | undefined, payload: Record<string, unknown>): void {
    if (this.state.decision !== undefined) {
      if (move === undefined) move = this.plannedMove;
      else if (!sameMove(move, this.plannedMove)) {
        throw new Error('evaluated() states another cursor move than plan() was asked with: the record would not be what the kernel decided on');
      }
    }
    this.decide(move);
    this.state.evaluations.push({ ...payload, cursorMove: move });
  }

  injected(source: string, sourceId: string | undefined): void {
    if (sourceId === undefined) return;
    const state = this.state;
    state.servedIds.add(sourceId);
    if (sourceId === PARK_CARD_ID) state.cardRode = true;
    else if (!CONVERSATION_SOURCES.has(source) && !state.injectedIds.includes(sourceId)) state.injectedIds.push(sourceId);
  }

  keep(injectionId: string, size: { content?: string; chars?: number }): boolean {
    const decision = this.asked();
    if (!decision.parkedInjectionIds.includes(injectionId)) return true;
    const chars = size.content !== undefined ? [...size.content].length : (size.chars ?? 0);
    this.state.leftOut.set(injectionId, chars); // counted when the pass closes
    return false;
  }

  tools<T extends Readonly<Record<string, unknown>>>(definitions: readonly T[]): T[] {
    const decision = this.asked();
    return definitions.filter((definition) => {
      const name = toolNameOf(definition);
      if (name === undefined || !decision.parkedToolNames.includes(name)) return true;
      this.live.leftOut(this.state.iteration, definitionChars(definition), false);
      return false;
    });
  }

  /** When the pass closes (once): its evaluations, final, then the changes the agent applied. */
  close(write: (eventType: 'evaluated' | 'change', payload: Record<string, unknown> | EngagementChange) => void): void {
    const state = this.state;
    if (state.written) return;
    if (state.decision === undefined) {
      this.decide(undefined); // every pass advances the kernel
    } else if (state.evaluations.length === 0) {
      // Asked with plan() and no evaluation stated: the pass served what it injected.
      state.evaluations.push({ iteration: state.iteration, activeIds: [...state.injectedIds], skippedDetails: [], cursorMove: this.plannedMove });
    }
    state.written = true;
    for (const payload of this.live.finalEvaluations(state)) write('evaluated', payload);
    // The injections left out, not those the pass injected after all.
    for (const [id, chars] of state.leftOut) if (!state.servedIds.has(id)) this.live.leftOut(state.iteration, chars, true);
    state.leftOut.clear();
    for (const change of this.live.applied(state)) write('change', change);
  }

  private asked(): Decision {
    const decision = this.state.decision;
    if (decision === undefined) throw new Error('ask the policy first: call plan() on this pass before keep()/tools()');
    return decision;
  }

  private decide(move: CursorMove | undefined): Decision {
    if (this.state.decision === undefined) {
      this.plannedMove = move;
      this.state.move = move;
      this.live.decide(this.state);
    }
    return this.state.decision!;
  }
}
