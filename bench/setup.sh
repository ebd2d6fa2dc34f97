#!/usr/bin/env bash
# System packages the benchmarks need: libclang for rocksdb's bindgen (librocksdb-sys builds RocksDB from source).
# LMDB (heed), redb, fjall and sled need nothing beyond a C compiler.
set -euo pipefail
if ! ldconfig -p 2>/dev/null | grep -q 'libclang'; then
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update && apt-get install -y libclang-dev
  else
    sudo apt-get update && sudo apt-get install -y libclang-dev
  fi
fi
echo "bench setup: ok"
