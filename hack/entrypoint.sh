#!/bin/sh
# The container image's entrypoint: runs one of agentplane's programs, named by the first argument, as PID 1 (exec,
# so SIGTERM reaches the program and its drain). Also works from a checkout: `hack/entrypoint.sh runtime`.
set -eu

usage() {
  echo "usage: entrypoint.sh control-api|runtime|operator|migrate [args...]" >&2
  exit 64
}

[ $# -ge 1 ] || usage
program=$1
shift
case "$program" in
  control-api) main=control-api/src/main.ts ;;
  runtime) main=runtime/src/main.ts ;;
  operator) main=operator/src/main.ts ;;
  migrate) main=runtime/src/migrate.ts ;;
  *) usage ;;
esac

# From the app's root, as npm scripts run: `--import tsx` resolves there, and so does the default data dir.
cd -- "$(dirname -- "$0")/.."
# tsx as a loader rather than its CLI: the CLI would run the program in a child process behind a signal relay.
exec node --import tsx "$main" "$@"
