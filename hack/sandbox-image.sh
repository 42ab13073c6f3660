#!/usr/bin/env bash
# Builds the images the test kubelet (test/harness/kubelet.ts) runs, without a registry and without Docker, as OCI
# archives that `ctr images import` loads into the harness's own containerd:
#
#   agentplane.local/sandbox:bookworm-1  a Debian bookworm minbase root (bash, coreutils, python3, tar), user
#                                        `sandbox` (uid and gid 1000) and /workspace owned by it
#   agentplane.local/pause:1             the Pod sandbox's pause container: one static binary that sleeps and reaps
#
# Each lands in CACHE/images under a versioned name, built into a .partial directory and renamed when complete, so a
# warm cache builds nothing and an interrupted build never looks finished. A change to what an image holds bumps
# its tag (and so its file name). Needs root (debootstrap, chroot, file ownership), debootstrap, umoci and gcc.
#
# Usage: hack/sandbox-image.sh CACHE_DIR   (called by hack/test-deps.sh)
set -euo pipefail

CACHE="$1"
IMAGES="$CACHE/images"
SANDBOX_TAG="bookworm-1"
PAUSE_TAG="1"
SANDBOX_ARCHIVE="$IMAGES/agentplane-sandbox-$SANDBOX_TAG.oci.tar"
PAUSE_ARCHIVE="$IMAGES/agentplane-pause-$PAUSE_TAG.oci.tar"
# The mirror apt itself uses here (/etc/apt/sources.list.d/debian.sources); the snapshot it names is only a comment.
MIRROR="${AGENTPLANE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
mkdir -p "$IMAGES"

log() { printf '[sandbox-image] %s\n' "$*"; }

# remove_dir
. "$(dirname "$0")/image-build.sh"

# OCI_LAYOUT NAME TAG ARCHIVE: names the image for containerd (the annotation `ctr images import` reads) and tars
# the layout into ARCHIVE.
write_archive() {
  local layout="$1" name="$2" tag="$3" archive="$4"
  umoci gc --layout "$layout"
  python3 - "$layout/index.json" "$name:$tag" <<'EOF'
import json, sys
path, ref = sys.argv[1], sys.argv[2]
index = json.load(open(path))
for manifest in index["manifests"]:
    manifest.setdefault("annotations", {})["io.containerd.image.name"] = ref
json.dump(index, open(path, "w"))
EOF
  tar -C "$layout" -cf "$archive.partial" .
  mv "$archive.partial" "$archive"
}

# --- pause --------------------------------------------------------------------------------------------------------
if [ ! -f "$PAUSE_ARCHIVE" ]; then
  log "building agentplane.local/pause:$PAUSE_TAG"
  work="$IMAGES/pause-build.partial"
  remove_dir "$work" && mkdir -p "$work"
  cat > "$work/pause.c" <<'EOF'
/* The Pod sandbox's first process: holds the Pod's namespaces, reaps orphans, exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int signal) { (void)signal; _exit(0); }
static void reap(int signal) { (void)signal; while (waitpid(-1, 0, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction stop = { .sa_handler = quit }, child = { .sa_handler = reap, .sa_flags = SA_NOCLDSTOP };
  sigaction(SIGINT, &stop, 0);
  sigaction(SIGTERM, &stop, 0);
  sigaction(SIGCHLD, &child, 0);
  for (;;) pause();
}
EOF
  gcc -static -Os -s -o "$work/pause" "$work/pause.c"
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$PAUSE_TAG"
  umoci unpack --image "$work/oci:$PAUSE_TAG" "$work/bundle"
  install -m 0755 "$work/pause" "$work/bundle/rootfs/pause"
  umoci repack --image "$work/oci:$PAUSE_TAG" "$work/bundle"
  umoci config --image "$work/oci:$PAUSE_TAG" --config.entrypoint /pause --config.user 65535:65535
  write_archive "$work/oci" agentplane.local/pause "$PAUSE_TAG" "$PAUSE_ARCHIVE"
  remove_dir "$work"
fi
log "agentplane.local/pause:$PAUSE_TAG: $PAUSE_ARCHIVE ($(du -h "$PAUSE_ARCHIVE" | cut -f1))"

# --- sandbox ------------------------------------------------------------------------------------------------------
if [ ! -f "$SANDBOX_ARCHIVE" ]; then
  log "building agentplane.local/sandbox:$SANDBOX_TAG (debootstrap from $MIRROR; first run only, a few minutes)"
  work="$IMAGES/sandbox-build.partial"
  remove_dir "$work" && mkdir -p "$work"
  root="$work/rootfs"
  # minbase: Essential and Required packages only (bash, coreutils, tar, apt among them), plus python3.
  debootstrap --variant=minbase --include=python3 bookworm "$root" "$MIRROR" > "$work/debootstrap.log" 2>&1 \
    || { tail -30 "$work/debootstrap.log"; exit 1; }
  chroot "$root" groupadd --gid 1000 sandbox
  chroot "$root" useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash sandbox
  install -d -m 0755 -o 1000 -g 1000 "$root/workspace"
  # What a container never uses: package caches and lists, documentation, device nodes (the runtime mounts /dev).
  rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
    "$root"/usr/share/info/* "$root"/var/log/* "$root"/dev/* "$root"/run/* "$root"/tmp/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} +
  umoci init --layout "$work/oci"
  umoci new --image "$work/oci:$SANDBOX_TAG"
  umoci unpack --image "$work/oci:$SANDBOX_TAG" "$work/bundle"
  cp -a "$root/." "$work/bundle/rootfs/"
  umoci repack --image "$work/oci:$SANDBOX_TAG" "$work/bundle"
  umoci config --image "$work/oci:$SANDBOX_TAG" --config.user 1000:1000 --config.workingdir /workspace \
    --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env HOME=/home/sandbox \
    --config.env LANG=C.UTF-8 --config.cmd /bin/bash
  write_archive "$work/oci" agentplane.local/sandbox "$SANDBOX_TAG" "$SANDBOX_ARCHIVE"
  remove_dir "$work"
fi
log "agentplane.local/sandbox:$SANDBOX_TAG: $SANDBOX_ARCHIVE ($(du -h "$SANDBOX_ARCHIVE" | cut -f1))"
