#!/usr/bin/env bash
# make check-packaging: what `make install` puts where, checked in temporary
# directories (nothing outside them is touched):
#  1. make install DESTDIR=<staging>: exactly the expected files, with their
#     modes; no staging path and no @placeholder@ left in them; the units
#     run /usr/local/bin's programs and read /etc/default/NAME; the
#     installed programs answer --version; every man page renders without a
#     warning from man/groff and has its sections. A settings file in
#     /etc/default is never overwritten; make uninstall removes everything
#     but an edited one.
#  2. make install PREFIX=<dir> sysconfdir=<dir>/etc: `systemd-analyze
#     verify` of the installed units says nothing (it exits 0 on unknown
#     keys and bad values, so any output fails), their man pages found;
#     `systemd-analyze security --offline` prints their exposure level.
#  3. The installed bash completion, called as bash would: commands,
#     subcommands, options, file names after --token-file; and it offers
#     every command and option `percolator --help` names.
# Run by `make check-packaging` (MAKE and BINDIR from it); tools missing:
# `make deps` installs them.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
BINDIR=${BINDIR:-bin}
VERSION=$(sed -n 's/^#define PERCOLATOR_VERSION "\(.*\)"$/\1/p' common/version.h)
PROGS="percolator-oracle percolator-service percolator"
UNITS="percolator-oracle percolator-service"
COMPLETION_LIB=/usr/share/bash-completion/bash_completion

passed=0
ok() { passed=$((passed + 1)); echo "check-packaging: ok: $*"; }
fail() {
    echo "check-packaging: FAIL: $*" >&2
    exit 1
}

for t in systemd-analyze man help2man; do
    command -v "$t" >/dev/null 2>&1 || fail "$t not found: run make deps (as root)"
done
[ -r "$COMPLETION_LIB" ] || fail "$COMPLETION_LIB not found (bash-completion): run make deps (as root)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/percolator-check-packaging.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# mk ARGS...: make quietly, its output shown only when it fails.
mk() {
    "$MAKE" --no-print-directory -s "$@" >"$TMP/make.log" 2>&1 ||
        { cat "$TMP/make.log" >&2; fail "make $* failed"; }
}

# --- 1. a staging install (DESTDIR), as a package build does ----------------
D=$TMP/stage
mk install DESTDIR="$D"
want="0644 etc/default/percolator-oracle
0644 etc/default/percolator-service
0755 usr/local/bin/percolator
0755 usr/local/bin/percolator-oracle
0755 usr/local/bin/percolator-service
0644 usr/local/lib/systemd/system/percolator-oracle.service
0644 usr/local/lib/systemd/system/percolator-service.service
0644 usr/local/share/bash-completion/completions/percolator
0644 usr/local/share/doc/percolator/percolator-oracle.default
0644 usr/local/share/doc/percolator/percolator-service.default
0644 usr/local/share/man/man1/percolator-oracle.1
0644 usr/local/share/man/man1/percolator-service.1
0644 usr/local/share/man/man1/percolator.1
0644 usr/local/share/percolator/service.yaml"
got=$(cd "$D" && find . -type f -printf '%m %P\n' | sed 's/^644 /0644 /; s/^755 /0755 /' | sort -k2)
[ "$got" = "$want" ] || fail "make install DESTDIR put (mode path):
$got
want:
$want"
! grep -rl -e "$D" -e '@[a-z]*dir@' "$D" >"$TMP/leaks" ||
    fail "the staging path or an @...dir@ placeholder is in: $(cat "$TMP/leaks")"
for u in $UNITS; do
    f=$D/usr/local/lib/systemd/system/$u.service
    grep -qx "ExecStart=/usr/local/bin/$u" "$f" || fail "$u.service does not run /usr/local/bin/$u"
    grep -qx "EnvironmentFile=-/etc/default/$u" "$f" || fail "$u.service does not read /etc/default/$u"
    cmp -s "$D/etc/default/$u" "$D/usr/local/share/doc/percolator/$u.default" ||
        fail "/etc/default/$u is not the example in share/doc/percolator"
done
grep -qx 'Environment=PERCOLATOR_OPENAPI_FILE=/usr/local/share/percolator/service.yaml' \
    "$D/usr/local/lib/systemd/system/percolator-service.service" ||
    fail "percolator-service.service does not point at the installed OpenAPI document"
ok "make install DESTDIR: the 14 files where they belong, modes 0755/0644, the units and settings name /usr/local and /etc, no staging path in them"

for p in $PROGS; do
    out=$("$D/usr/local/bin/$p" --version 2>&1) || fail "installed $p --version failed: $out"
    [ "$out" = "$p $VERSION" ] || fail "installed $p --version: '$out', want '$p $VERSION'"
done
ok "the installed programs answer --version ($VERSION)"

for p in $PROGS; do
    page=$D/usr/local/share/man/man1/$p.1
    # What lintian runs: groff's warnings on stderr.
    LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" \
        >/dev/null 2>"$TMP/man.err" || fail "man -l $p.1 failed: $(cat "$TMP/man.err")"
    [ ! -s "$TMP/man.err" ] || fail "man -l $p.1 warns: $(cat "$TMP/man.err")"
    text=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>&1 | col -bx)
    sections="NAME SYNOPSIS DESCRIPTION SEE.ALSO"
    [ "$p" = percolator ] && sections="$sections ENVIRONMENT EXAMPLES" || sections="$sections EXIT.STATUS SIGNALS FILES"
    for s in $sections; do
        grep -q "^$s\$" <<<"$text" || fail "man $p has no $s section"
    done
    grep -qE "^ *$p +- " <<<"$text" || fail "man $p: the NAME line is not '$p - ...'"
    grep -q -- "--help" <<<"$text" || fail "man $p does not show --help's options"
    grep -q "^$p $VERSION " <<<"$text" || fail "man $p: the footer does not say $p $VERSION"
done
ok "man pages: percolator-oracle.1, percolator-service.1, percolator.1 render without a warning, with their sections and version"

# Settings are the administrator's: kept by a second install, and by
# uninstall once edited.
echo 'PERCOLATOR_LOG_LEVEL=debug' >>"$D/etc/default/percolator-service"
mk install DESTDIR="$D"
tail -1 "$D/etc/default/percolator-service" | grep -qx 'PERCOLATOR_LOG_LEVEL=debug' ||
    fail "a second make install overwrote /etc/default/percolator-service"
mk uninstall DESTDIR="$D"
left=$(cd "$D" && find . -type f -printf '%P\n')
[ "$left" = etc/default/percolator-service ] ||
    fail "make uninstall left '$(echo $left)', want only the edited etc/default/percolator-service"
ok "install again keeps an edited /etc/default file; uninstall removes everything else (and the unedited /etc/default/percolator-oracle)"

# --- 2. an install into a prefix of its own: the units verified -------------
P=$TMP/prefix
mk install PREFIX="$P" sysconfdir="$P/etc"
units=()
for u in $UNITS; do units+=("$P/lib/systemd/system/$u.service"); done
out=$(MANPATH=$P/share/man systemd-analyze verify "${units[@]}" 2>&1) ||
    fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complains: $out"
ok "systemd-analyze verify $UNITS: no complaint (ExecStart found, Documentation= man pages found)"
for f in "${units[@]}"; do
    out=$(systemd-analyze security --offline=yes "$f" 2>&1) || fail "systemd-analyze security $f: $out"
    echo "check-packaging: $(grep 'Overall exposure level' <<<"$out" | sed 's/^→ //')"
done

# --- 3. bash completion ------------------------------------------------------
# complete LINE: what the installed completion offers for LINE's last word
# (LINE ends at the cursor), sorted, one line.
cat >"$TMP/complete.bash" <<'EOF'
source "$COMPLETION_LIB"
source "$COMPLETION_FILE"
complete_line() {
    COMP_LINE=$1
    COMP_POINT=${#1}
    read -ra COMP_WORDS <<<"$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    COMPREPLY=()
    _percolator percolator "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
    echo
}
while IFS= read -r line; do complete_line "$line"; done
EOF
complete() {
    (cd "$TMP/files" && printf '%s\n' "$@" |
        COMPLETION_LIB=$COMPLETION_LIB COMPLETION_FILE=$P/share/bash-completion/completions/percolator \
        bash --norc --noprofile "$TMP/complete.bash")
}
mkdir -p "$TMP/files/tokens" && touch "$TMP/files/token.txt"
G="--base64 --endpoint --endpoints --help --json --retries --timeout-ms --token-file --verbose --version"
while IFS='|' read -r line want; do
    got=$(complete "$line")
    [ "$got" = "$want" ] || fail "completion of '$line': got '$got', want '$want'"
done <<EOF
percolator |backup del get lease member pd put region scan status txn watch watch-claim
percolator g|get
percolator --json member |add lead list remove
percolator member r|remove
percolator --endpoint http://127.0.0.1:8080 member l|lead list
percolator member list |
percolator backup |restore save
percolator backup restore f --d|--dir
percolator get k |
percolator --|$G
percolator get k --|--base64 --endpoint --endpoints --help --json --retries --timeout-ms --token-file --ts --verbose --version
percolator scan --p|--page-size --prefix
percolator --json watch-claim obs --n|--no-ack
percolator watch svc/ --s|--start-ts
percolator put --if|--if-commit-ts
percolator lease |get grant keepalive list revoke
percolator lease keepalive 5 --ev|--every-ms
percolator pd |nodes regions
percolator pd regions --l|--limit
percolator --timeout-ms |
percolator --token-file tok|token.txt tokens
percolator put -- -k |
EOF
ok "bash completion: commands, member and backup subcommands, global and per-command options, file names after --token-file"

# Every command and option `percolator --help` names is offered: its
# first-column entries (the text before two spaces), commands from the
# "commands:" block, options anywhere in them.
help=$("$BINDIR/percolator" --help)
entries=$(grep -E '^  [^ ]' <<<"$help" | sed -E 's/^  //; s/  .*//')
cmds=$(awk '/^commands:/ { on = 1; next } /^$/ { on = 0 } on && /^  [a-z]/ { print $1 }' <<<"$help" | sort -u)
all_cmds=$(complete "percolator " | tr ' ' '\n')
for c in $cmds; do
    grep -qx -- "$c" <<<"$all_cmds" || fail "the completion does not offer the command '$c' of percolator --help"
    line=$(awk -v c="$c" '$1 == c' <<<"$entries" | head -1)
    offered=$(complete "percolator $c x --" | tr ' ' '\n')
    for o in $(grep -oE -- '--[a-z][a-z0-9-]*' <<<"$line" | sort -u); do
        grep -qx -- "$o" <<<"$offered" || fail "the completion does not offer $o after '$c' (percolator --help: $line)"
    done
done
offered=$(complete "percolator --" | tr ' ' '\n')
for o in $(grep -E '^--' <<<"$entries" | grep -oE -- '--[a-z][a-z0-9-]*' | sort -u); do
    grep -qx -- "$o" <<<"$offered" || fail "the completion does not offer the option $o of percolator --help"
done
ok "bash completion offers every command ($(echo $cmds)) and option of percolator --help"

echo "check-packaging: $passed passed, 0 failed"
