# shellcheck shell=bash
# Sourced by image/build.sh and image/test.sh: the podman command and the arguments every build and run
# needs on hosts like CI's (Debian's podman as root):
#   * runc when installed (crun refuses some kernels' cgroup mix); PODMAN_RUNTIME overrides, "" = default.
#   * explicit --ulimit values no higher than this shell's hard limits (podman's defaults exceed them for
#     a root without CAP_SYS_RESOURCE, and the container then fails to start).
PODMAN=${PODMAN:-podman}
if [ -z "${PODMAN_RUNTIME+set}" ]; then PODMAN_RUNTIME=$(command -v runc >/dev/null 2>&1 && echo runc || true); fi
hn=$(ulimit -Hn); hu=$(ulimit -Hu)
[ "$hn" = unlimited ] && hn=1048576
[ "$hu" = unlimited ] && hu=32768
nofile=$(( hn < 20000 ? hn : 20000 )); nproc=$(( hu < 32768 ? hu : 32768 ))
PODMAN_ARGS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
[ -n "$PODMAN_RUNTIME" ] && PODMAN_ARGS+=(--runtime "$PODMAN_RUNTIME")
true
