#!/usr/bin/env bash
# make docker-test, second part (after docker/test.sh): the same image and
# docker/compose.yml with the real Docker Engine and Compose v1, as Debian
# packages them (docker.io 20.10, docker-compose 1.29).
#
#  1. docker.io and docker-compose, installed with apt-get when missing.
#     When docker.io cannot be installed or its daemon cannot start here,
#     it says so in one line ("SKIPPED: why") and exits 0: podman
#     (docker/test.sh) is then the only engine tested.
#  2. A private dockerd: its own data root under $PERCOLATOR_PODMAN_DIR,
#     its own socket, and --iptables=false --bridge=none, so that it leaves
#     the host's firewall (shared with podman and other tests) alone. Build
#     steps use the host's network (`--network host`: apt-get reaches the
#     Debian mirror without Docker's NAT); compose's own bridge network
#     connects the containers, docker-proxy publishes the service.
#  3. The base image imported from the tarball docker/test.sh made.
#  4. The image built with --no-cache twice: the classic builder and BuildKit.
#  5. docker-compose (v1) up with a token: `depends_on: service_healthy`
#     (v1 waits for the oracle's HEALTHCHECK, which dockerd runs), both
#     healthy, uid 10001, the hardening in effect, the oracle unpublished,
#     401 without the token, a commit read back; stop: both exit 0; down -v
#     leaves nothing.
#  6. docker/compose.raft.yml with docker/compose.raft-ips.yml (the oracles
#     at fixed addresses): a commit through the group; `docker kill` the
#     leader, another leads and the service commits again; start the
#     killed one again: at its fixed address it rejoins as a follower of
#     the new leader; down -v.
#  7. docker/compose.cluster.yml with docker/compose.cluster-ips.yml (all
#     six at fixed addresses): the services agree on a leader, a commit
#     through a follower (passed on to the leader, no redirect) read back
#     through the other; the leader reports to the placement driver (the
#     oracle group); `docker kill` the service leader:
#     another leads, the commit is readable, a new one works; the killed one
#     started again rejoins as a follower; stop: all exit 0; down -v.
# Everything it made (containers, network, volumes, images, the daemon) is
# removed on exit, also on failure; the base image and dockerd's storage
# are kept for the next run.
set -euo pipefail
cd "$(dirname "$0")/.."

WORK=${PERCOLATOR_PODMAN_DIR:-/var/tmp/percolator-podman}
HEALTH_WAIT=${DOCKER_TEST_HEALTH_WAIT:-180}
STOP_WAIT=${DOCKER_TEST_STOP_WAIT:-60}
BASE=docker.io/library/debian:bookworm-slim
RUN=de$(date +%s)$$
PROJECT=pcengine$RUN
IMAGE=percolator-test:$RUN
DROOT=$WORK/docker
EXECROOT=/run/percolator-docker-test.$$   # short: it holds unix sockets
DOCKER=/usr/bin/docker                    # Debian's, whatever else is on PATH
export DOCKER_HOST=unix://$DROOT/docker.sock
unset DOCKER_CONTEXT DOCKER_TLS_VERIFY DOCKER_CERT_PATH

passed=0
step() { echo "docker-test (Docker Engine): $*"; }
ok() { passed=$((passed + 1)); echo "docker-test (Docker Engine): ok: $* [${SECONDS}s]"; }
failure=
fail() {
    failure=$*   # said again last, so that a log's tail names it
    echo "docker-test (Docker Engine): FAIL: $*" >&2
    exit 1
}
skip() {
    echo "docker-test (Docker Engine): SKIPPED: $*"
    exit 0
}

# --- 1. what it needs -------------------------------------------------------
[ "$(id -u)" = 0 ] || fail "needs root (it runs dockerd): run as root"
need=""
for p in docker.io docker-compose; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need="$need $p"
done
if [ -n "$need" ]; then
    step "installing:$need"
    # Debian's own dockerd must not start (it would manage the host's
    # firewall): a policy-rc.d that forbids it, for the install only.
    rcd=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d && rcd=1
    fi
    if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
         apt-get install -y -qq --no-install-recommends $need; } >/tmp/docker-test-engine-apt.$$ 2>&1; then
        [ -z "$rcd" ] || rm -f /usr/sbin/policy-rc.d
        rm -f /tmp/docker-test-engine-apt.$$
    else
        [ -z "$rcd" ] || rm -f /usr/sbin/policy-rc.d
        why=$(tail -1 /tmp/docker-test-engine-apt.$$)
        rm -f /tmp/docker-test-engine-apt.$$
        skip "apt-get install$need failed: $why"
    fi
fi
export PATH=$PATH:/usr/sbin:/sbin
for b in "$DOCKER" dockerd containerd docker-compose curl; do
    command -v "$b" >/dev/null 2>&1 || fail "$b is missing although its package is installed"
done
[ -s "$WORK/base.tar" ] || fail "no base image tarball $WORK/base.tar: run docker/test.sh first (make docker-test does)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-docker-engine.XXXXXX")
chmod 0755 "$TMP"
DPID=""

RPROJECT=${PROJECT}r
CPROJECT=${PROJECT}c
compose() {
    timeout 600 docker-compose -p "$PROJECT" -f docker/compose.yml "$@" >>"$TMP/compose.log" 2>&1
}
rcompose() {
    timeout 600 docker-compose -p "$RPROJECT" -f docker/compose.raft.yml -f docker/compose.raft-ips.yml "$@" \
        >>"$TMP/compose.log" 2>&1
}
ccompose() {
    timeout 600 docker-compose -p "$CPROJECT" -f docker/compose.cluster.yml -f docker/compose.cluster-ips.yml "$@" \
        >>"$TMP/compose.log" 2>&1
}

cleanup() {
    local failed=$1 c left=""
    if [ -n "$DPID" ]; then
        if [ "$failed" = 1 ]; then
            for c in $("$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null
                       "$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$RPROJECT" 2>/dev/null
                       "$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$CPROJECT" 2>/dev/null); do
                echo "----- logs of $c (last 30 lines) -----" >&2
                "$DOCKER" logs --tail 30 "$c" >&2 2>&1
            done
            [ ! -s "$TMP/compose.log" ] || { echo "----- docker-compose (last 20 lines) -----" >&2; tail -20 "$TMP/compose.log" >&2; }
        fi
        compose down -v -t 5 >/dev/null 2>&1
        rcompose down -v -t 5 >/dev/null 2>&1
        ccompose down -v -t 5 >/dev/null 2>&1
        "$DOCKER" rmi -f "$IMAGE" "$IMAGE-classic" >/dev/null 2>&1
        "$DOCKER" builder prune -a -f >/dev/null 2>&1
        "$DOCKER" image prune -f >/dev/null 2>&1   # the classic builder's build stages
        left=$(for p in "$PROJECT" "$RPROJECT" "$CPROJECT"; do
                   "$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$p" 2>/dev/null
                   "$DOCKER" volume ls -q --filter "label=com.docker.compose.project=$p" 2>/dev/null
                   "$DOCKER" network ls -q --filter "label=com.docker.compose.project=$p" 2>/dev/null
               done
               "$DOCKER" images -q "$IMAGE" 2>/dev/null)
        # The daemon we started, by its PID; it stops its containerd.
        kill -TERM "$DPID" 2>/dev/null
        for ((c = 0; c < 60; c++)); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.5; done
        if kill -0 "$DPID" 2>/dev/null; then kill -KILL "$DPID" 2>/dev/null; left="$left dockerd"; fi
    fi
    if [ "$failed" = 1 ] && [ -s "$TMP/dockerd.log" ] && [ -z "$DPID" ]; then
        tail -5 "$TMP/dockerd.log" >&2
    fi
    # dockerd leaves its default network namespace mounted there.
    umount "$EXECROOT"/netns/* 2>/dev/null
    rm -rf "$TMP" "$EXECROOT"
    if [ -n "$left" ]; then
        echo "docker-test (Docker Engine): cleanup left behind:" $left >&2
        return 1
    fi
    return 0
}
on_exit() {
    local rc=$?
    set +e
    trap - EXIT INT TERM
    cleanup 1
    [ "$rc" != 0 ] || rc=1
    echo "docker-test (Docker Engine): $passed passed, 1 failed${failure:+: $failure}"
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

# --- 2. a private dockerd ---------------------------------------------------
mkdir -p "$DROOT"
dockerd --data-root "$DROOT/root" --exec-root "$EXECROOT" -H "$DOCKER_HOST" \
    --pidfile "$TMP/dockerd.pid" --iptables=false --ip6tables=false --bridge=none \
    >"$TMP/dockerd.log" 2>&1 &
pid=$!
for ((i = 0; i < 60; i++)); do
    "$DOCKER" info >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
done
if ! "$DOCKER" info >/dev/null 2>&1; then
    why=$(grep -E 'level=(fatal|error)' "$TMP/dockerd.log" | tail -1)
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    umount "$EXECROOT"/netns/* 2>/dev/null
    trap - EXIT
    rm -rf "$TMP" "$EXECROOT"
    skip "dockerd does not start here: ${why:-no answer on $DOCKER_HOST within 30 s}"
fi
DPID=$pid
ok "dockerd $("$DOCKER" version -f '{{.Server.Version}}') running (private data root, no iptables), docker-compose $(docker-compose version --short)"

# --- 3. the base image --------------------------------------------------------
if ! "$DOCKER" image inspect "$BASE" >/dev/null 2>&1; then
    "$DOCKER" import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["bash"]' "$WORK/base.tar" "$BASE" >/dev/null || fail "docker import $WORK/base.tar failed"
fi

# --- 4. the image, classic builder and BuildKit ------------------------------
for builder in classic buildkit; do
    tag=$IMAGE
    bk=1
    if [ "$builder" = classic ]; then tag=$IMAGE-classic; bk=0; fi
    t0=$(date +%s)
    DOCKER_BUILDKIT=$bk timeout 1800 "$DOCKER" build --no-cache --network host \
        -f docker/Dockerfile -t "$tag" . >"$TMP/build.log" 2>&1 ||
        { tail -30 "$TMP/build.log" >&2; fail "docker build ($builder) failed (see above)"; }
    cfg=$("$DOCKER" image inspect -f '{{.Config.User}} {{json .Config.Healthcheck.Test}}' "$tag")
    case "$cfg" in
        "percolator:percolator "*percolator-healthcheck*) ;;
        *) fail "image ($builder) config not as expected: $cfg" ;;
    esac
    ok "docker build ($builder builder) in $(( $(date +%s) - t0 ))s: user percolator, HEALTHCHECK"
done
"$DOCKER" rmi "$IMAGE-classic" >/dev/null

# --- 5. docker-compose v1 up, with a token -----------------------------------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
SPORT=$(free_port)
B=http://127.0.0.1:$SPORT
TOKEN=$(head -c 18 /dev/urandom | base64 | tr '+/' '-_')
printf '%s\n' "$TOKEN" >"$TMP/token"
chmod 0644 "$TMP/token"
export PERCOLATOR_IMAGE=$IMAGE PERCOLATOR_PORT=$SPORT PERCOLATOR_BIND=127.0.0.1
export PERCOLATOR_AUTH_TOKEN_FILE=$TMP/token
unset PERCOLATOR_ORACLE_TOKEN_FILE PERCOLATOR_LOG_LEVEL PERCOLATOR_MEMORY PERCOLATOR_ORACLE_MEMORY

step "docker-compose up: project $PROJECT, service on $B"
t0=$(date +%s)
compose up -d || fail "docker-compose up failed"
oracle=$(docker-compose -p "$PROJECT" -f docker/compose.yml ps -q oracle 2>>"$TMP/compose.log")
service=$(docker-compose -p "$PROJECT" -f docker/compose.yml ps -q service 2>>"$TMP/compose.log")
[ -n "$oracle" ] && [ -n "$service" ] || fail "docker-compose up did not create both containers"
# `up` returned: the oracle was healthy before the service started.
ost=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$oracle")
[ "$ost" = healthy ] || fail "docker-compose up returned with the oracle '$ost' (depends_on: service_healthy)"
for ((i = 0; i < HEALTH_WAIT; i++)); do
    st=$("$DOCKER" inspect -f '{{.State.Health.Status}}' "$service")
    [ "$st" != healthy ] || break
    sleep 1
done
[ "$st" = healthy ] || fail "the service is '$st' after ${HEALTH_WAIT}s"
ok "docker-compose up: the service started after the oracle was healthy, both healthy (dockerd's own healthchecks) in $(( $(date +%s) - t0 ))s"

for c in "$oracle" "$service"; do
    out=$("$DOCKER" exec "$c" sh -c '
        [ "$(id -u)" = 10001 ] || echo "uid $(id -u)"
        awk "\$2 == \"/\" { exit \$4 !~ /^ro,/ }" /proc/mounts || echo "root file system mounted read-write"
        touch /data/.probe && rm -f /data/.probe || echo "/data not writable"
        grep -q "^CapBnd:[[:space:]]*0000000000000000$" /proc/1/status || echo "capability bounding set: $(grep ^CapBnd /proc/1/status)"
        grep -q "^NoNewPrivs:[[:space:]]*1$" /proc/1/status || echo "no-new-privileges off"
        exit 0' 2>&1) || fail "docker exec failed: $out"
    [ -z "$out" ] || fail "container $c: $(echo $out)"
done
mem=$("$DOCKER" inspect -f '{{.HostConfig.Memory}}' "$oracle" "$service" | tr '\n' ' ')
[ "$mem" = "$((128 * 1024 * 1024)) $((768 * 1024 * 1024)) " ] || fail "memory limits: $mem"
[ -z "$("$DOCKER" port "$oracle")" ] || fail "the oracle's port is published: $("$DOCKER" port "$oracle")"
ok "uid 10001, read-only root (/data writable), empty capability bounding set, no-new-privileges, memory limits 128m and 768m, the oracle unpublished"

code=$(curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
    -d '{"value":"docker"}' "$B/v1/kv/engine") || code=000
[ "$code" = 401 ] || fail "PUT without the token: $code, want 401"
out=$(curl -sS --max-time 30 -X PUT -H 'Content-Type: application/json' -H "Authorization: Bearer $TOKEN" \
    -d '{"value":"docker"}' "$B/v1/kv/engine") || fail "PUT with the token failed"
[[ "$out" =~ ^\{\"commit_ts\":[0-9]+\}$ ]] || fail "PUT with the token: $out"
out=$(curl -sS --max-time 30 -H "Authorization: Bearer $TOKEN" "$B/v1/kv/engine") || fail "GET failed"
[[ "$out" =~ ^\{\"key\":\"engine\",\"value\":\"docker\", ]] || fail "GET: $out"
ok "401 without the token (the compose secret), a commit read back through 127.0.0.1:$SPORT"

compose stop -t "$STOP_WAIT" || fail "docker-compose stop failed"
codes=$("$DOCKER" inspect -f '{{.State.ExitCode}}' "$oracle" "$service" | tr '\n' ' ')
[ "$codes" = "0 0 " ] || fail "exit codes on SIGTERM: $codes, want 0 0"
"$DOCKER" logs "$service" 2>&1 | grep -q 'service: stopped cleanly' || fail "the service's log has no 'stopped cleanly'"
compose down -v || fail "docker-compose down -v failed"
left=$("$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$PROJECT"
       "$DOCKER" volume ls -q --filter "label=com.docker.compose.project=$PROJECT"
       "$DOCKER" network ls -q --filter "label=com.docker.compose.project=$PROJECT")
[ -z "$left" ] || fail "docker-compose down -v left: $(echo $left)"
ok "docker-compose stop: both exited 0 (stopped cleanly); down -v removed containers, network and volumes"

# --- 6. three oracles at fixed addresses ---------------------------------------
unset PERCOLATOR_AUTH_TOKEN_FILE
NET=${PERCOLATOR_RAFT_NET:-172.28.90}
# health N: oracle N's /v1/health, asked inside its container.
health() {
    "$DOCKER" exec "${RPROJECT}_oracle$1_1" curl -fsS --max-time 3 http://127.0.0.1:8090/v1/health 2>/dev/null
}
leader() {
    local i
    for i in 1 2 3; do health "$i" | grep -q '"role":"leader"' && { echo "$i"; return 0; }; done
    return 0
}
put() {
    curl -sS --max-time 30 -o /dev/null -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
        -d "{\"value\":\"$1\"}" "$B/v1/kv/raft" 2>/dev/null || echo 000
}
# until CMD...: run CMD every half second until it succeeds, at most HEALTH_WAIT s.
until_ok() {
    local i
    for ((i = 0; i < HEALTH_WAIT * 2; i++)); do "$@" && return 0; sleep 0.5; done
    return 1
}
put_ok() { [ "$(put "$1")" = 200 ]; }
step "docker-compose up compose.raft.yml + compose.raft-ips.yml: project $RPROJECT, oracles at $NET.11-13"
t0=$(date +%s)
rcompose up -d || fail "docker-compose up (raft) failed"
for i in 1 2 3; do
    ip=$("$DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${RPROJECT}_oracle${i}_1")
    [ "$ip" = "$NET.1$i" ] || fail "oracle$i is at '$ip', want $NET.1$i"
done
until_ok put_ok one || fail "no commit through the raft group within ${HEALTH_WAIT}s (last: $(put one))"
l=""
until_ok eval 'l=$(leader); [ -n "$l" ]' || fail "no oracle says it leads"
ok "raft compose: oracles at $NET.11-13, oracle$l leads, the service committed through the group in $(( $(date +%s) - t0 ))s"

"$DOCKER" kill "${RPROJECT}_oracle${l}_1" >/dev/null || fail "docker kill oracle$l failed"
t0=$SECONDS
until_ok put_ok two || fail "no commit within ${HEALTH_WAIT}s after killing the leader oracle$l (last: $(put two))"
n=$(leader)
[ -n "$n" ] && [ "$n" != "$l" ] || fail "after killing oracle$l the leader is '${n:-none}'"
ok "killed the leader oracle$l: oracle$n leads, the service committed again after $((SECONDS - t0))s"

"$DOCKER" start "${RPROJECT}_oracle${l}_1" >/dev/null || fail "docker start oracle$l failed"
rejoined() { health "$l" | grep -qE "\"role\":\"follower\",(\"membership\":\"voter\",)?\"leader\":\\{(\"id\":[0-9]+,)?\"url\":\"http://oracle$n:8090\"\\}"; }
until_ok rejoined || fail "oracle$l did not rejoin as a follower of oracle$n: $(health "$l")"
until_ok put_ok three || fail "no commit after oracle$l came back"
ok "oracle$l running again (docker start) at its fixed address: a follower of oracle$n, commits go on"
rcompose down -v -t "$STOP_WAIT" || fail "docker-compose down -v (raft) failed"
ok "raft compose down -v"

# --- 7. the replicated service: compose.cluster.yml + compose.cluster-ips.yml --
# Each service on its own free host port; a follower passes requests on to
# the leader at its --raft-urls address inside the network.
CNET=${PERCOLATOR_CLUSTER_NET:-172.28.91}
J='Content-Type: application/json'
CPORT=("")
while [ ${#CPORT[@]} -lt 4 ]; do
    p=$(free_port)
    [[ " ${CPORT[*]} $SPORT " == *" $p "* ]] || CPORT+=("$p")
done
export PERCOLATOR_PORT1=${CPORT[1]} PERCOLATOR_PORT2=${CPORT[2]} PERCOLATOR_PORT3=${CPORT[3]}
dead=""                              # the member killed, skipped while it is down
# shealth N: service N's /v1/health, from the host.
shealth() { curl -fsS --max-time 3 "http://127.0.0.1:${CPORT[$1]}/v1/health" 2>/dev/null; }
# sleader: the member that says it leads while every other live member
# names it as its leader; empty until they agree.
sleader() {
    local i l=""
    for i in 1 2 3; do
        [ "$i" != "$dead" ] || continue
        if shealth "$i" | grep -q '"role":"leader"'; then l=$i; fi
    done
    [ -n "$l" ] || return 0
    for i in 1 2 3; do
        [ "$i" != "$dead" ] && [ "$i" != "$l" ] || continue
        # the leader by its URL (with a token set, public health has no id)
        shealth "$i" | grep -qE "\"role\":\"follower\",(\"membership\":\"voter\",)?\"leader\":\\{(\"id\":[0-9]+,)?\"url\":\"http://service$l:8080\"\\}" || return 0
    done
    echo "$l"
}
# creq N METHOD PATH [BODY]: "STATUS REDIRECTS BODY" of a request to
# service N that follows redirects as curl -L does (at most 2).
creq() {
    local args=(-sS -L --max-redirs 2 --max-time 30 -o "$TMP/body" -w '%{http_code} %{num_redirects}'
                -X "$2" "http://127.0.0.1:${CPORT[$1]}$3") out
    [ -z "${4:-}" ] || args+=(-H "$J" -d "$4")
    out=$(curl "${args[@]}" 2>/dev/null) || out="000 0"
    echo "$out $(cat "$TMP/body" 2>/dev/null)"
}
# creq_until PATTERN N METHOD PATH [BODY]: creq until its answer matches
# PATTERN (503s meanwhile: an election, the oracles' own); the last answer
# in R; fails after HEALTH_WAIT s.
creq_until() {
    local want=$1
    shift
    CARGS=("$@")   # (until_ok's eval sees its own "$@")
    until_ok eval 'R=$(creq "${CARGS[@]}"); [[ "$R" =~ $want ]]' ||
        fail "service$1 $2 $3: got '$R', want /$want/"
}
step "docker-compose up compose.cluster.yml + compose.cluster-ips.yml: project $CPROJECT, services on 127.0.0.1:${CPORT[1]},${CPORT[2]},${CPORT[3]}"
t0=$(date +%s)
ccompose up -d || fail "docker-compose up (cluster) failed"
for c in oracle1:11 oracle2:12 oracle3:13 service1:21 service2:22 service3:23; do
    ip=$("$DOCKER" inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "${CPROJECT}_${c%:*}_1")
    [ "$ip" = "$CNET.${c#*:}" ] || fail "${c%:*} is at '$ip', want $CNET.${c#*:}"
done
for i in 1 2 3; do
    [ -z "$("$DOCKER" port "${CPROJECT}_oracle${i}_1")" ] || fail "oracle$i's port is published"
done
L=""
until_ok eval 'L=$(sleader); [ -n "$L" ]' || fail "the services agree on no leader: $(for i in 1 2 3; do echo "service$i: $(shealth "$i" || echo none)"; done)"
F=""; G=""
for i in 1 2 3; do
    [ "$i" = "$L" ] && continue
    if [ -z "$F" ]; then F=$i; else G=$i; fi
done
creq_until '^200 0 \{"commit_ts":[0-9]+\}$' "$F" PUT /v1/kv/cluster '{"value":"one"}'
creq_until '^200 0 \{"key":"cluster","value":"one",' "$G" GET /v1/kv/cluster
ok "cluster compose: all six at $CNET.11-13/.21-23, service$L leads after $(( $(date +%s) - t0 ))s; a commit through follower service$F (passed on to the leader, no redirect), read back through service$G"
# Every service reports to the placement driver, the oracle group
# (--pd-heartbeat-ms, every 10 s; DESIGN 6.3), over the compose network
# with the oracle's token: the leader's own count of good reports.
creq_until '^200 0 .*percolator_pd_reports_total\{outcome="ok"\} [1-9]' "$L" GET /metrics
ok "cluster compose: service$L reports its regions to the placement driver in the oracle group"

"$DOCKER" kill "${CPROJECT}_service${L}_1" >/dev/null || fail "docker kill service$L failed"
dead=$L
t0=$SECONDS
until_ok eval 'L=$(sleader); [ -n "$L" ]' || fail "no service leads after killing service$dead"
creq_until '^200 0 \{"key":"cluster","value":"one",' "$F" GET /v1/kv/cluster
creq_until '^200 0 \{"commit_ts":[0-9]+\}$' "$G" PUT /v1/kv/cluster '{"value":"two"}'
ok "killed the leader service$dead: service$L leads after $((SECONDS - t0))s, the earlier commit is readable, a new one works"

# Started again at its fixed address, it rejoins as a follower and serves
# (passing the read on to the leader) the commit made while it was down.
"$DOCKER" start "${CPROJECT}_service${dead}_1" >/dev/null || fail "docker start service$dead failed"
k=$dead
dead=""
until_ok eval '[ "$(sleader)" = "$L" ]' || fail "service$k did not rejoin as a follower of service$L: $(shealth "$k" || echo none)"
creq_until '^200 0 \{"key":"cluster","value":"two",' "$k" GET /v1/kv/cluster
ok "service$k running again (docker start) at its fixed address: a follower of service$L, passes requests on to it"

ccompose stop -t "$STOP_WAIT" || fail "docker-compose stop (cluster) failed"
for c in oracle1 oracle2 oracle3 service1 service2 service3; do
    code=$("$DOCKER" inspect -f '{{.State.ExitCode}}' "${CPROJECT}_${c}_1")
    [ "$code" = 0 ] || fail "$c exited $code on SIGTERM, want 0"
    [[ "$c" != service* ]] || "$DOCKER" logs "${CPROJECT}_${c}_1" 2>&1 | grep -q 'service: stopped cleanly' ||
        fail "$c's log has no 'stopped cleanly'"
done
ccompose down -v || fail "docker-compose down -v (cluster) failed"
left=$("$DOCKER" ps -a -q --filter "label=com.docker.compose.project=$CPROJECT"
       "$DOCKER" volume ls -q --filter "label=com.docker.compose.project=$CPROJECT"
       "$DOCKER" network ls -q --filter "label=com.docker.compose.project=$CPROJECT")
[ -z "$left" ] || fail "docker-compose down -v (cluster) left: $(echo $left)"
ok "cluster compose stop: all six exited 0 (services stopped cleanly); down -v removed containers, network and volumes"

trap - EXIT INT TERM
set +e
cleanup 0 || fail "cleanup failed"
echo "docker-test (Docker Engine): $passed passed, 0 failed"
