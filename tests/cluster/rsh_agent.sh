#!/bin/sh
# rsh agent for Open MPI (--mca plm_rsh_agent): starts the daemon command of a simulated host
# inside that host's network and UTS namespaces (tests/cluster/cluster.py made them).
# Open MPI calls it as `rsh_agent.sh [options] HOST COMMAND...`; HOST is an address of the test
# subnet, looked up in $SM_CLUSTER_MAP (lines "ADDRESS NETNS UTSFILE"). Each host gets its own
# TMPDIR (Open MPI's session directory) under $SM_CLUSTER_DIR.
set -eu
while [ "$#" -gt 0 ] && [ "${1#-}" != "$1" ]; do
    shift
done
host="$1"
shift
line="$(grep "^$host " "$SM_CLUSTER_MAP" || true)"
if [ -z "$line" ]; then
    echo "rsh_agent.sh: $host is not a test host of $SM_CLUSTER_MAP" >&2
    exit 255
fi
# shellcheck disable=SC2086 # split the map line into its three fields
set -- $line "$@"
ns="$2"
uts="$3"
shift 3
TMPDIR="$SM_CLUSTER_DIR/$ns"
export TMPDIR
mkdir -p "$TMPDIR"
exec nsenter --net="/run/netns/$ns" --uts="$uts" -- sh -c "$*"
