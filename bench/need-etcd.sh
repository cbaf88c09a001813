# bench/need-etcd.sh — sourced by the scripts that compare with etcd.
# need_debian NAME COMMAND PACKAGE: COMMAND is there, or Debian's PACKAGE
# is installed for it (when run as root; else the one line to run is
# said, as NAME) — 0 or 1. need_etcd NAME: etcd, from etcd-server.
need_debian() {
  command -v "$2" >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "$1: installing $3"
    apt-get -o DPkg::Lock::Timeout=300 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "$3" >/dev/null ||
      { echo "$1: apt-get install $3 failed"; return 1; }
  else
    echo "$1: $2 is missing; run: sudo apt-get install -y $3"
    return 1
  fi
}

need_etcd() { need_debian "$1" etcd etcd-server; }
