// convo/langchain — ConvoChatMessageHistory, a LangChain.js chat message history over a convo
// thread. Imports @langchain/core (an optional peer); the root does not.
export { ConvoChatMessageHistory } from './history.js';
