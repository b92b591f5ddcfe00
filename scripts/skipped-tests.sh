#!/usr/bin/env bash
# After ctest (`make test`): list the QtTest functions that skipped themselves
# (QSKIP: a data corpus or a tool missing on this machine). ctest counts their
# program as passed and --output-on-failure hides a passing program's output,
# but ctest's LastTest.log keeps every program's output whole.
# Usage: skipped-tests.sh BUILD_DIR/Testing/Temporary/LastTest.log
# Prints nothing when nothing was skipped; never changes the exit status.
log=${1:?usage: skipped-tests.sh LastTest.log}
[ -r "$log" ] || exit 0
# "SKIP   : TstCli::importTwoRanksAndInfo() external trace corpus not found at ..."
skips=$(grep -a '^SKIP   : ' "$log" | sed 's/^SKIP   : //' | sort)
[ -n "$skips" ] || exit 0
count=$(printf '%s\n' "$skips" | wc -l)
if [ "$count" -eq 1 ]; then
    echo "but 1 test function was skipped, so it checked nothing here:"
else
    echo "but $count test functions were skipped, so they checked nothing here:"
fi
printf '%s\n' "$skips" | sed 's/^/  /'
exit 0
