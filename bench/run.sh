#!/usr/bin/env bash
# One command to reproduce: `bash bench/run.sh --quick` (~15 minutes), `bash bench/run.sh` (the full run), or
# `bash bench/run.sh --targets` (only the rows of issue 16's targets table, at the full budget).
# Everything runs at the lowest CPU priority (nice 19) so a shared machine's other work keeps priority.
# A backend whose build fails is left out (its cargo feature dropped) and reported as a row with an error.
# Extra arguments go to the benchmark binary (see `bash bench/run.sh --help`).
set -uo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

# `--help` only explains: it installs nothing, builds nothing and measures nothing.
for arg in "$@"; do
  if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
    sed -n '2,6p' run.sh | sed 's/^# \{0,1\}//'
    echo "It first runs bench/setup.sh (apt-installs libclang-dev and librocksdb-dev where missing), then"
    echo "builds the benchmark binary (release) and runs it with your arguments."
    echo
    bin="$CARGO_TARGET_DIR/release/holdfast-bench"
    if [ -x "$bin" ]; then
      echo "The benchmark binary's options ($bin --help):"
      echo
      exec "$bin" --help
    fi
    echo "The benchmark binary's own options are listed here once it is built (any run of this script builds it;"
    echo "or: cd bench && cargo build --release)."
    exit 0
  fi
done

# A busy machine makes every number pessimistic and noisy: say so before anything runs (the binary checks again
# at the start and the end of the measurements and records it in the results file's meta.load_warning).
cores=$(nproc 2>/dev/null || echo 1)
load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo 0)
if awk -v load="$load" -v cores="$cores" 'BEGIN { exit !(load > cores) }'; then
  echo "bench: WARNING: load average $load is above the $cores cores: other work will compete with the benchmark" >&2
fi
bash setup.sh || echo "bench setup failed: rocksdb may not build" >&2

if nice -n 19 cargo build --release; then
  exec nice -n 19 cargo run --release -- "$@"
fi
ok=()
for f in holdfast rocksdb lmdb redb fjall sled; do
  if nice -n 19 cargo build --release --no-default-features --features "$f"; then
    ok+=("$f")
  else
    echo "bench: backend '$f' failed to build; it is reported as not built" >&2
  fi
done
[ ${#ok[@]} -gt 0 ] || { echo "bench: no backend builds" >&2; exit 1; }
features=$(IFS=,; echo "${ok[*]}")
exec nice -n 19 cargo run --release --no-default-features --features "$features" -- "$@"
