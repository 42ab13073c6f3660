#!/usr/bin/env bash
# Builds another commit of this repository beside it, for a benchmark that compares two builds in one run
# (`BENCH_CHAT_COMPARE=$(bash hack/bench-build-at.sh <commit>) npm run bench -- chat`): figures from two runs on
# this machine differ by more than a small change does, figures measured round by round in one run do not.
# Prints the directory of the build. The build shares this checkout's installed packages (node_modules), so the
# commit must use the same package-lock.json; its own workspace packages are its own.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
commit="$(git -C "$here" rev-parse --verify "${1:?usage: hack/bench-build-at.sh <commit>}^{commit}")"
if ! git -C "$here" diff --quiet "$commit" -- package-lock.json; then
  echo "commit ${commit:0:12} has another package-lock.json: install it in a checkout of its own" >&2
  exit 1
fi
cache="${AGENTPLANE_CACHE:-/var/cache/agentplane}/bench-builds"
dir="$cache/${commit:0:12}"
mkdir -p "$cache"
if [ ! -f "$dir/.built" ]; then
  rm -rf "$dir"
  git -C "$here" archive --prefix="${commit:0:12}/" "$commit" | tar -x -C "$cache"
  # Every installed package, except the workspace's own, which are the commit's.
  mkdir -p "$dir/node_modules/@agentplane"
  for entry in "$here"/node_modules/* "$here"/node_modules/.bin; do
    name="$(basename "$entry")"
    [ "$name" = "@agentplane" ] || ln -s "$entry" "$dir/node_modules/$name"
  done
  for package in "$here"/node_modules/@agentplane/*; do
    name="$(basename "$package")"
    ln -s "../../$name" "$dir/node_modules/@agentplane/$name"
  done
  (cd "$dir" && PATH="$(bash "$here/hack/node.sh"):$PATH" npm run --silent build >&2)
  touch "$dir/.built"
fi
echo "$dir"
