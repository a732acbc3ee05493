// convo/openai-agents — ConvoSession, a Session of the OpenAI Agents SDK (@openai/agents)
// kept in a convo thread. It needs no module of the SDK at run time (the SDK finds a
// session's capabilities by duck typing); its types (index.d.ts) are the SDK's.
export { ConvoSession } from './session.js';
