#!/bin/sh
# driver-state.sh: what the nvidia_driver role needs to know about a node, read-only. Run by the
# role (ansible.builtin.script, tasks/state.yml and tasks/install.yml) and by `gpuops nodes
# update`'s plan (one ssh session per host, `sh -s`): both hand its output to the same parser
# and decision (gpuops.core.driverstate), so the plan and the role cannot disagree on what a
# node needs. POSIX sh and standard tools only: no Python starts on the node; nothing on it is
# changed. It always exits 0: what failed is said in its output.
#
# Arguments, each KEY=VALUE (a section is read only when its key is given):
#   smi=CMD          nvidia-smi --query-gpu=driver_version --format=csv,noheader (under a
#                    30 s timeout where coreutils' timeout exists): "@@smi-rc N", "@@smi LINE"
#   fact=PATH        the role's local fact (the installed version): "@@file fact ..." below
#   fm=BIN_DIR       BIN_DIR/nv-fabricmanager --version, then `systemctl is-active UNIT`
#   fm_unit=UNIT     (their standard output in order): "@@read fm", "@@fm LINE"
#   ctk=1            nvidia-ctk --version: "@@read ctk", "@@ctk LINE"
#   lsmod=1          the loaded modules' names: "@@lsmod-rc N", "@@mod NAME"
#   dir=PATH         a folder the role manages: "@@file dir ..."
#   blacklist=PATH   the nouveau blacklist: "@@file blacklist ..."
#   tool=NAME        a build tool: "@@missing NAME" when it is not on PATH
#   headers=PATH     a place for the running kernel's headers ({release}: uname -r):
#                    "@@found PATH" when it exists (a link counts)
# A file is "@@file TAG absent", "@@file TAG KIND UID GID MODE SIZE" (KIND file, directory,
# link or other; MODE octal) and, for a regular file of at most 8 KiB that could be read,
# "@@content TAG" and "@@b64 TAG BASE64" lines of it ("@@file TAG unknown": stat failed).
# Then "@@release RELEASE" (with tool= or headers=) and, last, "@@end".
LC_ALL=C
export LC_ALL
# the session's PATH first (what a module would run), then the usual places of lsmod & co
PATH=${PATH:-/usr/bin:/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
smi="" fact="" fm="" fm_unit="" ctk="" lsmod="" dir="" blacklist="" prereqs=""
for a do
  case $a in
    smi=*) smi=${a#smi=} ;;
    fact=*) fact=${a#fact=} ;;
    fm=*) fm=${a#fm=} ;;
    fm_unit=*) fm_unit=${a#fm_unit=} ;;
    ctk=*) ctk=${a#ctk=} ;;
    lsmod=*) lsmod=${a#lsmod=} ;;
    dir=*) dir=${a#dir=} ;;
    blacklist=*) blacklist=${a#blacklist=} ;;
    tool=* | headers=*) prereqs=1 ;;
    *) echo "@@bad-argument $a" ;;
  esac
done

gpuops_lines() {  # TAG: each line of stdin as "@@TAG LINE"
  while IFS= read -r line || [ -n "$line" ]; do
    printf '@@%s %s\n' "$1" "$line"
  done
}

gpuops_file() {  # TAG PATH
  if [ -L "$2" ]; then kind=link
  elif [ -d "$2" ]; then kind=directory
  elif [ -f "$2" ]; then kind=file
  elif [ -e "$2" ]; then kind=other
  else
    echo "@@file $1 absent"
    return
  fi
  if ! st=$(stat -c '%u %g %a %s' -- "$2" 2>/dev/null); then
    echo "@@file $1 unknown"
    return
  fi
  echo "@@file $1 $kind $st"
  set -- "$1" "$2" $st
  if [ "$kind" = file ] && [ "$6" -le 8192 ] && command -v base64 >/dev/null 2>&1 &&
    b=$(base64 < "$2" 2>/dev/null); then
    echo "@@content $1"
    printf '%s\n' "$b" | gpuops_lines "b64 $1"
  fi
}

if [ -n "$smi" ]; then
  if command -v timeout >/dev/null 2>&1; then
    out=$(timeout 30 "$smi" --query-gpu=driver_version --format=csv,noheader 2>/dev/null)
  else
    out=$("$smi" --query-gpu=driver_version --format=csv,noheader 2>/dev/null)
  fi
  echo "@@smi-rc $?"
  [ -z "$out" ] || printf '%s\n' "$out" | gpuops_lines smi
fi
[ -z "$fact" ] || gpuops_file fact "$fact"
if [ -n "$fm" ]; then
  echo "@@read fm"
  { "$fm/nv-fabricmanager" --version; systemctl is-active "$fm_unit"; } 2>/dev/null |
    gpuops_lines fm
fi
if [ -n "$ctk" ]; then
  echo "@@read ctk"
  nvidia-ctk --version 2>/dev/null | gpuops_lines ctk
fi
if [ -n "$lsmod" ]; then
  out=$(lsmod 2>/dev/null)
  echo "@@lsmod-rc $?"
  printf '%s\n' "$out" | while read -r name _; do
    [ -z "$name" ] || echo "@@mod $name"
  done
fi
[ -z "$dir" ] || gpuops_file dir "$dir"
[ -z "$blacklist" ] || gpuops_file blacklist "$blacklist"

if [ -n "$prereqs" ]; then
  release=$(uname -r)
  echo "@@release $release"
  for a do
    case $a in
      tool=*)
        command -v "${a#tool=}" >/dev/null 2>&1 || printf '@@missing %s\n' "${a#tool=}" ;;
      headers=*)
        rest=${a#headers=}
        path=""
        while :; do
          case $rest in
            *"{release}"*)
              path=$path${rest%%"{release}"*}$release
              rest=${rest#*"{release}"} ;;
            *) path=$path$rest; break ;;
          esac
        done
        if [ -e "$path" ] || [ -L "$path" ]; then printf '@@found %s\n' "$path"; fi ;;
    esac
  done
fi
echo "@@end"
exit 0
