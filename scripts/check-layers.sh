#!/usr/bin/env bash
# scripts/check-layers.sh BUILD_DIR — the layering the design relies on,
# read off the compiled objects (nm), so it sees calls, not only includes:
#
#  1. no file of engine/ or service/ depends, through the functions it
#     calls, on a file of the same folder that depends back on it: the
#     call graph of each folder has no loop (tsort finds one if there is);
#  2. engine/ calls nothing of service/, oracle/ or common/ (it speaks only
#     WiredTiger and libc), and nothing outside engine/ calls WiredTiger;
#  3. cli/ (the command-line client) calls nothing of engine/, service/ or
#     oracle/: it speaks only HTTP;
#  4. only the Raft layer calls libraft: the host, its io guard and
#     transport, the node network's io and the message codec, the one
#     proposer (common/raft_host.c, raft_io_guard.c, raft_transport.c,
#     raft_io_net.c, raft_codec.c, raft_proposer.c) and the two replicated
#     state machines (service/raft_group.c, oracle/raft_fsm.c);
#  5. no route of the service (service/routes_*.c) calls the replicator
#     (raft_group_*, replicator_local_*): it goes through replica.c like
#     every other caller; and the replicator's calls (replicator.h, made
#     through its ops table, which nm cannot see) appear in the source of
#     replica.c and write_batch.c only;
#  6. only the service's HTTP layer answers a request (httpd_reply_*,
#     httpd_add_header): the routes (routes_*.c, backup_archive.c's
#     route), respond.c, and the parsers of a request (body.c, codec.c,
#     writes.c, one_shot_parse.c); the protocol code above the engine
#     (coordinator, one-shot runs, sessions, readers, leases, janitor, ...)
#     returns outcomes that these turn into answers.
#
# Prints the graph's size per folder and every loop or breach; exits 1 on any.
set -u
B=${1:-build/plain}
fail=0

# defs FILE.o: the global functions and data it defines
defs() { nm --defined-only -g "$1" 2>/dev/null | awk '$2 ~ /^[TDBR]$/ {print $3}'; }
# uses FILE.o: the symbols it needs from elsewhere
uses() { nm -u "$1" 2>/dev/null | awk '{print $NF}'; }

# edges FOLDER: "a b" when a.o calls something b.o defines (a != b)
edges() {
  local dir=$1 o
  declare -A owner
  for o in "$B/$dir"/*.o; do
    for s in $(defs "$o"); do owner[$s]=$(basename "$o" .o); done
  done
  for o in "$B/$dir"/*.o; do
    local me; me=$(basename "$o" .o)
    for s in $(uses "$o"); do
      local to=${owner[$s]:-}
      [ -n "$to" ] && [ "$to" != "$me" ] && echo "$me $to"
    done
  done | sort -u
}

for dir in engine service; do
  ls "$B/$dir"/*.o >/dev/null 2>&1 || { echo "check-layers: no objects in $B/$dir (build first)"; exit 1; }
  e=$(edges "$dir")
  n=$(printf '%s\n' "$e" | grep -c . || true)
  if out=$(printf '%s\n' "$e" | tsort 2>&1 >/dev/null) && [ -z "$out" ]; then
    echo "check-layers: $dir/: $n call edges between files, no loop"
  else
    echo "check-layers: $dir/: a loop in the call graph:"; printf '%s\n' "$out" | sed 's/^/  /'
    fail=1
  fi
done

# 2. engine/ needs only itself, WiredTiger and the C library.
for o in "$B"/engine/*.o; do
  bad=$(uses "$o" | grep -E '^(httpd_|svc_|coord_|rd_|sessions_|observers_|oc_|metrics_|log_|buf_|flags_|time_)' || true)
  [ -n "$bad" ] && { echo "check-layers: $(basename "$o") (engine) calls outside the engine: $bad"; fail=1; }
done
for dir in common service oracle cli; do
  for o in "$B/$dir"/*.o; do
    [ -e "$o" ] || continue
    bad=$(uses "$o" | grep -E '^wiredtiger_' || true)
    [ -n "$bad" ] && { echo "check-layers: $dir/$(basename "$o") calls WiredTiger: $bad"; fail=1; }
  done
done
# 3. cli/ (bin/percolator) is a client of the HTTP API only: it calls
#    nothing the engine, the service or the oracle define.
if ls "$B"/cli/*.o >/dev/null 2>&1; then
  inner=$(for o in "$B"/engine/*.o "$B"/service/*.o "$B"/oracle/*.o; do defs "$o"; done | sort -u)
  for o in "$B"/cli/*.o; do
    bad=$(uses "$o" | sort -u | comm -12 - <(printf '%s\n' "$inner") | tr '\n' ' ')
    [ -n "$bad" ] && { echo "check-layers: cli/$(basename "$o") calls the server's code: $bad"; fail=1; }
  done
  [ $fail = 0 ] && echo "check-layers: cli/ calls nothing of engine/, service/ or oracle/"
fi
[ $fail = 0 ] && echo "check-layers: engine/ speaks only WiredTiger; nothing else calls WiredTiger"

# 4. libraft's functions, as the library exports them.
libraft=$(${CC:-cc} -print-file-name=libraft.so)
raftfns=$(nm -D --defined-only "$libraft" 2>/dev/null | awk '$2 == "T" {print $3}' | sort -u)
if [ -z "$raftfns" ]; then
  echo "check-layers: cannot read libraft's functions from $libraft"; fail=1
else
  n=0
  for o in "$B"/common/*.o "$B"/service/*.o "$B"/oracle/*.o; do
    case "$o" in
      */common/raft_host.o|*/common/raft_io_guard.o|*/common/raft_transport.o) continue ;;
      */common/raft_proposer.o|*/common/raft_io_net.o|*/common/raft_codec.o) continue ;;
      */service/raft_group.o|*/oracle/raft_fsm.o) continue ;;
    esac
    n=$((n + 1))
    bad=$(uses "$o" | sort -u | comm -12 - <(printf '%s\n' "$raftfns") | tr '\n' ' ')
    [ -n "$bad" ] && { echo "check-layers: $o calls libraft outside the Raft layer: $bad"; fail=1; }
  done
  [ $fail = 0 ] && echo "check-layers: libraft is called only by the Raft layer ($n other files checked)"
fi
# 5. The routes reach the replicator through replica.c only.
for o in "$B"/service/routes_*.o; do
  bad=$(uses "$o" | grep -E '^(raft_group_|replicator_local_)' | tr '\n' ' ' || true)
  [ -n "$bad" ] && { echo "check-layers: service/$(basename "$o") calls the replicator: $bad"; fail=1; }
done
src=$(cd "$(dirname "$0")/.." && pwd)/service
for f in "$src"/*.c; do
  case $(basename "$f") in replica.c|write_batch.c|replicator_local.c|raft_group.c) continue ;; esac
  if grep -n -- '->ops->' "$f" >/dev/null; then
    echo "check-layers: service/$(basename "$f") calls the replicator's ops (only replica.c and write_batch.c may)"
    fail=1
  fi
done
[ $fail = 0 ] && echo "check-layers: no route calls the replicator"
# 6. Only the HTTP layer answers.
before=$fail
for o in "$B"/service/*.o; do
  case $(basename "$o") in
    routes_*.o|backup_archive.o|respond.o|body.o|codec.o|writes.o|one_shot_parse.o|main.o) continue ;;
  esac
  bad=$(uses "$o" | grep -E '^httpd_(reply|add_header)' | tr '\n' ' ' || true)
  [ -n "$bad" ] && { echo "check-layers: service/$(basename "$o") answers HTTP itself: $bad"; fail=1; }
done
[ $fail = "$before" ] && echo "check-layers: only the HTTP layer of the service answers requests"
exit $fail
