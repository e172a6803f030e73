/**
 * The adapter for the Vercel AI SDK (`ai`, versions 4 to 6, `generateText` / `streamText` with
 * `experimental_telemetry`). The SDK's loop makes the model calls itself, one per step: its
 * `prepareStep` option runs right before each step's model call, `onStepFinish` right after it.
 * {@link footprintSteps} gives both: `prepareStep` states the step's pass on the run (staged; the
 * span-start hook lands it on the SDK's own `ai.generateText.doGenerate` / `ai.streamText.doStream`
 * span, recognised by its `ai.operationId`), and `onStepFinish` gives the pass up at once when no
 * span took it (telemetry off, or a tracer provider without the hook), so `run.unattached` and
 * `run.iteration` are right while the SDK still runs. No `ai` import: plain functions of the shapes
 * the SDK passes.
 *
 * ```ts
 * await generateText({ model, tools, prompt, stopWhen: stepCountIs(8),
 *   experimental_telemetry: { isEnabled: true, tracer },
 *   ...footprintSteps((pass, step) => pass.evaluated([skill])) });
 * ```
 */

import { type ModelCall, type Run } from './recorder.js';
import { currentRun } from './integrations.js';

/** What the SDK passes `prepareStep`, as far as the adapter reads it (`stepNumber` from 0). */
export interface AiSdkStep {
  readonly stepNumber: number;
  readonly messages?: readonly unknown[];
  readonly model?: unknown;
  readonly steps?: readonly unknown[];
}

/** The two options {@link footprintSteps} returns, spread into `generateText` / `streamText`. */
export interface FootprintSteps<P, R> {
  prepareStep(step: AiSdkStep): Promise<P | undefined>;
  onStepFinish(result: R): Promise<void>;
}

/** Why a step's pass found no span (said in the run's `unattached-pass` problem). */
const NO_SPAN =
  'the AI SDK step ended and no model-call span took its pass (is experimental_telemetry on, with a ' +
  'tracer whose provider has footprintHook()?)';

/**
 * `prepareStep` and `onStepFinish` for the AI SDK that call `statePass(run.nextPass(), step)` before
 * each step's model call. `run`: the footprint run (default: the one open where the SDK runs);
 * `prepareStep` / `onStepFinish`: your own, called after the adapter's (the value your
 * `prepareStep` returns is what the SDK gets).
 */
export function footprintSteps<P = unknown, R = unknown>(
  statePass: (pass: ModelCall, step: AiSdkStep) => void,
  options: {
    run?: Run;
    prepareStep?: (step: AiSdkStep) => P | undefined | PromiseLike<P | undefined>;
    onStepFinish?: (result: R) => void | PromiseLike<void>;
  } = {},
): FootprintSteps<P, R> {
  let target: Run | undefined;
  let staged: ModelCall | undefined;
  const giveUp = (): void => {
    if (target !== undefined && staged !== undefined) target.giveUp(staged, NO_SPAN);
    staged = undefined;
  };
  return {
    async prepareStep(step) {
      giveUp(); // a step before this one that did not finish through onStepFinish
      target = options.run ?? currentRun();
      if (target === undefined) {
        throw new Error(
          'footprintSteps: no footprint run is open around the AI SDK call ' +
            '(call it inside run(options, async (run) => ...), or pass { run })',
        );
      }
      staged = target.nextPass();
      statePass(staged, step);
      return options.prepareStep === undefined ? undefined : await options.prepareStep(step);
    },
    async onStepFinish(result) {
      giveUp(); // a no-op when the step's model-call span took the pass
      if (options.onStepFinish !== undefined) await options.onStepFinish(result);
    },
  };
}
