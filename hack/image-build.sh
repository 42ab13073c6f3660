# Shared by the scripts that build the test kubelet's images (sandbox-image.sh, browser-image.sh); sourced, not run.

# Removes a build directory, unmounting first whatever is mounted beneath it (debootstrap mounts /proc and /sys in
# its target, and a chroot's /proc may stay after a failure): rm -rf never walks into a mounted file system.
remove_dir() {
  local dir="$1" mount
  [ -e "$dir" ] || return 0
  dir="$(realpath "$dir")"
  awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/self/mounts | sort -r | while read -r mount; do
    umount -l "$mount"
  done
  rm -rf "$dir"
}
