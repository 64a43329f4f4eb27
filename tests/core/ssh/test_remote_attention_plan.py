"""How a provider's ``prepare`` is run against an SSH host, against the test sshd.

On a host ``prepare`` runs in rounds, each pass seeing more of the host's files;
a command it runs is made only in a pass before the last. A provider may run a
command its reads chose: here, as Hermes's attention does, the interpreter named
by the shebang of a program found on the host's login PATH (two rounds of reads,
then the execution).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from clanker.api import Clanker
from clanker.attention.capability import AttachmentContext, AttachmentPlan, Declined
from clanker.environment.ssh import SshEnvironment
from clanker.execution import CommandRequest, CommandResult
from clanker.launch.attachments import LaunchState
from clanker.launch.attention import SSH_ATTENTION, RemoteAttentionAttachment
from clanker.launch.blocking import blocking
from tests.sshd import Sshd, chown_to

_PROBE = "#!/bin/sh\necho \"ran $1\"\n"


class _ReadsThenRuns:
    """An attention capability whose ``prepare`` runs what two rounds of reads found."""

    interpreter = None
    resume_preserves_session_id = False

    def __init__(self) -> None:
        setattr(self, SSH_ATTENTION, True)
        self.passes = 0

    def prepare(self, context: AttachmentContext) -> AttachmentPlan | Declined:
        self.passes += 1
        found = context.files.which("clanker-probe", context.env.get("PATH"))  # round one
        if found is None:
            return Declined(reason="no probe on the host")
        head = context.files.read_small(found, 256) or b""  # round two
        if not head.startswith(b"#!"):
            return Declined(reason="the probe was not read")
        shell = head.split(b"\n", 1)[0][2:].decode().strip()
        result = context.run(CommandRequest(command="env", args=(shell, found, "here")))
        return AttachmentPlan(env={"ANSWER": f"{result.exit_code}:{result.stdout.strip()}"})


def test_a_command_chosen_by_the_last_round_of_reads_runs_once(
    sshd: Sshd, remote_bin: Path, tmp_path: Path
) -> None:
    probe = remote_bin / "clanker-probe"
    probe.write_text(_PROBE)
    probe.chmod(0o755)
    chown_to(probe, sshd.user)
    clanker = Clanker(ssh_config_file=sshd.config_file)
    clanker.add_host("box", sshd.alias)
    environment: SshEnvironment = asyncio.run(clanker.connect_host("box"))
    try:
        def run(request: CommandRequest) -> CommandResult:
            return blocking(environment.executor.run(request))

        capability = _ReadsThenRuns()
        attachment = RemoteAttentionAttachment(
            "probe", capability, cwd="/tmp", environment=environment, run=run)
        staging = tmp_path / "staging"
        staging.mkdir(mode=0o700)
        before = environment.executor.executions
        _, written, plan = attachment._plan(
            LaunchState(argv=("probe",), env=dict(environment.environ)), {}, staging)
        executions = environment.executor.executions - before
    finally:
        environment.close()
    assert isinstance(plan, AttachmentPlan), plan
    assert plan.env == {"ANSWER": "0:ran here"}
    assert written == []
    # Two rounds of reads and the command, which the third pass ran and no pass
    # ran again.
    assert capability.passes == 3
    assert executions == 3
