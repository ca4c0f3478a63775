#!/usr/bin/env bash
# libFuzzer over the decoders that read bytes from strangers.
#   scripts/fuzz.sh TARGET SECONDS     TARGET: bep15 | cluster | stomp | http | all
#   scripts/fuzz.sh build              builds and links every target, fuzzes nothing
# Builds TrackerLogic, STOMP and their dependencies with coverage instrumentation
# (-sanitize=fuzzer) into .build-fuzz, links each target in Fuzz/ with swiftc directly
# (an executable target built by SwiftPM would bring a `main` of its own; the STOMP
# module needs NIOCore only, so no part of the runtime is instrumented), then runs it on a copy
# of its committed seed corpus (Fuzz/corpus/TARGET) for SECONDS. Crashes are written to
# .build-fuzz/crashes/TARGET and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"; seconds="${2:-60}"
build_only=0
case "$target" in bep15|cluster|stomp|http) targets=("$target") ;; all) targets=(bep15 cluster stomp http) ;;
    build) targets=(bep15 cluster stomp http); build_only=1 ;;
    *) echo "usage: $0 bep15|cluster|stomp|http|all SECONDS, or $0 build" >&2; exit 2 ;; esac
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number" >&2; exit 2; }

scratch=.build-fuzz
swift build -c release --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --target TrackerLogic >/dev/null
swift build -c release --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --target STOMP >/dev/null
bin="$scratch/$(uname -m)-unknown-linux-gnu/release"
objects=() modulemaps=()
# An object whose source its target no longer lists (a renamed or removed file) is left
# behind by SwiftPM; linked, it defines a type twice.
is_current() {
    local dir; dir="$(dirname "$1")"
    [ -f "$dir/sources" ] || return 0
    grep -qF "/$(basename "$1" .o)" "$dir/sources"
}
while IFS= read -r -d '' o; do is_current "$o" && objects+=("$o"); done < <(find "$bin" -name '*.o' -path '*.build/*' \
    ! -path '*/tracker.build/*' ! -path '*/TrackerRuntime.build/*' ! -path '*/Simulation.build/*' ! -path '*-tool.build/*' ! -path '*Tests.build/*' ! -path '*PackageTests*' \
    ! -path '*PackageDiscovered*' -print0)
# Each C module once: SwiftPM writes its own module map for some packages that also ship
# one (TOMLKit's CTOML), and clang refuses a module defined twice.
declare -A seen_modules=()
while IFS= read -r -d '' m; do
    name=$(sed -n 's/^[[:space:]]*\(explicit[[:space:]]\+\)\?module[[:space:]]\+\([A-Za-z0-9_]\+\).*/\2/p' "$m" | head -n 1)
    [ -n "$name" ] && [ -n "${seen_modules[$name]:-}" ] && continue
    [ -n "$name" ] && seen_modules[$name]=1
    modulemaps+=(-Xcc "-fmodule-map-file=$m")
done < <( \
    find "$bin" -name module.modulemap ! -path '*-tool.build/*' -print0
    find "$scratch/checkouts" -path '*/Sources/*' -name module.modulemap ! -path '*SQLCipher*' -print0)

# Every target is linked first; then they fuzz two at a time (each fuzzer is one thread,
# so two cores give each its full SECONDS of fuzzing in less wall time).
for t in "${targets[@]}"; do
    source_file="Fuzz/$(tr '[:lower:]' '[:upper:]' <<< "${t:0:1}")${t:1}Fuzz.swift"
    [ "$t" = bep15 ] && source_file=Fuzz/BEP15Fuzz.swift
    swiftc -O -sanitize=fuzzer -parse-as-library -module-name "Fuzz_$t" -I "$bin/Modules" "${modulemaps[@]}" \
        "$source_file" "${objects[@]}" -o "$bin/fuzz-$t" 2> "$scratch/link-$t.log" \
        || { cat "$scratch/link-$t.log" >&2; exit 1; }
done

[ "$build_only" = 1 ] && exit 0

# fuzz_one TARGET: runs it for SECONDS on a copy of its corpus; prints its figures, or
# the crash and a non-zero status.
fuzz_one() {
    local t="$1" corpus="$scratch/corpus/$1" crashes="$scratch/crashes/$1"
    mkdir -p "$corpus" "$crashes"
    cp -n Fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
    if SWIFT_BACKTRACE=enable=no "$bin/fuzz-$t" "$corpus" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes/" > "$scratch/fuzz-$t.log" 2>&1; then
        { echo "== fuzzed $t for ${seconds}s"
          grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$scratch/fuzz-$t.log" | sed "s/^/  $t /"
          echo "  $t: no crash"; }
    else
        { echo "== fuzzed $t for ${seconds}s"
          echo "  $t: CRASH — see $scratch/fuzz-$t.log and $crashes"
          tail -n 40 "$scratch/fuzz-$t.log"; } >&2
        return 1
    fi
}
export -f fuzz_one
export scratch bin seconds
printf '%s\0' "${targets[@]}" | xargs -0 -n 1 -P 2 bash -c 'fuzz_one "$1"' _
