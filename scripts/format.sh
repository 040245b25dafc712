#!/usr/bin/env bash
# Formats the project's C and C++ sources with clang-format (.clang-format at the root).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   list the files that are not formatted and fail (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is missing (scripts/setup.sh installs it)" >&2; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) differ from .clang-format (run scripts/format.sh):" >&2
    printf '    %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files are formatted"
else
  clang-format -i "${files[@]}"
  echo "format: formatted ${#files[@]} files"
fi
