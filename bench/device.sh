#!/usr/bin/env bash
# Scaling rows on a machine that has no network and no Rust toolchain (the lent many-core machine, ADR-0215).
#
#   bash bench/device.sh pack [DIR]       here: build the bench (every backend), strip it, and copy it with every
#                                         shared library it loads, glibc's loader included, into DIR
#                                         (default bench/target/device, an ignored folder: carry it)
#   bash bench/device.sh run [ARGS...]    there: run the packed binary through the packed loader, so the machine's
#                                         own libraries (a different glibc or none of RocksDB's) do not matter
#
# `run` with no ARGS runs issue 27's rows at 1, 8 and 16 threads, synced and unsynced; ARGS replace those
# selection and budget options. The results go to $OUT (the device tool's output folder) or, without it, to
# bench/results/; the data to $DEVICE_DATA_DIR (default: a fresh folder under ${TMPDIR:-/tmp}, removed after);
# the pack is read from $DEVICE_PACK_DIR (default bench/target/device). Both refuse a pack that would load any
# library from outside it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pack_dir_default="$here/target/device"
# Issue 27's command (its table's rows), each row one 1.5 s run after a 0.5 s warm-up.
rows_default=(--records 1000000 --warmup-ms 500 --duration-ms 1500 --runs 1 --threads 1,8,16
  --engines holdfast,rocksdb-pessimistic,rocksdb-optimistic,lmdb,redb
  --workloads ycsb-c,ycsb-e,single-key-commit,tpcc-new-order)
binaries=(holdfast-bench append-scaling skiplist-scaling)

usage() {
  sed -n '2,14p' "$here/device.sh" | sed 's/^# \{0,1\}//'
}

# Every library `ldd` resolves for the binary, one path a line ("not found" is an error: the pack would not run).
libraries_of() {
  local binary=$1 listing
  listing=$(ldd "$binary")
  if grep -q "not found" <<<"$listing"; then
    echo "device.sh: $binary needs a library this machine lacks:" >&2
    grep "not found" <<<"$listing" >&2
    return 1
  fi
  awk '/=> \// { print $3 } /^[[:space:]]*\/[^ ]*ld-linux/ { print $1 }' <<<"$listing"
}

# Fails unless the packed loader resolves every library of every packed binary inside the pack (`DIR`, absolute):
# one found on this machine instead would be missing, or another version, there.
check_pack() {
  local dir=$1 binary outside
  for binary in "${binaries[@]}"; do
    outside=$("$dir/loader" --library-path "$dir/lib" --list "$dir/$binary" \
      | awk '/=>/ { print $1 " => " $3 }' | grep -v " => $dir/" || true)
    if [ -n "$outside" ]; then
      echo "device.sh: $dir/$binary would load libraries from outside the pack:" >&2
      echo "$outside" >&2
      return 1
    fi
  done
}

pack() {
  local dir=${1:-$pack_dir_default} binary library libraries
  command -v ldd > /dev/null || { echo "device.sh: pack needs ldd" >&2; exit 1; }
  bash "$here/setup.sh"
  (cd "$here" && cargo build --release --bins)
  rm -rf "$dir" && mkdir -p "$dir/lib"
  dir=$(cd "$dir" && pwd)
  for binary in "${binaries[@]}"; do
    cp "$here/target/release/$binary" "$dir/$binary"
    strip "$dir/$binary"
    # Assigned first: a failure inside `for`'s own list would not stop the script.
    libraries=$(libraries_of "$here/target/release/$binary")
    for library in $libraries; do
      cp -L "$library" "$dir/lib/$(basename "$library")"
    done
  done
  local loader
  loader=$(find "$dir/lib" -name 'ld-linux*' | head -n 1)
  [ -n "$loader" ] || { echo "device.sh: no dynamic loader among the libraries" >&2; exit 1; }
  # A copy, not a link: the device tool may not carry links.
  cp "$loader" "$dir/loader"
  git -C "$here" rev-parse HEAD > "$dir/commit" 2>/dev/null || echo unknown > "$dir/commit"
  check_pack "$dir"
  "$dir/loader" --library-path "$dir/lib" "$dir/holdfast-bench" --help > /dev/null
  echo "device.sh: packed $(du -sh "$dir" | cut -f1) into $dir (commit $(cat "$dir/commit")); carry it, then: bash bench/device.sh run"
}

run() {
  local dir=${DEVICE_PACK_DIR:-$pack_dir_default}
  [ -x "$dir/holdfast-bench" ] && [ -e "$dir/loader" ] \
    || { echo "device.sh: no pack in $dir: run 'bash bench/device.sh pack' here first, then carry $dir" >&2; exit 1; }
  dir=$(cd "$dir" && pwd)
  check_pack "$dir"
  local out_dir=${OUT:-$here/results}
  local data_dir stamp out
  data_dir=${DEVICE_DATA_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/holdfast-device-XXXXXX")}
  stamp="$(date -u +%Y-%m-%d)-device-$(nproc)cpu-$(cut -c1-7 "$dir/commit")"
  out="$out_dir/$stamp.json"
  local args=("$@")
  [ ${#args[@]} -gt 0 ] || args=("${rows_default[@]}")
  echo "device.sh: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg), pack of commit $(cat "$dir/commit")"
  echo "device.sh: results to $out, data in $data_dir"
  "$dir/loader" --library-path "$dir/lib" "$dir/holdfast-bench" "${args[@]}" \
    --no-readme --data-dir "$data_dir" --out "$out"
  rm -rf "$data_dir"
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; run "$@" ;;
  -h | --help | help) usage ;;
  *) usage >&2; exit 2 ;;
esac
