/**
 * Adapters for agent frameworks whose loop makes the model calls itself, so the agent's own code
 * does not run between two calls. They state each pass on the run right before the framework calls
 * the model; the framework's instrumentation span then takes it (through the span-start hook). No
 * framework is imported here: the adapters are plain functions of the shapes the frameworks take.
 *
 * The OpenAI Agents SDK (`@openai/agents`, traced by `@arizeai/openinference-instrumentation-openai-agents`):
 * its `callModelInputFilter` runs right before each model call (the JavaScript SDK has no
 * `on_llm_start` hook; the Python adapter, `otel_footprint.integrations.openai_agents`, uses that).
 */

import { context as contextApi } from '@opentelemetry/api';

import { type ModelCall, RUN_CONTEXT_KEY, type Run } from './recorder.js';

/** The innermost run open in the active context (the Python recorder's `current_run()`). */
export function currentRun(): Run | undefined {
  // Duck-typed, not instanceof: two copies of this package in one process share the context key.
  const found = contextApi.active().getValue(RUN_CONTEXT_KEY) as Run | undefined;
  return typeof found?.nextPass === 'function' ? found : undefined;
}

const NO_SPAN =
  "the Agents SDK's model call ran and no model-call span took its pass (is its OpenInference " +
  "instrumentation on, with a tracer provider that has footprintHook()?)";

/** What the Agents SDK is about to send the model (its `ModelInputData`, and the agent). */
export interface AgentsModelCall {
  /** The `Agent` making the call (`agent.name`). */
  readonly agent: unknown;
  readonly instructions: string | undefined;
  readonly input: readonly unknown[];
}

/** The Agents SDK's `callModelInputFilter` argument and result, as far as the adapter reads them. */
export interface ModelInputData {
  input: unknown[];
  instructions?: string;
}
export interface CallModelInputFilterArgs {
  modelData: ModelInputData;
  agent: unknown;
  context: unknown;
}

/**
 * A `callModelInputFilter` for `run(agent, input, { callModelInputFilter })` (or the Runner's config)
 * that calls `statePass(run.nextPass(), call)` before each model call and passes the input on
 * unchanged. `run`: the footprint run (default: the one open where the SDK runs); `wrapped`: a filter
 * of your own, applied first (the pass describes what it returns).
 */
export function footprintCallModelInputFilter(
  statePass: (pass: ModelCall, call: AgentsModelCall) => void,
  options: { run?: Run; wrapped?: (args: CallModelInputFilterArgs) => ModelInputData | Promise<ModelInputData> } = {},
): (args: CallModelInputFilterArgs) => Promise<ModelInputData> {
  // The pass stated for the previous model call: still staged when the next call comes, it found no
  // span (no instrumentation, or one without the hook), and is given up then, not at the run's end.
  let previous: { run: Run; pass: ModelCall } | undefined;
  return async (args) => {
    if (previous !== undefined) previous.run.giveUp(previous.pass, NO_SPAN);
    previous = undefined;
    const target = options.run ?? currentRun();
    if (target === undefined) {
      throw new Error(
        'footprintCallModelInputFilter: no footprint run is open around the Agents SDK run ' +
          '(call it inside run(options, async (run) => ...), or pass { run })',
      );
    }
    const modelData = options.wrapped === undefined ? args.modelData : await options.wrapped(args);
    const pass = target.nextPass();
    previous = { run: target, pass };
    statePass(pass, { agent: args.agent, instructions: modelData.instructions, input: [...modelData.input] });
    return modelData;
  };
}
