#!/usr/bin/env bash
# gobench.sh: the Go benchmarks of some packages at two revisions, in one
# run, alternating, compared with benchstat.
#
# Builds each package's test binary at REV (in a temporary worktree) and in
# the working tree, then runs them in turn, COUNT times each, so that both
# see the same machine noise, and prints benchstat's table (old = REV,
# new = the working tree).
#
# Usage: bench/gobench.sh REV [PACKAGE...]   (default packages:
#        ./internal/engine ./internal/rpc)
# Environment: COUNT (6), BENCH (the -bench pattern, default .),
#              BENCHTIME (default 1s).
set -euo pipefail
cd "$(dirname "$0")/.."

REV=${1:?usage: bench/gobench.sh REV [PACKAGE...]}
shift
PKGS=("$@")
[ ${#PKGS[@]} -gt 0 ] || PKGS=(./internal/engine ./internal/rpc)
COUNT=${COUNT:-6}
BENCH=${BENCH:-.}
BENCHTIME=${BENCHTIME:-1s}

if ! command -v benchstat >/dev/null; then
	echo "installing benchstat" >&2
	GOFLAGS= go install golang.org/x/perf/cmd/benchstat@latest
fi
benchstat=$(command -v benchstat || echo "$(go env GOPATH)/bin/benchstat")

work=$(mktemp -d)
old=$work/old-src
cleanup() {
	git worktree remove --force "$old" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
git worktree add --detach "$old" "$REV" >/dev/null 2>&1

for pkg in "${PKGS[@]}"; do
	name=$(basename "$pkg")
	(cd "$old" && go test -c -o "$work/$name.old" "$pkg")
	go test -c -o "$work/$name.new" "$pkg"
done

for i in $(seq "$COUNT"); do
	echo "round $i/$COUNT" >&2
	for pkg in "${PKGS[@]}"; do
		name=$(basename "$pkg")
		for side in old new; do
			# Each binary runs in its package's directory, as go test would.
			dir=$pkg
			[ $side = old ] && dir=$old/$pkg
			(cd "$dir" && "$work/$name.$side" -test.run '^$' -test.bench "$BENCH" \
				-test.benchmem -test.benchtime "$BENCHTIME" -test.count 1) >>"$work/$side.txt"
		done
	done
done

echo "$(go version), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), old = $REV ($(git rev-parse --short "$REV")), new = $(git rev-parse --short HEAD)$(git diff --quiet || echo '+changes'), $COUNT alternating runs"
"$benchstat" "$work/old.txt" "$work/new.txt"
