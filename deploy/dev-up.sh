#!/usr/bin/env bash
# Starts Redis and MinIO on loopback for development and creates the bucket:
#   Redis  127.0.0.1:6379
#   MinIO  http://127.0.0.1:9000 (bucket "weir", user/password weir/weirweirweir)
# State lives under .cache/dev (gitignored). deploy/dev-down.sh stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=.cache/dev
mkdir -p "$dir/minio"
gobin="$(go env GOPATH)/bin"
export MINIO_ROOT_USER="${MINIO_ROOT_USER:-weir}" MINIO_ROOT_PASSWORD="${MINIO_ROOT_PASSWORD:-weirweirweir}"

if ! redis-cli -p 6379 ping >/dev/null 2>&1; then
  redis-server --port 6379 --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --pidfile "$PWD/$dir/redis.pid" --logfile "$PWD/$dir/redis.log"
fi
if ! curl -fsS http://127.0.0.1:9000/minio/health/live >/dev/null 2>&1; then
  MINIO_BROWSER=off nohup "$gobin/minio" server --address 127.0.0.1:9000 --console-address 127.0.0.1:9001 \
    "$dir/minio" >"$dir/minio.log" 2>&1 &
  echo $! >"$dir/minio.pid"
fi
for _ in $(seq 100); do
  curl -fsS http://127.0.0.1:9000/minio/health/live >/dev/null 2>&1 && break
  sleep 0.2
done
export AWS_ACCESS_KEY_ID="$MINIO_ROOT_USER" AWS_SECRET_ACCESS_KEY="$MINIO_ROOT_PASSWORD" AWS_REGION=us-east-1
bin/weir bucket create --store s3://weir --s3-endpoint http://127.0.0.1:9000
cat <<MSG
Redis on 127.0.0.1:6379, MinIO on http://127.0.0.1:9000 with bucket "weir".
To use them:
  export WEIR_REDIS_ADDR=127.0.0.1:6379 WEIR_STORE=s3://weir WEIR_S3_ENDPOINT=http://127.0.0.1:9000
  export AWS_ACCESS_KEY_ID=$MINIO_ROOT_USER AWS_SECRET_ACCESS_KEY=<the password> AWS_REGION=us-east-1
  bin/weir up --workers 3 &
  bin/weir deploy examples/surge-pricing.yaml
MSG
