# Daytona fixtures for tests outside the conformance suite (records.bats,
# daemon.bats): the shared remote fixtures with the daytona adapter, under
# the names those tests use.

load remote_helpers
conf_provider daytona

dt_require() { conf_require; }
dt_setup() { conf_setup "$@"; }
dt_teardown() { conf_teardown; }
dt_new() { conf_new "$@"; }
dt_run() { conf_run "$@"; }
