#!/usr/bin/env bash
# System packages the benchmarks need (Debian): libclang for the rocksdb crate's bindgen, and RocksDB itself as a
# system library (librocksdb-dev, 7.8.3 on bookworm; see .cargo/config.toml). LMDB (heed), redb, fjall and sled
# need nothing beyond a C compiler.
set -euo pipefail
need=()
# bindgen needs libclang itself (libclang.so or libclang-N.so); libclang-cpp, which other packages bring, is not it.
ldconfig -p 2>/dev/null | grep -Eq 'libclang(-[0-9.]+)?\.so' || need+=(libclang-dev)
[ -e /usr/lib/x86_64-linux-gnu/librocksdb.so ] || [ -e /usr/lib/librocksdb.so ] || need+=(librocksdb-dev)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update && $sudo apt-get install -y "${need[@]}"
fi
echo "bench setup: ok"
