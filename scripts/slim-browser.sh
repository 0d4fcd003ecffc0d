#!/usr/bin/env bash
# Runs the given command (default: one browser test file) with the system's NSS, NSPR and expat
# libraries hidden in a private mount namespace, as on a slim image that has no libnss3: the
# browser tests must pass on the libraries @sparticuz/chromium ships. Needs root (unshare -m).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$#" -eq 0 ]; then set -- npx vitest run test/web/chat.test.ts; fi
exec unshare -m -- bash -c '
  set -euo pipefail
  hidden=0
  for f in $(ldconfig -p | grep -E "lib(nss3|nssutil3|smime3|softokn3|freebl3|nspr4|plc4|plds4|expat)\.so" | sed "s/.*=> //" | sort -u); do
    real="$(readlink -f "$f")"
    mount --bind /dev/null "$real"
    hidden=$((hidden + 1))
  done
  echo "slim-browser: hid $hidden system libraries (NSS, NSPR, expat)"
  exec "$@"
' slim-browser "$@"
