#!/usr/bin/env bash
# The bash completion of lnetctl and lst (generated from their command tables at build
# time): command words, subcommands, options of a command, global options, and the
# words after lnetctl's --socket PATH.
#   completion_test.sh COMPLETION_DIR
set -euo pipefail
dir="$1"
complete_of() {  # complete_of TOOL WORDS...: what TAB offers for the last word
  local tool=$1
  shift
  bash -c '. "$1/$2"; shift 2; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _'"$tool"'; echo "${COMPREPLY[*]}"' \
    _ "$dir" "$tool" "$@"
}
fails=0
expect() {  # expect "OFFERED" TOOL WORDS...
  local want=$1
  shift
  local got
  got=$(complete_of "$@" 2>&1)
  if [ "$got" != "$want" ]; then
    echo "completion_test: '$*<TAB>' offers '$got', expected '$want'" >&2
    fails=$((fails + 1))
  fi
}
expect "add" lnetctl lnetctl net a
expect "add del reset show" lnetctl lnetctl fault drop ""
expect "--net --nid" lnetctl lnetctl net add --n
expect "route routing" lnetctl lnetctl --socket /run/x.sock rou
expect "--socket" lnetctl lnetctl --s
expect "" lnetctl lnetctl ping 10.0.0.1@tcp ""
expect "add_batch add_group add_test" lst lst add_
expect "--batch" lst lst add_test --b
# Every command of the table is offered: lnetctl's first words as --list-commands has them.
for w in lnet net peer route routing set global stats ping discover import export udsp fault; do
  complete_of lnetctl lnetctl "" | tr ' ' '\n' | grep -qx "$w" || { echo "completion_test: no '$w'" >&2; fails=$((fails + 1)); }
done
((fails == 0)) && echo "completion_test: OK"
exit $((fails > 0))
