// The package as another project gets it: `npm install path/to/clients/node`, then
// `require`, `import` and TypeScript's types from that project.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { here } from './daemon.mjs';

const pkg = join(here, '..');

function npm(args, cwd) {
  const [cmd, pre] = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ['npm', []];
  return execFileSync(cmd, [...pre, ...args], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

test('installed from its directory into another project: require, import and types', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'genward-node-install-'));
  try {
    writeFileSync(join(dir, 'package.json'), '{ "name": "app", "version": "1.0.0", "private": true }\n');
    npm(['install', '--offline', '--no-audit', '--no-fund', pkg], dir);
    const names = (js, type) =>
      execFileSync(process.execPath, ['--input-type=' + type, '-e', js], { cwd: dir, encoding: 'utf8' }).trim();
    const cjs = names("const g = require('genward'); console.log(typeof g.Client, typeof g.StaleGenerationError)", 'commonjs');
    const esm = names("import { Client, StaleGenerationError } from 'genward'; console.log(typeof Client, typeof StaleGenerationError)", 'module');
    assert.equal(cjs, 'function function');
    assert.equal(esm, 'function function');

    const tsc = createRequire(join(pkg, 'package.json')).resolve('typescript/bin/tsc');
    writeFileSync(
      join(dir, 'app.ts'),
      [
        "import { Client, SpawnFailedError, type ExitInfo, type SessionInfo } from 'genward';",
        'export async function main(): Promise<number | null> {',
        '  const c = await Client.connect({ connectTimeout: 1000 });',
        "  const h = await c.spawn('x', ['true'], { cols: 80, rows: 24 });",
        '  h.onData((b: Buffer) => b.length);',
        '  const e: ExitInfo = await h.wait();',
        '  const l: SessionInfo[] = await c.list();',
        '  void l; void SpawnFailedError;',
        '  return e.code;',
        '}',
      ].join('\n'),
    );
    for (const [module, resolution] of [['NodeNext', 'NodeNext'], ['CommonJS', 'Node10']]) {
      const config = {
        compilerOptions: { strict: true, noEmit: true, module, moduleResolution: resolution, target: 'ES2022', types: ['node'], typeRoots: [join(pkg, 'node_modules', '@types')] },
        files: ['app.ts'],
      };
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config));
      execFileSync(process.execPath, [tsc, '-p', dir], { cwd: dir, encoding: 'utf8' });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
