#!/bin/sh
# The container image's entrypoint: runs one of agentplane's programs, named by the first argument, as PID 1 (exec,
# so SIGTERM reaches the program and its drain), from the compiled JavaScript in each package's dist/. Also works
# from a checkout after `npm run build`: `hack/entrypoint.sh runtime`.
set -eu

usage() {
  echo "usage: entrypoint.sh control-api|runtime|operator|migrate|fire|browser|all-in-one [args...]" >&2
  exit 64
}

[ $# -ge 1 ] || usage
program=$1
shift
# V8 flags per program. The operator's work comes in bursts of JSON (a hundred Projects at once), after which V8
# kept young-generation semi-spaces of up to 32 MiB and the old space they promoted into: 2 MiB semi-spaces hold its
# RSS after a 100-Project burst at 1.2x its idle RSS instead of 2x, at the same pace (docs/benchmarks.md). Optimizing
# for size grows its heap in smaller steps and lets V8 hand the burst's pages back 8 s after it: 1.37x its idle RSS
# after 1,000 Projects instead of 1.68x, at the same pace (decision 0067).
flags=
# 8 MiB semi-spaces instead of V8's 16: 60-150 MiB less RSS after 1,000-20,000 turns under sixteen clients, the same
# turns per second (decision 0051). For whatever serves turns: the runtime, and npm start's all-in-one.
runtime_flags=--max-semi-space-size=8
case "$program" in
  control-api) main=control-api/dist/main.js ;;
  runtime) main=runtime/dist/main.js flags=$runtime_flags ;;
  operator)
    main=operator/dist/main.js flags="--max-semi-space-size=2 --optimize-for-size"
    # Two malloc arenas instead of glibc's eight per core, for a single-threaded program that allocates in bursts:
    # lower RSS after a 1,000-Project burst in the runs made, though they vary widely (docs/benchmarks.md).
    export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
    ;;
  migrate) main=runtime/dist/migrate.js ;;
  # `npm start` in a checkout (the image does not carry it): both planes in one process on embedded defaults, with
  # the runtime's flags and allocator.
  all-in-one) main=all-in-one/dist/main.js flags=$runtime_flags ;;
  # A scheduled task's CronJob Job: asks the runtime to fire the Job's slot, then exits (decision 0066).
  fire) main=runtime/dist/fire.js ;;
  # The browser Pod's server (decision 0092): Chromium behind Playwright's browser server and the egress guard. Its
  # image is the `browser` stage of the Dockerfile, which adds Debian's chromium.
  browser) main=runtime/dist/browsers/server/main.js ;;
  *) usage ;;
esac

# jemalloc instead of glibc's malloc where the image (or the system) has it (AGENTPLANE_MALLOC=glibc keeps glibc's): it hands freed
# memory back to the system, where glibc's arenas kept it after bursts. The runtime's RSS after 10,000 turns on the
# embedded store measured 1.0-1.1x its RSS after 1,000 with it, 1.25x without (docs/benchmarks.md, decision 0051).
if [ "${AGENTPLANE_MALLOC:-jemalloc}" = jemalloc ] && [ -z "${LD_PRELOAD:-}" ]; then
  for lib in /usr/local/lib/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/aarch64-linux-gnu/libjemalloc.so.2; do
    if [ -f "$lib" ]; then
      export LD_PRELOAD="$lib"
      break
    fi
  done
fi

# From the app's root, as npm scripts run: the default data dir resolves there.
cd -- "$(dirname -- "$0")/.."
if [ ! -f "$main" ]; then
  echo "entrypoint.sh: $main is missing; build it first with 'npm run build'" >&2
  exit 66
fi
# shellcheck disable=SC2086 # flags is a list of words
exec node $flags "$main" "$@"
