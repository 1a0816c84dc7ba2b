#!/bin/sh
# gpu-inspect.sh: read-only inspection of one GPU node, run by `gpuops nodes inspect` (over one
# ssh session, `sh -s`) and by the gpu_inspect role (ansible.builtin.script). POSIX sh and
# standard tools only: no Python starts on the node. The nvidia-smi calls run concurrently,
# each under a timeout (a lost GPU can hang nvidia-smi). Output: sections, each a line
# "@@gpuops <name> rc=<exit status>" and then the command's own output; the controller parses
# them (gpuops.core.gpuparse). Nothing on the node is changed but a temporary folder.
# Usage: gpu-inspect.sh [TIMEOUT_S [MOUNT...]]   (defaults: 60 / /var)
LC_ALL=C
export LC_ALL
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
T_S=${1:-60}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- / /var
Q=index,name,uuid,pci.bus_id,driver_version,pstate,temperature.gpu,fan.speed,power.draw
Q=$Q,power.limit,memory.used,memory.total,utilization.gpu,ecc.errors.corrected.volatile.total
Q=$Q,ecc.errors.uncorrected.volatile.total,ecc.errors.uncorrected.aggregate.total
Q=$Q,retired_pages.sbe,retired_pages.dbe,retired_pages.pending,remapped_rows.correctable
Q=$Q,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure
Q=$Q,clocks_throttle_reasons.active
D=$(mktemp -d /tmp/gpuops-inspect.XXXXXX) || exit 1
trap 'rm -rf "$D"' EXIT
run() {
  n=$1
  shift
  { "$@"; echo $? > "$D/$n.rc"; } > "$D/$n" 2>&1 &
}
# df per mount; one it cannot check is said ("@@unchecked missing|df-failed PATH"), never
# left out: the controller makes it a finding
disks() {
  rc=0
  for m in "$@"; do
    if [ ! -e "$m" ]; then
      printf '@@unchecked missing %s\n' "$m"
      rc=1
    elif ! df -P -k -- "$m"; then
      printf '@@unchecked df-failed %s\n' "$m"
      rc=1
    fi
  done
  return $rc
}
run gpus timeout "$T_S" nvidia-smi --query-gpu="$Q" --format=csv,nounits
run nvlink timeout "$T_S" nvidia-smi nvlink -s
run nvlink_errors timeout "$T_S" nvidia-smi nvlink -e
run version timeout "$T_S" nvidia-smi --version
run kernel sh -c 'out=$(dmesg 2>&1); rc=$?
  printf "%s\n" "$out" | grep -E "NVRM: (Xid|The NVIDIA GPU)|fallen off the bus"; exit $rc'
run netdev cat /proc/net/dev
run disk disks "$@"
wait
for n in gpus nvlink nvlink_errors version kernel netdev disk; do
  printf '@@gpuops %s rc=%s\n' "$n" "$(cat "$D/$n.rc" 2>/dev/null || echo 255)"
  cat "$D/$n"
done
printf '@@gpuops end\n'
