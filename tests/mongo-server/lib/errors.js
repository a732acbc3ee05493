'use strict';
// A server error with a MongoDB error code; turned into {ok:0, code, ...}
// replies or into writeErrors entries.

class CommandError extends Error {
  constructor(code, message, codeName, extra) {
    super(message);
    this.code = code;
    this.codeName = codeName || 'BadValue';
    this.extra = extra || {};
  }

  /** Fields for a top-level error reply. */
  toReply() {
    return { ok: 0, errmsg: this.message, code: this.code, codeName: this.codeName, ...this.extra };
  }

  /** Entry for a writeErrors array. */
  toWriteError(index) {
    return { index, code: this.code, codeName: this.codeName, errmsg: this.message, ...this.extra };
  }
}

module.exports = { CommandError };
