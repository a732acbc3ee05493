// library.test.mjs — where libconvo is looked for (src/internal/library.js): CONVO_LIBRARY
// alone when set; else this build tree, the libdir of the convo.pc that pkg-config finds
// (where `make install` put the library), /usr/local/lib, then the loader's own path.
// test/package.test.mjs checks the error of an installed package that finds none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { candidates } from '../src/internal/library.js';

const srcdir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const env = { PATH: process.env.PATH };

test('CONVO_LIBRARY is the only path tried when set', () => {
  assert.deepEqual([...candidates({ ...env, CONVO_LIBRARY: '/opt/x/libconvo.so' })], ['/opt/x/libconvo.so']);
});

test('without it: the build tree, /usr/local/lib, then the soname', () => {
  assert.deepEqual([...candidates({ ...env, PKG_CONFIG_PATH: '', PKG_CONFIG_LIBDIR: '/nonexistent' })], [
    path.join(srcdir, '.libs', 'libconvo.so'), '/usr/local/lib/libconvo.so.0', 'libconvo.so.0',
  ]);
});

test('the libdir of an installed convo.pc (make install --prefix) comes before /usr/local/lib', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'convo-pc-'));
  try {
    writeFileSync(path.join(dir, 'convo.pc'), `prefix=${dir}\nlibdir=\${prefix}/lib64\n` +
      'Name: convo\nDescription: conversation threads\nVersion: 0.1.0\nLibs: -L${libdir} -lconvo\n');
    assert.deepEqual([...candidates({ ...env, PKG_CONFIG_PATH: dir })], [
      path.join(srcdir, '.libs', 'libconvo.so'), path.join(dir, 'lib64', 'libconvo.so.0'),
      '/usr/local/lib/libconvo.so.0', 'libconvo.so.0',
    ]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
