#!/bin/sh
# Starts redis-server as the farm's broker: the settings below are written to a private config
# file, so the password shows in neither the process list nor the container's command.
#   REDIS_PASSWORD  required; letters, digits and ._~- only (it goes into redis:// URLs)
#   REDIS_BIND      addresses to listen on, space-separated (default 127.0.0.1)
#   REDIS_PORT      default 6379
# Any arguments are passed on to redis-server (e.g. --maxmemory 2gb).
set -eu
: "${REDIS_PASSWORD:?set REDIS_PASSWORD}"
case $REDIS_PASSWORD in
  *[!A-Za-z0-9._~-]*)
    echo "redis-start: REDIS_PASSWORD may hold only letters, digits and ._~- (it goes into URLs)" >&2
    exit 1 ;;
esac
umask 077
config=$(mktemp)
cat >"$config" <<CONF
bind ${REDIS_BIND:-127.0.0.1}
port ${REDIS_PORT:-6379}
requirepass $REDIS_PASSWORD
dir /data
# Queued jobs survive a restart; a broker must never evict keys to make room.
appendonly yes
appendfsync everysec
maxmemory-policy noeviction
CONF
exec redis-server "$config" "$@"
