#!/usr/bin/env bash
# Checks .env against this host before `docker compose up -d`: a CPU limit over the host's cores
# makes Docker refuse the container with "Range of CPUs is from 0.01 to N", which does not say
# which setting to change. This says it, in one line per setting.
#
#   docker/check-env.sh [.env] && docker compose up -d
set -euo pipefail
env_file=${1:-.env}
[[ -r $env_file ]] || { echo "check-env.sh: no $env_file here: cp docker/env.example .env" >&2; exit 1; }
cores=$(nproc)
status=0
for name in WORKER_CPUS CPU_WORKER_CPUS REDIS_CPUS MINIO_CPUS GATEWAY_CPUS; do
  value=$(sed -n "s/^$name=//p" "$env_file" | tail -n 1)
  value=${value:-0}
  if ! awk -v v="$value" 'BEGIN { exit !(v ~ /^[0-9]+(\.[0-9]+)?$/) }'; then
    echo "check-env.sh: $name=$value in $env_file is not a number of CPUs (0: no limit)" >&2
    status=1
  elif awk -v v="$value" -v n="$cores" 'BEGIN { exit !(v > n) }'; then
    echo "check-env.sh: $name=$value in $env_file is more than this host's $cores cores: set it to at most $cores (0: no limit)" >&2
    status=1
  fi
done
exit $status
