# The daemon's image, for users who build with Docker, Podman or BuildKit:
#   docker build -t registry.example.com/volumemanager:$(cat VERSION) .
# `make image` builds the equivalent image without any registry (image/build_image.sh): the same
# binary on the same Debian 12 runtime libraries, without the shell and package manager that
# debian:12-slim brings.

# Build: the Makefile installs the Debian build packages itself and builds the daemon alone (no
# tests); runtime_packages.sh names the packages holding the libraries the binary loads,
# linked_packages.sh those whose libraries are linked into it (their licence notes are copied).
FROM debian:12 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends make \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN make build BUILD_DIR=/build \
 && image/runtime_packages.sh /build/bin/volumemanager > /runtime-packages \
 && image/linked_packages.sh /build/bin/volumemanager > /linked-packages \
 && mkdir -p /linked/doc \
 && for p in $(cat /linked-packages); do \
      install -D -m 0644 /usr/share/doc/$p/copyright /linked/doc/$p/copyright; \
      dpkg-query -W -f '${Package} ${Version} (linked into the daemon)\n' $p >> /linked/packages.txt; \
    done \
 && touch /linked/packages.txt \
 && strip --strip-debug -o /volumemanager /build/bin/volumemanager

# Runtime: Debian 12 with only those libraries, the binary, and the licence notes (each package's
# /usr/share/doc/<package>/copyright, the linked packages' too, the list of packages with their
# versions, and the daemon's own LICENSE and NOTICE).
FROM debian:12-slim
COPY --from=build /runtime-packages /tmp/runtime-packages
COPY --from=build /linked/doc/ /usr/share/doc/
COPY --from=build /linked/packages.txt /tmp/linked-packages.txt
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(cat /tmp/runtime-packages) \
 && mkdir -p /usr/share/doc/volumemanager \
 && dpkg-query -W -f '${Package} ${Version}\n' $(cat /tmp/runtime-packages) \
      > /usr/share/doc/volumemanager/packages.txt \
 && cat /tmp/linked-packages.txt >> /usr/share/doc/volumemanager/packages.txt \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages /tmp/linked-packages.txt
COPY --from=build /volumemanager /usr/bin/volumemanager
COPY LICENSE NOTICE /usr/share/doc/volumemanager/
ENTRYPOINT ["/usr/bin/volumemanager"]
