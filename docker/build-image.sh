#!/usr/bin/env bash
# Builds the ttsfarm image from the committed tree (HEAD), tagged ttsfarm:<commit> and ttsfarm:latest.
# Only committed files go in: what is deployed is what is in git, and nothing local (.venv, output,
# caches) is sent to the daemon. Build the base first: docker/build-base.sh.
#
#   docker/build-image.sh                          # GPU image (CUDA and cuDNN wheels included)
#   docker/build-image.sh --build-arg ORT_EXTRAS=  # CPU-only image, about 2 GB smaller
#
# Environment: IMAGE_NAME (default ttsfarm), REVISION (default HEAD). Extra arguments go to docker build.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE_NAME=${IMAGE_NAME:-ttsfarm}
REVISION=${REVISION:-HEAD}
commit=$(git rev-parse --short=12 "$REVISION^{commit}")
if [[ $REVISION == HEAD ]] && ! git diff --quiet HEAD -- pyproject.toml scripts/constraints.txt ttsfarm synthesis worker producer gateway bench docker; then
  echo "build-image.sh: note: uncommitted changes are not in the image (it is built from $commit)" >&2
fi

git archive --format=tar "$commit" | docker build --network host \
  -f docker/Dockerfile \
  --build-arg REVISION="$commit" \
  -t "$IMAGE_NAME:$commit" -t "$IMAGE_NAME:latest" \
  "$@" -
echo "built $IMAGE_NAME:$commit (also $IMAGE_NAME:latest)" >&2
