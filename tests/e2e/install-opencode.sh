#!/usr/bin/env bash
# Installs what the end-to-end tests in tests/e2e/ need, idempotently:
#   * the genuine OpenCode CLI, npm package opencode-ai@1.18.33, into .cache/opencode-ai/
#     (a throw-away prefix that git ignores; the tests find it there, or use $OPENCODE_BIN);
#   * ripgrep (`rg`) with apt-get when it is missing: without it OpenCode's grep and glob
#     tools try to download ripgrep at run time.
# Usage: tests/e2e/install-opencode.sh      (from anywhere; needs npm, and root or sudo for apt-get)
# Env:   OPENCODE_PREFIX overrides the prefix.
set -euo pipefail
version=1.18.33
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="${OPENCODE_PREFIX:-$root/.cache/opencode-ai}"
bin="$prefix/bin/opencode"

if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null || true)" = "$version" ]; then
    echo "opencode $version already in $prefix"
else
    command -v npm >/dev/null || { echo "npm is needed to install opencode-ai" >&2; exit 1; }
    start=$(date +%s)
    npm install --global --prefix "$prefix" --no-fund --no-audit --loglevel=error "opencode-ai@$version"
    echo "opencode $("$bin" --version) installed in $prefix ($(( $(date +%s) - start )) s)"
fi

if ! command -v rg >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
        sudo apt-get update -qq && sudo apt-get install -y -qq ripgrep >/dev/null
    else
        echo "ripgrep (rg) is missing: install it (e.g. sudo apt-get install ripgrep)" >&2
        exit 1
    fi
    echo "ripgrep $(rg --version | head -n1) installed"
fi
