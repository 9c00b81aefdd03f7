#!/usr/bin/env bash
# Packs what `benches/vs_nginx.sh` needs into `.bench-bundle/`, so that it runs on a
# machine where nothing can be installed (the many-core run of docs/guide/bench.md):
# the release secondhit and examples/bare_proxy, nginx, wrk and, where it is installed
# here, perf, with every shared library they load, the dynamic loader included, and
# wrappers that start each through that loader, so the machine's own C library (older or
# newer) is never used. The same goes into `.bench-bundle.tgz`, for a machine the
# directory is too large to carry to. Then:
#
#   bash benches/device_bundle.sh                           # here: build and pack
#   tar xzf .bench-bundle.tgz && bash .bench-bundle/run.sh   # there, from the repository root
#
# run.sh puts the wrappers first on PATH, makes the directories Debian's nginx expects,
# and runs vs_nginx.sh with the bundled secondhit; its defaults (WORKERS="1 4 8",
# five cases, two rounds of 4 s) take about 6 minutes on 16 CPUs, and any of
# vs_nginx.sh's variables can be set to change them (PROFILE=1 profiles each case, with
# the bundled perf). With OUT set, the table is also written to $OUT/vs_nginx.txt.
# Needs here: nginx, wrk, cargo, ldd, git (linux-perf for profiles); there: bash,
# python3, taskset, tar. SECONDHIT_BIN packs that binary instead of building one, and
# BUNDLE names another directory (run.sh then needs benches/ beside it, as in the
# repository). BASELINE_COMMIT packs a second secondhit, the release build of that
# commit (built in a temporary worktree, or BASELINE_BIN when it names that build), and
# run.sh then measures it beside the first (vs_nginx.sh's A/B).
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in nginx wrk ldd tar; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "device_bundle: '$tool' is not installed (Debian: apt-get install nginx wrk)" >&2
    exit 2
  fi
done

BUNDLE=${BUNDLE:-.bench-bundle}
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/real" "$BUNDLE/lib" "$BUNDLE/bin"
if [[ -z "${SECONDHIT_BIN:-}" ]]; then
  cargo build --release --locked --quiet
  SECONDHIT_BIN=target/release/secondhit
fi
cp "$SECONDHIT_BIN" "$BUNDLE/real/secondhit"
# Bare hyper (examples/bare_proxy), which vs_nginx.sh sets beside secondhit's pass-through.
if [[ -z "${BARE_BIN:-}" ]]; then
  cargo build --release --locked --quiet --example bare_proxy
  BARE_BIN=target/release/examples/bare_proxy
fi
cp "$BARE_BIN" "$BUNDLE/real/bare_proxy"
# The commit the binary was built from, "+changes" when the tree differed from it.
echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo +changes)" >"$BUNDLE/commit"
programs="secondhit bare_proxy nginx wrk"
if [[ -n "${BASELINE_COMMIT:-}" && -z "${BASELINE_BIN:-}" ]]; then
  # Its own worktree and target directory, kept between bundles of the same commit.
  base_rev=$(git rev-parse --short "$BASELINE_COMMIT^{commit}")
  base_tree=$(mktemp -d -t secondhit-baseline.XXXXXX)
  base_target="$PWD/target/baseline-$base_rev"
  git worktree add --quiet --detach "$base_tree" "$base_rev"
  (cd "$base_tree" && cargo build --release --locked --quiet --target-dir "$base_target")
  git worktree remove --force "$base_tree"
  BASELINE_BIN="$base_target/release/secondhit"
  cp "$BASELINE_BIN" "$BUNDLE/real/secondhit-base"
  BASELINE_COMMIT=$base_rev
elif [[ -n "${BASELINE_BIN:-}" ]]; then
  cp "$BASELINE_BIN" "$BUNDLE/real/secondhit-base"
fi
if [[ -n "${BASELINE_BIN:-}" ]]; then
  echo "${BASELINE_COMMIT:-unknown}" >"$BUNDLE/baseline-commit"
  programs="$programs secondhit-base"
fi
cp "$(command -v nginx)" "$BUNDLE/real/nginx"
cp "$(command -v wrk)" "$BUNDLE/real/wrk"
if command -v perf >/dev/null 2>&1; then
  cp "$(command -v perf)" "$BUNDLE/real/perf"
  programs="$programs perf"
else
  echo "device_bundle: perf is not installed, so the bundle cannot profile (Debian: apt-get install linux-perf)" >&2
fi

# Every library the three load, by the path the loader resolved here.
loader=""
for binary in "$BUNDLE"/real/*; do
  while read -r path; do
    cp -L "$path" "$BUNDLE/lib/"
    case "$path" in */ld-linux*) loader=$(basename "$path") ;; esac
  done < <(ldd "$binary" | awk '/=> \// {print $3} /^[ \t]*\/.*ld-linux/ {print $1}')
done
if [[ -z "$loader" ]]; then
  echo "device_bundle: ldd named no dynamic loader for the binaries" >&2
  exit 1
fi

# A wrapper per program: exec keeps the PID, so vs_nginx.sh's PIDs and CPU times are the
# program's own; nginx's workers name themselves, so pgrep still finds them.
for program in $programs; do
  cat >"$BUNDLE/bin/$program" <<EOF
#!/usr/bin/env bash
here=\$(cd "\$(dirname "\${BASH_SOURCE[0]}")/.." && pwd)
exec "\$here/lib/$loader" --library-path "\$here/lib" "\$here/real/$program" "\$@"
EOF
  chmod +x "$BUNDLE/bin/$program"
done

cat >"$BUNDLE/run.sh" <<'EOF'
#!/usr/bin/env bash
# Runs benches/vs_nginx.sh with the bundled programs (see benches/device_bundle.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$here/bin:$PATH"
# Debian's nginx checks its compiled-in temp and log directories at start.
mkdir -p /var/lib/nginx /var/log/nginx 2>/dev/null || true
export SECONDHIT_BIN="$here/bin/secondhit"
if [[ -x "$here/bin/secondhit-base" ]]; then
  export BASELINE_BIN="$here/bin/secondhit-base"
fi
export BARE_BIN="$here/bin/bare_proxy"
export WORKERS=${WORKERS:-"1 4 8"}
export CASES=${CASES:-"hit-1k hit-100k pass-1k first-sight-1k miss-1k-nofsync"}
export ROUNDS=${ROUNDS:-2} DURATION=${DURATION:-4s} RSS_SECONDS=${RSS_SECONDS:-5}
{
  echo "machine: $(nproc) CPUs, $(uname -srm), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "caches on: $(df -T "${TMPDIR:-/tmp}" | awk 'NR == 2 {print $2, "(" $1 ")"}') under ${TMPDIR:-/tmp}"
  echo "built from: $(cat "$here/commit")"
  if [[ -n "${BASELINE_BIN:-}" ]]; then echo "baseline built from: $(cat "$here/baseline-commit"), $("$BASELINE_BIN" --version)"; fi
  echo "command: WORKERS=\"$WORKERS\" CASES=\"$CASES\" ROUNDS=$ROUNDS DURATION=$DURATION${PROFILE:+ PROFILE=$PROFILE}${PROFILE_CASES:+ PROFILE_CASES=\"$PROFILE_CASES\"}${TMPDIR:+ TMPDIR=$TMPDIR} bash benches/vs_nginx.sh"
  "$SECONDHIT_BIN" --version
  bash "$here/../benches/vs_nginx.sh"
} 2>&1 | tee "${OUT:-/tmp}/vs_nginx.txt"
EOF
chmod +x "$BUNDLE/run.sh"
tar czf "$BUNDLE.tgz" -C "$(dirname "$BUNDLE")" "$(basename "$BUNDLE")"
du -sh "$BUNDLE" "$BUNDLE.tgz"
