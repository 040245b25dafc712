#!/usr/bin/env bash
# md2man.sh PAGE.md OUT VERSION: one man page from its Markdown source (docs/man/), with
# lowdown (Debian's package). The first line, "# name(S) — what", gives the page's
# name, section and NAME line; the "##" sections become the page's sections. A "\|" in
# a table cell (a pipe in Markdown's table syntax) prints as "|".
set -euo pipefail
src="$1" out="$2" version="$3"
first=$(head -n 1 "$src")
re='^# ([A-Za-z0-9_.-]+)\(([0-9])\) — (.*)$'
[[ $first =~ $re ]] || { echo "md2man: $src: the first line is not '# name(S) — what': $first" >&2; exit 1; }
name=${BASH_REMATCH[1]} section=${BASH_REMATCH[2]} what=${BASH_REMATCH[3]}
case $section in
  1) manual="User Commands" ;;
  3) manual="Library Functions Manual" ;;
  7) manual="Miscellaneous Information Manual" ;;
  8) manual="System Manager's Manual" ;;
  *) echo "md2man: $src: section $section is not one of 1, 3, 7, 8" >&2; exit 1 ;;
esac
{
  printf '# NAME\n\n%s \\- %s\n\n' "$name" "$what"
  tail -n +2 "$src" | sed -e 's/^##/#/' -e 's/\\|/@LNETPIPE@/g'
} | lowdown -s -Tman -M "title=$name" -M "section=$section" -M "source=lnet-mpi $version" \
  -M "manual=$manual" | sed 's/@LNETPIPE@/|/g' >"$out.tmp"
mv "$out.tmp" "$out"
