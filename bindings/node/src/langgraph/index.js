// convo/langgraph — ConvoSaver, a LangGraph.js checkpoint saver over a convo Store that keeps
// message channels in the thread's log. The only module that imports @langchain/*.
export { ConvoSaver } from './saver.js';
