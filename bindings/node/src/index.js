// index.js — the convo package: Store (libconvo's calls as Promises), ConvoSaver
// (a LangGraph checkpoint saver keeping message channels in the thread's log), errors.
export { Store } from './store.js';
export * from './errors.js';
export { ConvoSaver } from './saver.js';
