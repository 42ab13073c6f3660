#!/usr/bin/env bash
# Builds the base of the browser image the test kubelet runs (docs/decisions/0092), without a registry and without
# Docker, as an OCI layout directory:
#
#   agentplane.local/browser-base:TAG   Debian bookworm minbase with Debian's chromium (from bookworm-security, as
#                                       the Dockerfile's browser stage installs it), fonts-liberation, Node, the
#                                       pinned playwright-core, hack/entrypoint.sh, and user agentplane (10001)
#
# The program itself (runtime/src/browser-server.ts) is not in it: the suites bundle the checkout's code and add it
# as one more layer (test/harness/browser-image.ts), so a change to the code needs no rebuild of this. The tag
# carries the Node and playwright-core versions; a change to what the base holds otherwise bumps BASE_REVISION.
# Built into a .partial directory and renamed when complete, so an interrupted build never looks finished. Needs
# root (debootstrap, chroot, file ownership), debootstrap and umoci.
#
# Usage: hack/browser-image.sh CACHE_DIR   (called by hack/test-deps.sh)
set -euo pipefail

CACHE="$1"
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
IMAGES="$CACHE/images"
BASE_REVISION=1
NODE_BIN="$(bash "$HERE/node.sh")"
NODE_VERSION="$("$NODE_BIN/node" --version | sed 's/^v//')"
# The version the runtime pins; fetched from the registry here (this runs before the repository's own npm ci).
PLAYWRIGHT_VERSION="$("$NODE_BIN/node" -p "require('$ROOT/runtime/package.json').dependencies['playwright-core']")"
TAG="bookworm-node$NODE_VERSION-pw$PLAYWRIGHT_VERSION-$BASE_REVISION"
LAYOUT="$IMAGES/agentplane-browser-base-$TAG"
MIRROR="${AGENTPLANE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${AGENTPLANE_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
mkdir -p "$IMAGES"

log() { printf '[browser-image] %s\n' "$*"; }

# remove_dir
. "$(dirname "$0")/image-build.sh"

if [ ! -f "$LAYOUT/index.json" ]; then
  log "building agentplane.local/browser-base:$TAG (debootstrap and chromium from $MIRROR; first run only, a few minutes)"
  work="$IMAGES/browser-base-build.partial"
  remove_dir "$work" && mkdir -p "$work"
  root="$work/rootfs"
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" > "$work/debootstrap.log" 2>&1 \
    || { tail -30 "$work/debootstrap.log"; exit 1; }
  # Chromium from bookworm-security: the version the machine's own chromium (and so playwright-core's tests) runs.
  cat > "$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY_MIRROR bookworm-security main
EOF
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  mount -t proc proc "$root/proc"
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq > "$work/apt.log" 2>&1 \
    && chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      chromium fonts-liberation ca-certificates >> "$work/apt.log" 2>&1 \
    || { umount -l "$root/proc"; tail -30 "$work/apt.log"; exit 1; }
  umount -l "$root/proc"
  chroot "$root" groupadd --system --gid 10001 agentplane
  chroot "$root" useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin agentplane
  install -m 0755 "$NODE_BIN/node" "$root/usr/local/bin/node"
  mkdir -p "$root/app/node_modules" "$root/app/hack" "$root/app/runtime/dist"
  mkdir -p "$work/pack" "$root/app/node_modules/playwright-core"
  (cd "$work/pack" && PATH="$NODE_BIN:$PATH" npm pack --silent "playwright-core@$PLAYWRIGHT_VERSION" > /dev/null)
  tar -xzf "$work"/pack/playwright-core-*.tgz -C "$root/app/node_modules/playwright-core" --strip-components=1
  install -m 0755 "$ROOT/hack/entrypoint.sh" "$root/app/hack/entrypoint.sh"
  # What a container never uses: package caches and lists, documentation, device nodes (the runtime mounts /dev).
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
    "$root"/usr/share/info/* "$root"/var/log/* "$root"/dev/* "$root"/run/* "$root"/tmp/* "$root/etc/resolv.conf"
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  chown -R root:root "$root/app"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$TAG"
  umoci unpack --image "$work/oci:$TAG" "$work/bundle"
  cp -a "$root/." "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:$TAG" "$work/bundle"
  umoci config --image "$work/oci:$TAG" --config.user 10001:10001 --config.workingdir /app \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env HOME=/tmp \
    --config.env LANG=C.UTF-8 --config.env NODE_ENV=production --config.env LOG_FORMAT=json \
    --config.entrypoint /app/hack/entrypoint.sh --config.cmd browser
  umoci gc --layout "$work/oci"
  mv "$work/oci" "$work/layout"
  rm -rf "$LAYOUT.partial" && mv "$work/layout" "$LAYOUT.partial"
  remove_dir "$work"
  rm -rf "$LAYOUT" && mv "$LAYOUT.partial" "$LAYOUT"
fi
log "agentplane.local/browser-base:$TAG: $LAYOUT ($(du -sh "$LAYOUT" | cut -f1))"
