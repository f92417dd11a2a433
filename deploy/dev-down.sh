#!/usr/bin/env bash
# Stops what deploy/dev-up.sh started.
set -uo pipefail
cd "$(dirname "$0")/.."
dir=.cache/dev
for svc in redis minio; do
  if [ -f "$dir/$svc.pid" ]; then
    kill "$(cat "$dir/$svc.pid")" 2>/dev/null && echo "stopped $svc"
    rm -f "$dir/$svc.pid"
  fi
done
