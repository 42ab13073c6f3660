#!/usr/bin/env bash
# Builds kube-router, whose network-policy controller alone (--run-firewall, no router, no service proxy) enforces
# NetworkPolicy on the test kubelet's bridge when a suite asks for it (test/harness/kubelet.ts, `networkPolicy`;
# docs/decisions/0089-network-policy-enforced-in-tests.md). Test-only: it never ships in an image or the chart.
# v2.1.0 is the one version the Go module proxy serves here, and security flaws are reported against it; a suite
# runs it for seconds on a bridge of its own, against its own API server.
#
# Usage: hack/kube-router.sh CACHE_DIR   (called by hack/test-deps.sh)
set -euo pipefail

CACHE="$1"
BIN="$CACHE/bin"
KUBE_ROUTER_VERSION="v2.1.0"   # github.com/cloudnativelabs/kube-router/v2
mkdir -p "$BIN"

log() { printf '[kube-router] %s\n' "$*"; }

target="$CACHE/kube-router-$KUBE_ROUTER_VERSION"
if [ ! -x "$target" ]; then
  log "building kube-router $KUBE_ROUTER_VERSION (first run only)"
  # Built into the cache itself, then renamed: an interrupted build never leaves a binary that looks complete.
  tmp="$CACHE/kube-router-build.partial"
  rm -rf "$tmp" && mkdir -p "$tmp"
  GOTOOLCHAIN=local GOBIN="$tmp" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w" "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
  mv "$tmp/kube-router" "$target"
  rm -rf "$tmp"
fi
ln -sf "$target" "$BIN/kube-router"
log "kube-router $KUBE_ROUTER_VERSION (network-policy controller only, test-only)"
