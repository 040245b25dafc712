#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main demo (a single-host, built-in
# configuration): LNet on 0@lo pings itself and does PUT/GET round trips with checks.
# Extra arguments go to the demo (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh default
exec build/default/examples/lnet-demo "$@"
