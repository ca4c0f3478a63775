#!/usr/bin/env bash
# libFuzzer over the decoders that read bytes from strangers.
#   scripts/fuzz.sh TARGET SECONDS     TARGET: bep15 | cluster | stomp | all
# Builds TrackerLogic, STOMP and their dependencies with coverage instrumentation
# (-sanitize=fuzzer) into .build-fuzz, links each target in Fuzz/ with swiftc directly
# (an executable target built by SwiftPM would bring a `main` of its own; the STOMP
# module needs NIOCore only, so no part of the runtime is instrumented), then runs it on a copy
# of its committed seed corpus (Fuzz/corpus/TARGET) for SECONDS. Crashes are written to
# .build-fuzz/crashes/TARGET and fail the script.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-}"; seconds="${2:-60}"
case "$target" in bep15|cluster|stomp) targets=("$target") ;; all) targets=(bep15 cluster stomp) ;;
    *) echo "usage: $0 bep15|cluster|stomp|all SECONDS" >&2; exit 2 ;; esac
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be a whole number" >&2; exit 2; }

scratch=.build-fuzz
swift build -c release --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --target TrackerLogic >/dev/null
swift build -c release --scratch-path "$scratch" -Xswiftc -sanitize=fuzzer -Xcc -fsanitize=fuzzer-no-link \
    --target STOMP >/dev/null
bin="$scratch/$(uname -m)-unknown-linux-gnu/release"
objects=() modulemaps=()
while IFS= read -r -d '' o; do objects+=("$o"); done < <(find "$bin" -name '*.o' -path '*.build/*' \
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

status=0
for t in "${targets[@]}"; do
    source_file="Fuzz/$(tr '[:lower:]' '[:upper:]' <<< "${t:0:1}")${t:1}Fuzz.swift"
    [ "$t" = bep15 ] && source_file=Fuzz/BEP15Fuzz.swift
    exe="$bin/fuzz-$t"
    swiftc -O -sanitize=fuzzer -parse-as-library -module-name "Fuzz_$t" -I "$bin/Modules" "${modulemaps[@]}" \
        "$source_file" "${objects[@]}" -o "$exe" 2> "$scratch/link-$t.log" \
        || { cat "$scratch/link-$t.log" >&2; exit 1; }
    corpus="$scratch/corpus/$t"; crashes="$scratch/crashes/$t"
    mkdir -p "$corpus" "$crashes"
    cp -n Fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
    echo "== fuzzing $t for ${seconds}s"
    if SWIFT_BACKTRACE=enable=no "$exe" "$corpus" -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$crashes/" > "$scratch/fuzz-$t.log" 2>&1; then
        grep -E 'stat::number_of_executed_units|stat::peak_rss_mb' "$scratch/fuzz-$t.log" | sed "s/^/  $t /"
        echo "  $t: no crash"
    else
        status=1
        echo "  $t: CRASH — see $scratch/fuzz-$t.log and $crashes" >&2
        tail -n 40 "$scratch/fuzz-$t.log" >&2
    fi
done
exit $status
