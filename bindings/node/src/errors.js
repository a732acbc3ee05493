// errors.js — one ConvoError subclass per CONVO_E* code, each carrying the code,
// its name, the backend's own code (SQLSTATE, SQLite result code, ...) and the message.

export const codes = {
  ERROR: -1, EINVAL: -2, ENOTFOUND: -3, ECONFLICT: -4, ETOOLARGE: -5,
  EIO: -6, ETIMEOUT: -7, ENOMEM: -8, ENOTSUP: -9, ECORRUPT: -10,
};
const names = Object.fromEntries(Object.entries(codes).map(([k, v]) => [v, 'CONVO_' + k]));

export class ConvoError extends Error {
  constructor(code, message, backendCode = '') {
    super(backendCode ? `${message} [${backendCode}]` : message);
    this.name = this.constructor.name;
    this.code = code;
    this.codeName = names[code] ?? String(code);
    this.backendCode = backendCode;
  }
}
export class InvalidError extends ConvoError {}
export class NotFoundError extends ConvoError {}
export class ConflictError extends ConvoError {}
export class TooLargeError extends ConvoError {}
export class BackendError extends ConvoError {}
export class TimeoutError extends ConvoError {}
export class NoMemoryError extends ConvoError {}
export class NotSupportedError extends ConvoError {}
export class CorruptError extends ConvoError {}

const classes = {
  [codes.EINVAL]: InvalidError, [codes.ENOTFOUND]: NotFoundError,
  [codes.ECONFLICT]: ConflictError, [codes.ETOOLARGE]: TooLargeError,
  [codes.EIO]: BackendError, [codes.ETIMEOUT]: TimeoutError, [codes.ENOMEM]: NoMemoryError,
  [codes.ENOTSUP]: NotSupportedError, [codes.ECORRUPT]: CorruptError,
};

// The error for a failed call: rc and the filled convo_error (its code wins when set).
export function fromCall(rc, err, strerror) {
  const code = err && err.code ? err.code : rc;
  const message = (err && err.message) || strerror(code) || `convo error ${code}`;
  const Cls = classes[code] ?? ConvoError;
  return new Cls(code, message, (err && err.backend_code) || '');
}
