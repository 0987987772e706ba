#!/usr/bin/env bash
# The suite on another Node line: `npm run test:node -- 22 [vitest arguments]` (e.g. `-- 24 test/unit`).
# The npm registry ships Node itself as the package `node`: the line is installed once under
# node_modules/.cache/node/<line> and put first on PATH, so vitest, tsx and every process a test spawns run on it.
set -euo pipefail
cd "$(dirname "$0")/.."
line="${1:?usage: npm run test:node -- <22|24> [vitest arguments]}"
shift
dir="node_modules/.cache/node/${line}"
if [ ! -x "${dir}/node_modules/node/bin/node" ]; then
  npm install --prefix "${dir}" --no-save --no-package-lock --prefer-offline --no-audit --no-fund "node@${line}" >&2
fi
export PATH="${PWD}/${dir}/node_modules/node/bin:${PATH}"
echo "node $(node --version)" >&2
# As `npm test` does: dist/ built on that line, and the processes the tests start run from it (testkit/spawnModule.ts).
npm run build --silent
SPAWN_COMPILED=1 exec npx vitest run "$@"
