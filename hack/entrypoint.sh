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
case "$program" in
  control-api) main=control-api/dist/main.js ;;
  runtime) main=runtime/dist/main.js ;;
  operator) main=operator/dist/main.js ;;
  migrate) main=runtime/dist/migrate.js ;;
  *) usage ;;
esac

# From the app's root, as npm scripts run: the default data dir resolves there.
cd -- "$(dirname -- "$0")/.."
if [ ! -f "$main" ]; then
  echo "entrypoint.sh: $main is missing; build it first with 'npm run build'" >&2
  exit 66
fi
exec node "$main" "$@"
