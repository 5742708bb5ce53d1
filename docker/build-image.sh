#!/usr/bin/env bash
# Builds the ttsfarm image from the committed tree (HEAD), tagged ttsfarm:<commit> and ttsfarm:latest.
# Only committed files go in: what is deployed is what is in git, and nothing local (.venv, output,
# caches) is sent to the daemon. Build the base first: docker/build-base.sh.
#
#   docker/build-image.sh                          # GPU image (CUDA and cuDNN wheels included)
#   docker/build-image.sh --build-arg ORT_EXTRAS=  # CPU-only image, about 2 GB smaller
#
# Environment: IMAGE_NAME (default ttsfarm), REVISION (default HEAD), EXTRA_CA_CERTS (space-
# separated PEM files trusted in the image, for networks whose HTTPS goes through an inspecting
# proxy: pip in the build needs them). Extra arguments go to docker build. A failed build leaves
# no container behind (--force-rm).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_NAME=${IMAGE_NAME:-ttsfarm}
REVISION=${REVISION:-HEAD}
commit=$(git rev-parse --short=12 "$REVISION^{commit}")
if [[ $REVISION == HEAD ]] && ! git diff --quiet HEAD -- pyproject.toml scripts/constraints.txt ttsfarm synthesis worker producer gateway docker; then
  echo "build-image.sh: note: uncommitted changes are not in the image (it is built from $commit)" >&2
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
git archive --format=tar "$commit" | tar -x -C "$context"
for cert in ${EXTRA_CA_CERTS:-}; do
  [[ -r $cert ]] || { echo "build-image.sh: cannot read EXTRA_CA_CERTS file $cert" >&2; exit 1; }
  cp "$cert" "$context/docker/extra-ca/$(basename "${cert%.*}").crt"
done

log="$context/build.log"
if ! docker build --network host --force-rm \
  -f docker/Dockerfile \
  --build-arg REVISION="$commit" \
  -t "$IMAGE_NAME:$commit" -t "$IMAGE_NAME:latest" \
  "$@" "$context" 2>&1 | tee "$log"; then
  if grep -q CERTIFICATE_VERIFY_FAILED "$log"; then
    echo "build-image.sh: pip could not verify HTTPS certificates: a proxy inspects this network's" >&2
    echo "  TLS. Give its CA certificate: EXTRA_CA_CERTS=/path/to/proxy-ca.pem $0 $*" >&2
  elif grep -q "pull access denied\|repository does not exist" "$log"; then
    echo "build-image.sh: the base image is missing: build it first with docker/build-base.sh" >&2
  fi
  echo "build-image.sh: the build failed (see above); nothing was tagged" >&2
  exit 1
fi
echo "built $IMAGE_NAME:$commit (also $IMAGE_NAME:latest)" >&2
