#!/bin/sh
# Writes v1/assigned.json, v1/last-known-good.json and v1/rolled-back.json here again with the
# CheckpointStore of the commit that introduced format version 1 (README.md), compiled apart from
# the build: run from anywhere in the repository; needs git, g++ and libssl-dev. The output must
# equal the committed files.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(git -C "$here" rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/driver.cc" <<'CC'
// Writes the dynamic config checkpoints with the CheckpointStore of the commit compiled.
#include <cstdio>
#include "dynamicconfig/checkpoint_store.h"
using namespace dynamicconfig;
int main(int, char** argv) {
  CheckpointStore store(argv[1]);
  if (!store.Init().ok()) return 1;
  Checkpoint good{"volumemanager", "vm-config", "0f2e9c7a-41d3-4c55-9b1e-2d6a8f0c3b11", "48213",
                  "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n"
                  "syncFrequency: 2m\n"};
  Checkpoint bad{"volumemanager", "vm-config-node-7", "6c1d0b9e-2a47-4f18-8e3d-5b9a7c2f1e22",
                 "48377",
                 "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n"
                 "kubeAPIQPS: 500\n"};
  Checkpoint trial{"volumemanager", "vm-config", "0f2e9c7a-41d3-4c55-9b1e-2d6a8f0c3b11", "48502",
                   "apiVersion: volumemanager.io/v1alpha1\nkind: VolumeManagerConfiguration\n"
                   "syncFrequency: 90s\nlogging: {format: json}\n"};
  if (!store.SaveLastKnownGood(good).ok()) return 1;
  if (!store.SaveRolledBack({bad, "3 runs on it ended without a graceful stop"}).ok()) return 1;
  if (!store.SaveAssigned({trial, 1764460800, 2, 1}).ok()) return 1;
  return 0;
}
CC
commit=9fc6e98
src="$work/src"
mkdir -p "$src"
git -C "$repo" archive "$commit" base dynamicconfig/checkpoint_store.h \
    dynamicconfig/checkpoint_store.cc | tar -x -C "$src"
g++ -std=c++20 -I "$src" "$work/driver.cc" "$src/dynamicconfig/checkpoint_store.cc" \
    "$src/base/durable_file.cc" "$src/base/sha256.cc" -lcrypto -o "$work/gen"
"$work/gen" "$work/state"
mkdir -p "$here/v1"
for f in assigned.json last-known-good.json rolled-back.json; do
  cp "$work/state/$f" "$here/v1/$f"
  chmod 644 "$here/v1/$f"
done
