#!/usr/bin/env bash
# Scores `tayga mine` (default configuration) on the Loghub-2k datasets: grouping accuracy
# (GA), parsing accuracy (PA), groups (ours/true), spurious templates and lines/s per
# dataset, plus the averages. Spurious: templates beyond the true number of events, at
# the end (`spur`) and counting every template ever born (`born+`, what the logminer
# announces at worst, when a new-template pass runs between a birth and the merge that
# retires it).
#
#   scripts/loghub_eval.sh [DATA_DIR] [MINE_COMMAND...]
#
# DATA_DIR holds one folder per dataset with X_2k.log_structured.csv (default
# $TAYGA_LOGHUB_2K, else ../shared/data/loghub2k beside the repository). MINE_COMMAND defaults to the release build of `tayga mine`
# ($CARGO_TARGET_DIR/release/tayga mine, built first). The scorer is
# ../shared/tools/loghub_score.py unless LOGHUB_SCORE names another copy.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
data=${1:-${TAYGA_LOGHUB_2K:-$repo/../shared/data/loghub2k}}
shift || true
score=${LOGHUB_SCORE:-$repo/../shared/tools/loghub_score.py}
if [ $# -gt 0 ]; then
    mine=("$@")
else
    target=${CARGO_TARGET_DIR:-target}
    cargo build --release --quiet
    mine=("$target/release/tayga" mine)
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-10s %7s %7s %8s %5s %6s %12s\n' dataset GA PA groups spur born+ lines/s
ga_sum=0 pa_sum=0 n=0
for dir in "$data"/*/; do
    name=$(basename "$dir")
    structured="$dir/${name}_2k.log_structured.csv"
    [ -f "$structured" ] || continue
    python3 "$score" extract "$structured" > "$work/$name.txt"
    # The 2k lines take a few milliseconds: mine a 50x copy for a readable rate.
    for _ in $(seq 50); do cat "$work/$name.txt"; done > "$work/$name.50x.txt"
    rate=$("${mine[@]}" "$work/$name.50x.txt" --stats --templates 2>&1 >/dev/null | awk '/^lines\/s/ {print $2}')
    "${mine[@]}" "$work/$name.txt" --stats > "$work/$name.csv" 2> "$work/$name.stats"
    born=$(awk '/^born/ {print $2}' "$work/$name.stats")
    result=$(python3 "$score" score "$structured" "$work/$name.csv")
    ga=$(awk '{print $2}' <<<"$result")
    pa=$(awk '{print $4}' <<<"$result")
    groups=$(awk '{print $8}' <<<"$result")
    truth=${groups#*/}
    spur=$(( ${groups%/*} > truth ? ${groups%/*} - truth : 0 ))
    born=${born:-${groups%/*}}
    bspur=$(( born > truth ? born - truth : 0 ))
    printf '%-10s %7s %7s %8s %5s %6s %12s\n' "$name" "$ga" "$pa" "$groups" "$spur" "$bspur" "$rate"
    ga_sum=$(python3 -c "print($ga_sum + $ga)")
    pa_sum=$(python3 -c "print($pa_sum + $pa)")
    n=$((n + 1))
done
python3 -c "print('%-10s %7.4f %7.4f' % ('average', $ga_sum / $n, $pa_sum / $n))"
