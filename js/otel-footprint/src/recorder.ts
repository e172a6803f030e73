/**
 * The agent-side recorder for Node.js: GenAI run / model-call / tool spans carrying footprint events,
 * written through the OpenTelemetry API as span events (default) or as log records tied to the span.
 *
 * The same concepts, names and payloads as the Python recorder (`otel_footprint/record/recorder.py`):
 * for the same calls both write the same span-event names and attributes (checked by the vectors in
 * `vectors/recorder.json`, generated from Python). Python's `with` blocks are callbacks here
 * (`run(options, async (run) => ...)`, `run.modelCall(model, {}, (call) => ...)`) or explicit
 * `start*()` / `end()` pairs.
 *
 * With an instrumentation that makes the model-call spans (OpenTelemetry's, OpenInference's,
 * OpenLLMetry's, the OpenAI Agents SDK's), install {@link FootprintSpanProcessor} (`footprintHook()`):
 * what the agent states on the run (`run.evaluated(...)`, `run.injected(...)`, or inside
 * `run.modelCall`) is attached to the model-call span the instrumentation starts next inside the run,
 * with `footprint.pass.iteration`, and the recorder makes no span of its own. The semantics are those
 * of issue 10's Python recorder (`otel_footprint/record/attach.py`).
 *
 * This module gathers the recorder's modules and exports what it exported when it was one file:
 * `run.ts` (the run leg, its hook entry points, `run()` / `startRun()`; the integrity declarations
 * are its methods), `modelCall.ts` (a pass), `toolCall.ts` (a tool span), `plan.ts` (mounted maps,
 * engagement changes), `integrity.ts` (the declarations' options, result columns), `emitter.ts`
 * (span events or log records, `emit()`), `context.ts` (context keys, the hook registry) and
 * `support.ts` (shared helpers). The live policy (`policy.ts`, enforce mode with `policy: true`) is
 * hooked in where its facts are stated: `run.ts` (`startRun`, `plan` / `keep` / `tools`, the savings
 * on the run span), `modelCall.ts` (a pass's policy) and `toolCall.ts` (what a call states to it).
 */

export { SCOPE_NAME, VERSION } from './support.js';
export { DEFAULT_RENEWAL_GRACE, type MountedMap, type EngagementChange, PlanError } from './plan.js';
export { type EmitAs, type LogEmitter, emit } from './emitter.js';
export { RUN_CONTEXT_KEY, OWN_SPAN_CONTEXT_KEY, registerHook, type ModelSpanSink } from './context.js';
export { type EvaluatedOptions, type InjectedOptions, type ModelCallOptions, ModelCall } from './modelCall.js';
export { type ToolCallOptions, ToolCall } from './toolCall.js';
export {
  type ResultShape,
  type ColumnType,
  type ColumnSpec,
  type DeclareToolOptions,
  type IntegritySettingsOptions,
  type ContextErrorOptions,
  type EvidenceGrounding,
  type ToolSemanticsOptions,
  type FrameOptions,
} from './integrity.js';
export { type RoutedOptions, type RunOptions, Run, startRun, run } from './run.js';
