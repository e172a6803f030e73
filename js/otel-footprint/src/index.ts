/**
 * `@otel-footprint/recorder`: record what went into each model call of a Node.js agent as the
 * otel_footprint input schema (span events, or log records), byte-compatible with the Python
 * recorder. See docs/javascript.md of the repository.
 */

export {
  type Json,
  type JsonObject,
  type Payload,
  encodePayload,
  encodeValue,
  eventNameOf,
  fieldAttribute,
  pythonJson,
  snakeCase,
} from './codec.js';
export { type AiSdkStep, type FootprintSteps, footprintSteps } from './aiSdk.js';
export { FootprintSpanProcessor, footprintHook, isModelCallSpan } from './hook.js';
export { type Decision, type Savings, advanceEngagement, strengthOfMove, toolNameOf } from './policy.js';
export {
  type AgentsModelCall,
  type CallModelInputFilterArgs,
  type ModelInputData,
  currentRun,
  footprintCallModelInputFilter,
} from './integrations.js';
export {
  DEFAULT_RENEWAL_GRACE,
  type ColumnSpec,
  type ColumnType,
  type ContextErrorOptions,
  type DeclareToolOptions,
  type EmitAs,
  type EngagementChange,
  type EvaluatedOptions,
  type EvidenceGrounding,
  type FrameOptions,
  type InjectedOptions,
  type IntegritySettingsOptions,
  type LogEmitter,
  ModelCall,
  type ModelCallOptions,
  type MountedMap,
  PlanError,
  type ResultShape,
  type RoutedOptions,
  Run,
  type RunOptions,
  SCOPE_NAME,
  ToolCall,
  type ToolCallOptions,
  type ToolSemanticsOptions,
  VERSION,
  emit,
  run,
  startRun,
} from './recorder.js';
export { LLM_REQUEST_TYPE_MODEL_CALLS, MODEL_CALL_OPERATIONS, type NameKey, names } from './semconv.js';
