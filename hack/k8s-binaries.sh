#!/usr/bin/env bash
# Builds the Kubernetes control plane the operator suites run against: kube-apiserver, kube-controller-manager,
# kube-scheduler (kwok fakes kubelets, not scheduling), kubectl, kubelet (a real node for the suites that run Pods,
# test/harness/kubelet.ts) and etcd from one wrapper Go module, plus kwok (fake nodes) and helm. Everything lands in the cache under a versioned name, so a warm cache rebuilds nothing
# and a version bump never reuses a stale binary.
#
# Usage: hack/k8s-binaries.sh CACHE_DIR   (called by hack/test-deps.sh)
set -euo pipefail

CACHE="$1"
BIN="$CACHE/bin"
K8S_VERSION="v1.34.4"       # k8s.io/kubernetes; its staging modules are published as v0.34.4
KWOK_VERSION="v0.7.0"       # sigs.k8s.io/kwok
HELM_VERSION="v3.21.4"      # helm.sh/helm/v3
mkdir -p "$BIN"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { printf '[k8s-binaries] %s\n' "$*"; }

K8S_DIR="$CACHE/kubernetes-$K8S_VERSION"
K8S_COMMANDS="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet"
missing=""
for b in $K8S_COMMANDS etcd; do [ -x "$K8S_DIR/$b" ] || missing+=" $b"; done
if [ -n "$missing" ]; then
  # Only what is missing is built: a command added to the list later costs one build, not all of them.
  log "building Kubernetes $K8S_VERSION:$missing (first run only; takes a while on two cores)"
  work="$CACHE/kubernetes-build.partial"
  rm -rf "$work" && mkdir -p "$work"
  gomod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])')"
  minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  staging="v0.${K8S_VERSION#v1.}"
  etcd_version="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$gomod")"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with folders of its own repo;
  # a dependency's replace directives do not apply, so this module replaces each with its published version.
  {
    echo "module agentplane.local/kubernetes-binaries"
    echo
    awk '$1 == "go" || $1 == "godebug" { print; print "" }' "$gomod"
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $etcd_version"
    echo ")"
    echo
    echo "replace ("
    awk '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s '"$staging"'\n", $1, $1 }' "$gomod"
    echo ")"
  } > "$work/go.mod"
  cat > "$work/tools.go" <<'EOF'
//go:build tools

// Package tools pins the commands this module builds.
package tools
EOF
  (
    cd "$work"
    go get "k8s.io/kubernetes/cmd/kube-apiserver@$K8S_VERSION" "k8s.io/kubernetes/cmd/kube-controller-manager@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kube-scheduler@$K8S_VERSION" "k8s.io/kubernetes/cmd/kubectl@$K8S_VERSION" \
      "k8s.io/kubernetes/cmd/kubelet@$K8S_VERSION" "go.etcd.io/etcd/server/v3@$etcd_version"
    ldflags=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
      ldflags+=" -X $pkg.gitTreeState=clean"
    done
    for cmd in $missing; do
      log "go build $cmd"
      if [ "$cmd" = etcd ]; then
        go build -trimpath -ldflags "-s -w" -o "$work/out/etcd" "go.etcd.io/etcd/server/v3"
      else
        go build -trimpath -ldflags "-s -w $ldflags" -o "$work/out/$cmd" "k8s.io/kubernetes/cmd/$cmd"
      fi
    done
  )
  # Each binary is renamed into place once built, so an interrupted build never leaves one that looks complete.
  mkdir -p "$K8S_DIR"
  for b in $missing; do mv "$work/out/$b" "$K8S_DIR/$b"; done
  rm -rf "$work"
fi
for b in $K8S_COMMANDS etcd; do ln -sf "$K8S_DIR/$b" "$BIN/$b"; done
log "kubernetes: $("$BIN/kube-apiserver" --version), etcd $("$BIN/etcd" --version | awk 'NR == 1 { print $3 }')"

# kwok and helm have no replace directives: plain `go install` works.
install_tool() { # NAME MODULE_PATH VERSION
  local name="$1" pkg="$2" version="$3" target="$CACHE/$1-$3"
  if [ ! -x "$target" ]; then
    log "building $name $version"
    local tmp="$CACHE/$name-build.partial"
    rm -rf "$tmp" && mkdir -p "$tmp"
    GOBIN="$tmp" go install -trimpath -ldflags "-s -w" "$pkg@$version"
    mv "$tmp/$name" "$target" && rm -rf "$tmp"
  fi
  ln -sf "$target" "$BIN/$name"
}
install_tool kwok sigs.k8s.io/kwok/cmd/kwok "$KWOK_VERSION"
install_tool helm helm.sh/helm/v3/cmd/helm "$HELM_VERSION"
log "kwok $KWOK_VERSION, helm $("$BIN/helm" version --short)"
