// `prepare`: runs on `npm install` here, and when another project installs this directory
// (`npm install path/to/clients/node`), which links it as it is: without `dist` it could
// not be loaded. Builds `dist` with the dev-dependency `typescript`, installing the
// dev-dependencies first when they are missing (as in a fresh checkout). Leaves a `dist`
// newer than `src` as it is.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const hasTypescript = () => {
  try {
    createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');
    return true;
  } catch {
    return false;
  }
};
const built = ['esm', 'cjs'].map((f) => join(root, 'dist', f, 'index.js'));
const haveDist = built.every((f) => existsSync(f));
if (haveDist) {
  // Nothing to do when `dist` is newer than every source.
  const sources = readdirSync(join(root, 'src')).map((f) => join(root, 'src', f));
  const newest = Math.max(...sources.map((f) => statSync(f).mtimeMs));
  if (built.every((f) => statSync(f).mtimeMs >= newest)) process.exit(0);
}
if (!hasTypescript()) {
  if (haveDist) process.exit(0);
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm ? [process.execPath, [npm]] : ['npm', []];
  execFileSync(cmd, [...args, 'install', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund', '--include=dev'], {
    cwd: root,
    stdio: 'inherit',
  });
}
execFileSync(process.execPath, [join(root, 'scripts', 'build.mjs')], { stdio: 'inherit' });
