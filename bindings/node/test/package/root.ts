// root.ts — a user's program of the package's root, in a project where no framework is
// installed (test/package.test.mjs): type-checked with no @types/node, compiled, run.
import { Store, ConvoError, ConflictError, codes, type LoadedMessage } from 'convo';

async function main(): Promise<string[]> {
  const out: string[] = [];
  const store = await Store.open('sqlite:root.db');
  const batch = [{ role: 'user', content: 'hi' }, '{"role":"assistant","content":"hello"}'];
  const r = await store.append('t', batch, { idempotencyKey: 'k1' });
  out.push(`append ${r.firstSeq} ${r.count} ${r.replayed}`);
  out.push(`replayed ${(await store.append('t', batch, { idempotencyKey: 'k1' })).replayed}`);
  const h = await store.load('t');
  out.push(h.messages.map((m: LoadedMessage) => m.role).join(','));
  try {
    await store.append('t', ['{"role":"user","content":"late"}'], { expectedLength: 0 });
  } catch (e) {
    if (e instanceof ConflictError && e.code === codes.ECONFLICT) out.push(e.codeName);
  }
  const dump: Uint8Array = await store.export(['t']);
  out.push(`dump ${dump.length > 0}`);
  await store[Symbol.asyncDispose]();
  try {
    await store.load('t');
  } catch (e) {
    if (e instanceof ConvoError) out.push(`closed ${e.codeName}`);
  }
  return out;
}

main().then((out) => console.log(out.join('\n')));
