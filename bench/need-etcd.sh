# bench/need-etcd.sh — sourced by the scripts that compare with etcd:
# need_etcd NAME makes sure Debian's etcd-server is installed (installs it
# when run as root; else says the one line to run, as NAME) — 0 or 1.
need_etcd() {
  command -v etcd >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then
    echo "$1: installing etcd-server"
    apt-get -o DPkg::Lock::Timeout=300 update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq etcd-server >/dev/null ||
      { echo "$1: apt-get install etcd-server failed"; return 1; }
  else
    echo "$1: etcd is missing; run: sudo apt-get install -y etcd-server"
    return 1
  fi
}
