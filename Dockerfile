# The daemon's image, for users who build with Docker, Podman or BuildKit:
#   docker build -t registry.example.com/volumemanager:$(cat VERSION) .
# `make image` builds the equivalent image without any registry (image/build_image.sh): the same
# binary on the same Debian 12 runtime libraries, without the shell and package manager that
# debian:12-slim brings.

# Build: the Makefile installs the Debian build packages itself and builds the daemon alone (no
# tests); runtime_packages.sh names the packages holding the libraries the binary loads.
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make build BUILD_DIR=/build \
 && image/runtime_packages.sh /build/bin/volumemanager > /runtime-packages \
 && strip --strip-debug -o /volumemanager /build/bin/volumemanager

# Runtime: Debian 12 with only those libraries, the binary, and the licence notes (each package's
# /usr/share/doc/<package>/copyright, the list of packages with their versions, and the daemon's
# own LICENSE and NOTICE).
FROM debian:12-slim
COPY --from=build /runtime-packages /tmp/runtime-packages
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(cat /tmp/runtime-packages) \
 && mkdir -p /usr/share/doc/volumemanager \
 && dpkg-query -W -f '${Package} ${Version}\n' $(cat /tmp/runtime-packages) \
      > /usr/share/doc/volumemanager/packages.txt \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages
COPY --from=build /volumemanager /usr/bin/volumemanager
COPY LICENSE NOTICE /usr/share/doc/volumemanager/
ENTRYPOINT ["/usr/bin/volumemanager"]
