// The scenario the Node.js agents (openai_agent.mjs, agents_sdk_agent.mjs) and the Python agent of
// tests/e2e/test_node_openai.py share: the stuck turn, shorter. The skill map [zone-audit, run-finder]
// owns get_zone_info; pass 1 places the cursor on zone-audit by an entry rule (witness "zone"), later
// passes stay; the model only ever calls screen_open, then answers. Shadow mode: the map should park on
// pass 4 (renewal grace 3) and zone-audit keeps riding on.

export const SCENARIO = Object.freeze({
  agent: 'openai-agent',
  userPrompt: 'find the most recent zone redundancy run',
  basePrompt: 'You help people find and audit things.',
  skill: 'zone-audit',
  members: ['zone-audit', 'run-finder'],
  skillBody: 'ZONE AUDIT PROCEDURE: call get_zone_info, classify single-path hosts.',
  toolRows: [
    ['screen_open', 'Open a screen and look at it.'],
    ['read_skill', 'Activate a skill for the next iteration.'],
    ['get_zone_info', 'Zone redundancy audit data.'],
  ],
  zoneTool: 'get_zone_info',
  toolResult: 'screen shows: runs list',
  graph: {
    nodes: [
      { id: 'zone-audit', kind: 'skill' },
      { id: 'run-finder', kind: 'skill' },
    ],
    edges: [
      { from: null, to: 'zone-audit', kind: 'entry' },
      { from: 'zone-audit', to: 'run-finder', kind: 'model' },
    ],
  },
});

/** The tools every pass offers the model, as the OpenAI chat request's `tools` (the Python agent of
 * tests/e2e/node_agents.py sends, and states, this very list). */
export function requestTools() {
  return SCENARIO.toolRows.map(([name, description]) => ({
    type: 'function',
    function: { name, description, parameters: { type: 'object', properties: {} } },
  }));
}

/** The options of the scenario's run (the recorder's `run`) for `tracer`, shadow mode. */
export function runOptions(tracer, runId) {
  const S = SCENARIO;
  return {
    tracer,
    agent: S.agent,
    runId,
    maps: [{ id: 'skill-map', memberIds: S.members, toolNames: [S.zoneTool] }],
    renewalGrace: 3,
    enforced: false,
    userPrompt: S.userPrompt,
    graph: S.graph,
  };
}

/** What goes into pass `iteration`, stated on `pass` (a recorder ModelCall) before the model call. */
export function statePass(pass, iteration) {
  const S = SCENARIO;
  if (iteration === 1) {
    pass.evaluated([S.skill], { cursorTo: S.skill, movedBy: 'entry', witness: 'zone', witnessKeyword: 'zone' });
  } else {
    pass.evaluated([S.skill], { cursorTo: S.skill, cursorFrom: S.skill, movedBy: 'stay' });
  }
  pass.injected('system-prompt', 'base', { content: S.basePrompt });
  pass.injected('system-prompt', 'skill', { sourceId: S.skill, content: S.skillBody });
  pass.composed('system-prompt');
  for (const [name, description] of S.toolRows) pass.injected('tools', 'registry', { sourceId: name, content: description });
  pass.injected('tools', 'skill', { sourceId: S.skill, content: `${S.zoneTool}: zone audit data` });
  pass.composed('tools');
}
