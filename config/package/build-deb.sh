#!/bin/sh
# Builds the Debian package: target/debian/secondhit_<version>-1_<arch>.deb (or where
# `--output DIR` says; every argument goes to `cargo deb`). Needs cargo-deb
# (`cargo install cargo-deb --locked`) and dpkg.
#
# `cargo deb` alone cannot: the package's man pages and shell completions are written by
# the release binary itself (`secondhit man`, `secondhit completions`), so they always
# match its command line, and that binary must exist first.
set -eu
cd "$(dirname "$0")/../.."

target=${CARGO_TARGET_DIR:-target}
cargo build --release --locked

# The paths [package.metadata.deb] assets name (target/release/ is the target dir's).
assets="$target/release/deb-assets"
rm -rf "$assets"
mkdir -p "$assets/man"
bin="$target/release/secondhit"
"$bin" man --dir "$assets/man"
# cargo-deb compresses the man pages of the source tree, not those under target/release/.
gzip -9n "$assets"/man/*.1 "$assets"/man/*.5
"$bin" completions bash >"$assets/secondhit.bash"
"$bin" completions zsh >"$assets/_secondhit"
"$bin" completions fish >"$assets/secondhit.fish"

cargo deb --no-build "$@"
