#!/usr/bin/env bash
# make systemd-test: the installed units run under a real systemd, booted
# in a podman container (root; about a minute, more the first time):
#  1. podman, runc and mmdebstrap (installed when missing); a Debian
#     bookworm root with systemd and the programs' libraries, made with
#     mmdebstrap and kept under $PERCOLATOR_PODMAN_DIR/systemd-test (default
#     /var/tmp/percolator-podman/systemd-test) with podman's storage.
#  2. `make install DESTDIR=...` of this tree copied in; systemd as PID 1.
#  3. systemctl enable --now both units: active, ready, the client's
#     put/get; each runs as a dynamic user, no capabilities,
#     no-new-privileges, a seccomp filter, its state in /var/lib/private.
#  4. A token as a systemd credential (drop-in): 401 without it, 200 with;
#     backups into /var/lib/percolator-service/backups (/etc/default).
#  5. systemctl reload: SIGHUP, the same process. SIGKILL, and exit 70
#     (a failed log sync, PERCOLATOR_FAILPOINT): restarted, the data read
#     back. A bad setting (exit 2): failed, not restarted. systemctl stop:
#     exit 0, "stopped cleanly".
# The container and the image are removed on exit; the root is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
WORK=${PERCOLATOR_PODMAN_DIR:-/var/tmp/percolator-podman}/systemd-test
RUN=st$(date +%s)$$
IMAGE=localhost/percolator-systemd-test:$RUN
CNT=percolator-systemd-test-$RUN
O=percolator-oracle
S=percolator-service

passed=0
step() { echo "systemd-test: $*"; }
ok() { passed=$((passed + 1)); echo "systemd-test: ok: $* [${SECONDS}s]"; }
fail() {
    echo "systemd-test: FAIL: $*" >&2
    exit 1
}

# --- 1. tools, podman's configuration, the root file system -----------------
[ "$(id -u)" = 0 ] || fail "needs root (rootful podman, apt-get): run as root"
need=""
for p in podman runc mmdebstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need="$need $p"
done
if [ -n "$need" ]; then
    step "installing:$need"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need; } \
        >/dev/null 2>&1 || fail "apt-get install$need failed"
fi
mkdir -p "$WORK"
cp docker/containers.conf "$WORK/containers.conf"
printf 'tmp_dir = "%s"\nvolume_path = "%s"\n' "$WORK/run/libpod" "$WORK/storage/volumes" \
    >>"$WORK/containers.conf"
printf '[storage]\ndriver = "overlay"\ngraphroot = "%s"\nrunroot = "%s"\n' \
    "$WORK/storage" "$WORK/run/storage" >"$WORK/storage.conf"
export CONTAINERS_CONF=$WORK/containers.conf CONTAINERS_STORAGE_CONF=$WORK/storage.conf
unset CONTAINER_HOST CONTAINER_CONNECTION
TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-systemd-test.XXXXXX")
cleanup() {
    local rc=$?
    set +e
    if [ "$rc" != 0 ] && podman container exists "$CNT" 2>/dev/null; then
        echo "----- journal of the units (last 30 lines) -----" >&2
        podman exec "$CNT" journalctl --no-pager -n 30 -u "$O" -u "$S" >&2
    fi
    podman rm -f -t 5 "$CNT" >/dev/null 2>&1
    podman rmi -f "$IMAGE" >/dev/null 2>&1
    rm -rf "$TMP"
    [ "$rc" = 0 ] || echo "systemd-test: $passed passed, 1 failed"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

src=/etc/apt/sources.list.d/debian.sources
[ -f "$src" ] || src=/etc/apt/sources.list
ROOTFS=(mmdebstrap --variant=apt --mode=root --format=tar
    --include=systemd,systemd-sysv,curl,libmicrohttpd12,libjansson4,libwiredtiger0,libcurl4,libraft2,libuv1,libgnutls30
    bookworm)
recipe="${ROOTFS[*]} $src"
if [ "$(cat "$WORK/root.recipe" 2>/dev/null)" != "$recipe" ] ||
   [ -n "$(find "$WORK/root.tar" -mtime +7 2>/dev/null)" ] || [ ! -s "$WORK/root.tar" ]; then
    step "root file system: mmdebstrap bookworm with systemd (about a minute)"
    timeout 1200 "${ROOTFS[@]}" "$WORK/root.tar.tmp" "$src" >"$TMP/mmdebstrap.log" 2>&1 ||
        { tail -5 "$TMP/mmdebstrap.log" >&2; fail "mmdebstrap failed"; }
    mv "$WORK/root.tar.tmp" "$WORK/root.tar"
    printf '%s\n' "$recipe" >"$WORK/root.recipe"
fi

# --- 2. the image: that root plus this tree's make install ------------------
"$MAKE" --no-print-directory -s install DESTDIR="$TMP/ctx/install" >"$TMP/make.log" 2>&1 ||
    { cat "$TMP/make.log" >&2; fail "make install DESTDIR failed"; }
cp "$WORK/root.tar" "$TMP/ctx/root.tar"
cat >"$TMP/ctx/Containerfile" <<'EOF'
FROM scratch
ADD root.tar /
COPY install/ /
STOPSIGNAL SIGRTMIN+3
CMD ["/lib/systemd/systemd"]
EOF
podman build --format docker -f "$TMP/ctx/Containerfile" -t "$IMAGE" "$TMP/ctx" >"$TMP/build.log" 2>&1 ||
    { tail -10 "$TMP/build.log" >&2; fail "podman build failed"; }
podman run -d --name "$CNT" --systemd=always "$IMAGE" >"$TMP/run.log" 2>&1 ||
    fail "podman run (systemd as PID 1) failed: $(tail -1 "$TMP/run.log")"
# x SCRIPT: run SCRIPT with bash in the container.
x() { podman exec "$CNT" bash -c "$1" 2>&1; }
for _ in $(seq 60); do
    st=$(x 'systemctl is-system-running' || true)
    case "$st" in running | degraded) break ;; esac
    sleep 1
done
case "$st" in running | degraded) ;; *) fail "systemd in the container is '$st' after 60 s" ;; esac
ok "systemd booted in the container ($st) with this tree's make install"

# --- 3. both units, the client, the sandbox ----------------------------------
# wait_ready: until the service says ready (it reaches the oracle), 30 s.
wait_ready() {
    x 'for i in $(seq 60); do curl -fs -o /dev/null http://127.0.0.1:8080/v1/ready && exit 0; sleep 0.5; done; exit 1' ||
        fail "the service is not ready after 30 s: $(x "systemctl status --no-pager $S | tail -5")"
}
x "systemctl enable --now $O $S" >/dev/null || fail "systemctl enable --now: $(x "systemctl status --no-pager $O $S")"
wait_ready
out=$(x 'percolator put greeting hello >/dev/null && percolator get greeting') || fail "percolator put/get: $out"
[ "$out" = hello ] || fail "percolator get greeting: '$out'"
for u in $O $S; do
    st=$(x "grep -E '^(Uid|NoNewPrivs|Seccomp|CapBnd):' /proc/\$(systemctl show -p MainPID --value $u)/status | tr -s '\t ' ' ' | tr '\n' ' '")
    [[ "$st" =~ ^Uid:\ ([0-9]+)\  ]] && [ "${BASH_REMATCH[1]}" -ge 1000 ] || fail "$u does not run as a dynamic user: $st"
    [[ "$st" == *"NoNewPrivs: 1 "* && "$st" == *"Seccomp: 2 "* && "$st" == *"CapBnd: 0000000000000000 "* ]] ||
        fail "$u is not sandboxed: $st"
done
[ "$(x 'readlink /var/lib/percolator-service; ls /var/lib/private/percolator-service')" = \
  "$(printf 'private/percolator-service\ndata')" ] || fail "the service's state is not in /var/lib/private/percolator-service/data"
ok "both units active, the service ready; percolator put/get; each a dynamic user, NoNewPrivs, seccomp, no capabilities, state in /var/lib/private"

# --- 4. a token as a credential, backups --------------------------------------
x "set -e
   mkdir -p /etc/percolator /etc/systemd/system/$S.service.d
   head -c 24 /dev/urandom | base64 | tr '+/' '-_' >/etc/percolator/service.token
   chmod 0600 /etc/percolator/service.token
   printf '[Service]\nLoadCredential=token:/etc/percolator/service.token\nEnvironment=PERCOLATOR_AUTH_TOKEN_FILE=%%d/token\n' \
       >/etc/systemd/system/$S.service.d/token.conf
   echo PERCOLATOR_BACKUP_DIR=/var/lib/percolator-service/backups >>/etc/default/$S
   systemctl daemon-reload && systemctl restart $S" >/dev/null || fail "the token drop-in"
wait_ready
T=/etc/percolator/service.token
out=$(x 'percolator put a 1; echo "exit $?"')
[[ "$out" == *"401 unauthorized"*"exit 6" ]] || fail "percolator put without the token: $out"
out=$(x "percolator --token-file $T put a 1 >/dev/null && curl -fsS -X POST -H \"Authorization: Bearer \$(cat $T)\" http://127.0.0.1:8080/v1/admin/backup >/dev/null && ls /var/lib/percolator-service/backups") ||
    fail "put with the token, or the backup: $out"
[[ "$out" == backup-* ]] || fail "no backup in /var/lib/percolator-service/backups: $out"
ok "the token as a credential (LoadCredential, %d): exit 6 without it, a put with it; a backup in /var/lib/percolator-service/backups"

# --- 5. reload, restarts, exit statuses ----------------------------------------
mainpid() { x "systemctl show -p MainPID --value $1"; }
restarts() { x "systemctl show -p NRestarts --value $1"; }
p0=$(mainpid $S)
x "systemctl reload $S" >/dev/null || fail "systemctl reload $S: $(x "journalctl --no-pager -n 5 -u $S")"
sleep 1
[ "$(mainpid $S)" = "$p0" ] || fail "systemctl reload changed the main process"
x "journalctl --no-pager -u $S | grep -q 'SIGHUP'" >/dev/null || fail "the service did not get SIGHUP on reload"
ok "systemctl reload: SIGHUP to the same process"

n0=$(restarts $S)
x "systemctl kill -s SIGKILL $S" >/dev/null
for _ in $(seq 30); do [ "$(restarts $S)" -gt "$n0" ] && [ "$(x "systemctl is-active $S")" = active ] && break; sleep 0.5; done
[ "$(restarts $S)" -gt "$n0" ] || fail "not restarted after SIGKILL"
wait_ready
[ "$(x "percolator --token-file $T get a")" = 1 ] || fail "the value is not back after the restart"
ok "SIGKILL: restarted (Restart=on-failure), the data read back"

x "printf '[Service]\nEnvironment=PERCOLATOR_FAILPOINT=local_sync=error\n' >/etc/systemd/system/$S.service.d/fail.conf
   systemctl daemon-reload && systemctl restart $S" >/dev/null
wait_ready
n0=$(restarts $S)
x "percolator --token-file $T put b 2" >/dev/null || true
for _ in $(seq 30); do [ "$(restarts $S)" -gt "$n0" ] && break; sleep 0.5; done
x "journalctl --no-pager -u $S | grep -q 'status=70/'" >/dev/null || fail "no exit 70 after a failed log sync"
[ "$(restarts $S)" -gt "$n0" ] || fail "not restarted after exit 70"
x "rm /etc/systemd/system/$S.service.d/fail.conf && systemctl daemon-reload && systemctl restart $S" >/dev/null
wait_ready
[ "$(x "percolator --token-file $T get a")" = 1 ] || fail "the value is not back after exit 70"
ok "a failed log sync: exit 70, restarted, the data read back"

x "echo PERCOLATOR_CACHE_SIZE=lots >>/etc/default/$S; systemctl restart $S" >/dev/null || true
sleep 5
st=$(x "systemctl show -p ActiveState -p ExecMainStatus -p NRestarts $S | sort | tr '\n' ' '")
[ "$st" = "ActiveState=failed ExecMainStatus=2 NRestarts=0 " ] || fail "a bad setting: $st, want failed with exit 2 and no restart"
x "sed -i /CACHE_SIZE=lots/d /etc/default/$S && systemctl reset-failed $S && systemctl start $S" >/dev/null
wait_ready
ok "a bad setting: exit 2, failed, not restarted (RestartPreventExitStatus=2)"

x "systemctl stop $S $O" >/dev/null
for u in $O $S; do
    st=$(x "systemctl show -p Result -p ExecMainStatus $u | sort | tr '\n' ' '")
    [ "$st" = "ExecMainStatus=0 Result=success " ] || fail "systemctl stop $u: $st"
done
x "journalctl --no-pager -u $S | tail -3 | grep -q 'service: stopped cleanly'" >/dev/null ||
    fail "no 'stopped cleanly' after systemctl stop"
ok "systemctl stop: both exit 0, the service stopped cleanly"

echo "systemd-test: $passed passed, 0 failed"
