#!/usr/bin/env bash
# Builds the base image ttsfarm-base:bookworm from Debian packages alone, with no image registry:
# debootstrap a minimal Debian bookworm with Python 3.11, apply its updates, then `docker import`.
# The packages come from one snapshot of the Debian archive (snapshot.debian.org), so a base built
# today and one built next year hold the same package versions; move DEBIAN_SNAPSHOT forward on
# purpose to take Debian's later fixes.
#
#   sudo docker/build-base.sh                                   # the default snapshot below
#   sudo DEBIAN_SNAPSHOT=20261201T000000Z docker/build-base.sh  # a later one
#
# Environment (all optional):
#   BASE_IMAGE       tag to create (default ttsfarm-base:bookworm)
#   DEBIAN_SNAPSHOT  the archive's state to build from, a snapshot.debian.org timestamp
#                    (default below); empty: today's archive from DEBIAN_MIRROR (not reproducible)
#   DEBIAN_MIRROR    Debian mirror URL when DEBIAN_SNAPSHOT is empty (default: debootstrap's own)
#   EXTRA_CA_CERTS   space-separated PEM files added to the image's trust store, for networks
#                    whose HTTPS goes through an inspecting proxy (pip in the image build needs them)
# Needs root, debootstrap and a running Docker daemon.
set -euo pipefail

SUITE=bookworm
BASE_IMAGE=${BASE_IMAGE:-ttsfarm-base:bookworm}
DEBIAN_SNAPSHOT=${DEBIAN_SNAPSHOT-20261125T000000Z}
SNAPSHOT_ARCHIVE=https://snapshot.debian.org/archive
PACKAGES=python3,python3-venv,python3-pip,ca-certificates

[[ $(id -u) == 0 ]] || { echo "build-base.sh: run as root (debootstrap needs it)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "build-base.sh: install debootstrap first" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "build-base.sh: no Docker daemon answers" >&2; exit 1; }

rootfs=$(mktemp -d /var/tmp/ttsfarm-base.XXXXXX)
chmod 0755 "$rootfs"  # apt in the chroot downloads as the unprivileged _apt user
cleanup() {
  for mount in proc sys dev/pts dev; do
    mountpoint -q "$rootfs/$mount" && umount -l "$rootfs/$mount"
  done
  rm -rf --one-file-system "$rootfs"
}
trap cleanup EXIT

if [[ -n $DEBIAN_SNAPSHOT ]]; then
  [[ $DEBIAN_SNAPSHOT =~ ^[0-9]{8}T[0-9]{6}Z$ ]] \
    || { echo "build-base.sh: DEBIAN_SNAPSHOT=$DEBIAN_SNAPSHOT is not a timestamp like 20261125T000000Z" >&2; exit 1; }
  DEBIAN_MIRROR=$SNAPSHOT_ARCHIVE/debian/$DEBIAN_SNAPSHOT
fi

# The mirror this host's own apt uses: where a Debian build can surely reach.
host_mirror() {
  { grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
      | awk '{ print ($2 ~ /^\[/) ? $3 : $2 }'
    grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{ print $2 }'
  } | grep -v -- '-security' | head -n 1
}
# Fail before debootstrap, saying what to do, when the archive cannot be reached (debootstrap's
# own "Failed getting release file" names neither the cause nor the cure).
release=${DEBIAN_MIRROR:-http://deb.debian.org/debian}/dists/$SUITE/Release
if ! python3 -c 'import sys, urllib.request; urllib.request.urlopen(urllib.request.Request(sys.argv[1], method="HEAD"), timeout=20)' "$release" 2>/dev/null; then
  mirror=$(host_mirror)
  {
    echo "build-base.sh: cannot reach $release"
    if [[ -n $DEBIAN_SNAPSHOT ]]; then
      echo "  The Debian snapshot archive (DEBIAN_SNAPSHOT=$DEBIAN_SNAPSHOT) is out of this host's reach. Build"
      echo "  from a mirror it reaches instead (today's packages, so not reproducible):"
    else
      echo "  DEBIAN_MIRROR is out of this host's reach. Build from a mirror it reaches instead:"
    fi
    echo "    DEBIAN_SNAPSHOT= DEBIAN_MIRROR=${mirror:-http://deb.debian.org/debian} $0"
    [[ -z $mirror ]] || echo "  (that is the mirror of this host's apt)"
    echo "  Behind a TLS-inspecting proxy, add EXTRA_CA_CERTS=/path/to/proxy-ca.pem to that line."
  } >&2
  exit 1
fi

echo "debootstrap $SUITE into $rootfs from ${DEBIAN_MIRROR:-the default mirror of debootstrap}" >&2
# An empty DEBIAN_MIRROR leaves the mirror argument out: debootstrap then uses its default.
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$rootfs" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"}

# Point apt at the suite's updates and security archive as well, and apply them: the image starts
# at the snapshot's state (or today's) rather than at the release's point version. A snapshot's
# Release files are past their Valid-Until date by design, so apt is told not to check it; their
# signatures are still checked.
if [[ -n $DEBIAN_SNAPSHOT ]]; then
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb [check-valid-until=no] $SNAPSHOT_ARCHIVE/debian/$DEBIAN_SNAPSHOT $SUITE main
deb [check-valid-until=no] $SNAPSHOT_ARCHIVE/debian/$DEBIAN_SNAPSHOT $SUITE-updates main
deb [check-valid-until=no] $SNAPSHOT_ARCHIVE/debian-security/$DEBIAN_SNAPSHOT $SUITE-security main
EOF
else
  mirror=$(awk '$1 == "deb" { print $2; exit }' "$rootfs/etc/apt/sources.list")
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb ${mirror%/}-security $SUITE-security main
EOF
fi
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
# Packages installed in image builds must not try to start their services.
printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
for cert in ${EXTRA_CA_CERTS:-}; do
  cp "$cert" "$rootfs/usr/local/share/ca-certificates/$(basename "${cert%.*}").crt"
done
in_root() { chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
mount -t proc proc "$rootfs/proc"
in_root apt-get update -qq
in_root apt-get -y -qq -o Dpkg::Options::=--force-confold upgrade
in_root update-ca-certificates >/dev/null
in_root apt-get clean
umount "$rootfs/proc"

# What a container does not need: package lists, docs, man pages, the build host's resolver.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
  "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/log/*.log
: >"$rootfs/etc/resolv.conf"

echo "importing as $BASE_IMAGE" >&2
tar --numeric-owner -C "$rootfs" -c . | docker import \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'ENV LANG=C.UTF-8' \
  -c 'CMD ["/bin/bash"]' \
  -m "Debian $SUITE minbase with $PACKAGES, snapshot ${DEBIAN_SNAPSHOT:-none, the archive of the build day}" - "$BASE_IMAGE"
docker run --rm --network host "$BASE_IMAGE" python3 --version
