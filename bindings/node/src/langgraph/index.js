// convo/langgraph — ConvoSaver, a LangGraph.js checkpoint saver over a convo Store that keeps
// message channels in the thread's log. Imports @langchain/* (optional peers); the root does not.
export { ConvoSaver } from './saver.js';
