#!/bin/sh
# Every configuration key the code reads is a row of an option table, so a
# user can set it and --help lists it: a key read with no row could never be
# set (-o and the config file reject unknown keys).
#
#   sh tests/unit/option_keys.sh SOURCE_DIR SANDBOXFS_BINARY
set -u
src=$1
bin=$2
help=$("$bin" --help) || { echo "option_keys: $bin --help failed"; exit 1; }
keys=$(cd "$src" && grep -rhoE \
	'sfs_(config|opt)_get(_double|_bool)?\("[^"]+"|sfs_http_credential\("[^"]*", *"[^"]+"|sfs_http_base_url\("[^"]+"' \
	--include='*.c' fs ctl journal providers | sed -E 's/.*"([^"]+)"$/\1/' | sort -u)
[ -n "$keys" ] || { echo "option_keys: found no key reads under $src (pattern out of date?)"; exit 1; }
n=0 bad=0
for k in $keys; do
	n=$((n + 1))
	if ! printf '%s\n' "$help" | grep -qE -- "-o $k(=| |\$)"; then
		echo "option_keys: the code reads \"$k\" but no option table has it (add a row)"
		bad=$((bad + 1))
	fi
done
echo "option_keys: $n keys read, $bad without a row"
[ "$bad" -eq 0 ]
