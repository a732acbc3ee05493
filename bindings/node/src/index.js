// index.js — the convo package's root: Store (libconvo's calls as Promises) and the errors.
// It imports no framework; each framework's adapter is its own subpath (convo/langgraph).
export { Store } from './store.js';
export {
  codes, ConvoError, InvalidError, NotFoundError, ConflictError, TooLargeError, BackendError,
  TimeoutError, NoMemoryError, NotSupportedError, CorruptError,
} from './errors.js';
