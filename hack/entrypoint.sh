#!/bin/sh
# The container image's entrypoint: runs one of agentplane's programs, named by the first argument, as PID 1 (exec,
# so SIGTERM reaches the program and its drain), from the compiled JavaScript in each package's dist/. Also works
# from a checkout after `npm run build`: `hack/entrypoint.sh runtime`.
set -eu

usage() {
  echo "usage: entrypoint.sh control-api|runtime|operator|migrate [args...]" >&2
  exit 64
}

[ $# -ge 1 ] || usage
program=$1
shift
# V8 flags per program. The operator's work comes in bursts of JSON (a hundred Projects at once), after which V8
# kept young-generation semi-spaces of up to 32 MiB and the old space they promoted into: 2 MiB semi-spaces hold its
# RSS after a 100-Project burst at 1.2x its idle RSS instead of 2x, at the same pace (docs/benchmarks.md).
flags=
case "$program" in
  control-api) main=control-api/dist/main.js ;;
  runtime) main=runtime/dist/main.js ;;
  operator)
    main=operator/dist/main.js flags=--max-semi-space-size=2
    # Two malloc arenas instead of glibc's eight per core, for a single-threaded program that allocates in bursts:
    # lower RSS after a 1,000-Project burst in the runs made, though they vary widely (docs/benchmarks.md).
    export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
    ;;
  migrate) main=runtime/dist/migrate.js ;;
  *) usage ;;
esac

# From the app's root, as npm scripts run: the default data dir resolves there.
cd -- "$(dirname -- "$0")/.."
if [ ! -f "$main" ]; then
  echo "entrypoint.sh: $main is missing; build it first with 'npm run build'" >&2
  exit 66
fi
# shellcheck disable=SC2086 # flags is a list of words
exec node $flags "$main" "$@"
