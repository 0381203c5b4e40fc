#!/usr/bin/env bats
# The aws provider's runs as CodeBuild builds (aws.runner=codebuild or new
# runner=codebuild) against tests/emulators/aws, which SigV4-checks
# StartBuild, BatchGetBuilds and StopBuild and runs a build's buildspec
# command exactly as it runs an ECS task (in bubblewrap), so the run reads
# and writes the workspace through the bucket and its output is the build's
# CloudWatch Logs stream.  Every test starts its own emulator and daemon.

load helpers
load remote_helpers # emu_obj
load aws_helpers

AWS_EMU="$SFS_ROOT/tests/emulators/aws/aws_emulator.py"

build_mount() {
	sfs_mount --log-level 3 -o aws.bucket=bkt -o aws.runner=codebuild \
		-o aws.codebuild_project=proj "$@"
}

setup() {
	command -v curl >/dev/null || skip "aws codebuild: the run script needs curl"
	bwrap --ro-bind / / true 2>/dev/null || skip "aws codebuild: the emulator runs builds in bubblewrap, which does not work here"
	aws_emu_start "$AWS_EMU" --codebuild-project proj:example.com/build:1 --stop-timeout 3
	build_mount
}

teardown() {
	sfs_teardown
	aws_emu_stop
}

@test "aws codebuild: exec is a build that reads and writes the workspace; its exit code and journal" {
	ctl_write "$MNT/ctl" "new b1 provider=aws prefix=team env.GREETING=hello"
	W="$MNT/b1/workspace"
	echo in >"$W/in.txt"
	n=$(ctl_write "$MNT/b1/ctl" 'exec pwd; echo "$GREETING"; cat in.txt; echo out >out.txt; rm in.txt; echo bye >&2; exit 3')
	[ "$n" = 1 ]
	[ "$(timeout 60 cat "$MNT/b1/runs/1/wait")" = "exited 3" ]
	[ "$(cat "$MNT/b1/runs/1/status")" = "exited 3" ]
	[ "$(cat "$MNT/b1/runs/1/journal")" = "/workspace
hello
in
bye" ]
	grep -q 'CodeBuild_20161006.StartBuild 200' "$EMU_DIR/requests.log"
	grep -q 'CodeBuild_20161006.BatchGetBuilds 200' "$EMU_DIR/requests.log"
	run ! grep -q 'AmazonEC2ContainerServiceV20141113' "$EMU_DIR/requests.log"
	[[ "$(aws_task 1 taskArn)" == arn:aws:codebuild:us-east-1:000000000000:build/proj:* ]]
	[ "$(aws_task 1 exitCode)" = 3 ]
	[ "$(aws_task 1 image)" = example.com/build:1 ]
	[ "$(obj_size team/b1/out.txt)" = 4 ]
	[ -z "$(obj_size team/b1/in.txt)" ]
	# a second daemon finds the build's run and journal; the script (env,
	# presigned URLs) is gone from the bucket, the exit status object stays
	sfs_unmount
	build_mount
	[ "$(cat "$MNT/b1/runs/1/status")" = "exited 3" ]
	[ "$(tail -n 1 "$MNT/b1/runs/1/journal")" = bye ]
	[ "$(cat "$MNT/b1/workspace/out.txt")" = out ]
	run ! grep -q '"team/.sandboxfs/b1/runs/[^"]*/job.sh"' <(curl -s "$EMU/_emu/objects?bucket=bkt")
	grep -q '"team/.sandboxfs/b1/runs/[^"]*/exit"' <(curl -s "$EMU/_emu/objects?bucket=bkt")
	# exit 0 and a signal
	ctl_write "$MNT/b1/ctl" 'exec kill -USR1 $$'
	[ "$(timeout 60 cat "$MNT/b1/runs/2/wait")" = "killed USR1" ]
	ctl_write "$MNT/b1/ctl" 'exec true'
	[ "$(timeout 60 cat "$MNT/b1/runs/3/wait")" = "exited 0" ]
}

@test "aws codebuild: kill is StopBuild; what the build wrote before is synced back" {
	grep -qx 'killableProcesses true' "$MNT/providers/aws/caps"
	ctl_write "$MNT/ctl" "new b2 provider=aws"
	ctl_write "$MNT/b2/ctl" 'exec echo before >b.txt; echo started; sleep 300; echo never >n.txt'
	wait_for grep -q started "$MNT/b2/runs/1/journal"
	[ "$(aws_task 1 lastStatus)" = RUNNING ]
	pid=$(aws_task 1 pid)
	[ -n "$pid" ]
	ctl_write "$MNT/b2/ctl" "kill 1"
	[ "$(timeout 60 cat "$MNT/b2/runs/1/wait")" = "killed TERM" ]
	grep -q 'CodeBuild_20161006.StopBuild 200' "$EMU_DIR/requests.log"
	[ "$(aws_task 1 lastStatus)" = STOPPED ]
	[ "$(aws_task 1 stopCode)" = UserInitiated ]
	wait_for eval "! kill -0 $pid 2>/dev/null"
	[ "$(obj_size b2/b.txt)" = 7 ]
	[ -z "$(obj_size b2/n.txt)" ]
	ctl_write "$MNT/b2/ctl" 'exec sleep 300'
	run ctl_write "$MNT/b2/ctl" "kill 2 HUP"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: CodeBuild StopBuild stops the build"* ]]
	ctl_write "$MNT/b2/ctl" "kill 2 KILL"
	[ "$(timeout 60 cat "$MNT/b2/runs/2/wait")" = "killed TERM" ]
}

@test "aws codebuild: exec without a project names it; project= and runner= on new; image= is imageOverride" {
	sfs_unmount
	sfs_mount --log-level 3 -o aws.bucket=bkt -o aws.runner=codebuild
	grep -q '^reason ready: .*runs: CodeBuild at .*no aws.codebuild_project: exec needs project=' "$MNT/providers/aws/status"
	ctl_write "$MNT/ctl" "new m1 provider=aws"
	echo data >"$MNT/m1/workspace/f"
	run ctl_write "$MNT/m1/ctl" "exec true"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: exec with runner=codebuild needs the CodeBuild project it lacks: project (new project= or aws.codebuild_project)"* ]]
	[ ! -e "$MNT/m1/runs/1" ]
	[ "$(obj_size m1/f)" = 5 ]
	run ctl_write "$MNT/ctl" "new m2 provider=aws runner=lambda"
	[[ "$output" == *"error: aws: runner=lambda: expected ecs or codebuild"* ]]
	[ ! -e "$MNT/m2" ]
	# the sandbox's own settings, kept across a restart by a daemon whose runner is ecs
	ctl_write "$MNT/ctl" "new m3 provider=aws runner=codebuild project=proj image=example.com/other:2"
	sfs_unmount
	sfs_mount --log-level 3 -o aws.bucket=bkt
	ctl_write "$MNT/m3/ctl" "exec echo ok"
	[ "$(timeout 60 cat "$MNT/m3/runs/1/wait")" = "exited 0" ]
	[ "$(aws_task 1 image)" = example.com/other:2 ]
	# an unknown project is CodeBuild's error, named
	ctl_write "$MNT/ctl" "new m4 provider=aws runner=codebuild project=nope"
	run ctl_write "$MNT/m4/ctl" "exec true"
	[[ "$output" == *"error: aws: codebuild StartBuild: ResourceNotFoundException: Project cannot be found"* ]]
}

obj_size() { aws_obj "$1" size; }
