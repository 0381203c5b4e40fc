# Shared by the bench scripts (sourced).

# ctl LINE FILE: writes LINE to a ctl file and prints what a read of the
# same fd returns (the result, or the error)
ctl() {
	local fd
	exec {fd}<>"$2"
	printf '%s\n' "$1" >&"$fd"
	cat <&"$fd"
	exec {fd}>&-
}
