"""`virgo launch --persona <name> [--print-allowlist | --check] [-- <agent command...>]`."""

import argparse
import os
import shutil
import signal
import subprocess
import sys
from typing import Any, NamedTuple

from django.core.management.base import BaseCommand, CommandError, CommandParser

from personas import audit
from personas.commandline import ANY_PERSONA, EXIT_USAGE, persona_argument
from personas.models import AuditEvent, Persona
from runtime.stamp import ActiveStamp, StampUnavailable, load_active_stamp
from serving import sandbox as sandboxes
from serving.agent_clis import AgentCli, RefusedArgument, known_cli, known_names
from serving.launcher import (
    LaunchServer,
    allowlist,
    invocation,
    passed_names,
    prepare_agent_home,
)
from virgo import auditing


class Plan(NamedTuple):
    """What a launch starts, decided before anything is started."""

    persona: Persona
    stamp: ActiveStamp
    command: list[str]
    cli: AgentCli | None
    sandbox: sandboxes.Sandbox | None


class Command(BaseCommand):
    help = (
        "Start an agent CLI confined to a persona's stamped tools. It runs in a sandbox where the "
        "installation's secrets are not visible, with its MCP server outside."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--persona", required=True, help="The persona: its id, uuid or unambiguous name."
        )
        parser.add_argument(
            "--print-allowlist",
            action="store_true",
            help="Print mcp__virgo__<tool>,... for the stamp's tools and exit.",
        )
        parser.add_argument(
            "--check",
            action="store_true",
            help="Print what the agent would get (tools, settings, sandbox) without starting it.",
        )
        parser.add_argument(
            "--no-sandbox",
            action="store_true",
            help="Run the agent without the OS sandbox: it can read whatever your user can, the "
            "installation's secrets included. Warned and audited.",
        )
        parser.add_argument(
            "--unconfined",
            action="store_true",
            help="Run an agent command Virgo does not know how to confine: its own tools and "
            "settings stay. Warned and audited.",
        )
        parser.add_argument(
            "agent_command",
            nargs=argparse.REMAINDER,
            help="after --: the agent CLI and its arguments, e.g. -- claude -p 'work the queue'",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        command = [] if options["print_allowlist"] else self._agent_command(options)
        persona = persona_argument(options["persona"], among=ANY_PERSONA, flag="--persona")
        try:
            stamp = load_active_stamp(persona)
        except StampUnavailable as exc:
            raise CommandError(f"refusing to launch persona {persona.uuid}: {exc.reason}") from None
        if options["print_allowlist"]:
            self.stdout.write(allowlist(stamp))
            return
        cli = self._confinement(command, unconfined=options["unconfined"])
        sandbox = self._sandbox(persona, stamp, command[0], cli, disabled=options["no_sandbox"])
        plan = Plan(persona, stamp, command, cli, sandbox)
        if options["check"]:
            self._print_check(plan)
            return
        self._warn_and_audit(plan)
        sys.exit(self._run(plan))

    @staticmethod
    def _agent_command(options: dict[str, Any]) -> list[str]:
        command = list(options["agent_command"])
        if command[:1] == ["--"]:
            command = command[1:]
        if not command:
            raise CommandError(
                "give the agent command after --, e.g. launch --persona X -- claude",
                returncode=EXIT_USAGE,
            )
        # Found first, before the database is asked or any file written: a missing program
        # would otherwise fail only inside the sandbox (VX-OPS-7).
        found = shutil.which(command[0])
        if found is None:
            raise CommandError(
                f"agent command {command[0]!r} not found on PATH: install it, or give its full "
                "path after --",
                returncode=EXIT_USAGE,
            )
        # Absolute: the agent starts in the persona's workspace (or its own home), not here.
        return [os.path.abspath(found), *command[1:]]

    @staticmethod
    def _confinement(command: list[str], *, unconfined: bool) -> AgentCli | None:
        cli = known_cli(command[0])
        if cli is None:
            if unconfined:
                return None
            raise CommandError(
                f"{os.path.basename(command[0])} is not an agent CLI Virgo can confine (it "
                f"knows {known_names()}): its own tools would reach past the stamp; pass "
                "--unconfined to run it anyway",
                returncode=EXIT_USAGE,
            )
        try:
            cli.check_arguments(command[1:])
        except RefusedArgument as refused:
            raise CommandError(f"refusing to launch {cli.title}: {refused}", returncode=2) from None
        # Refused here, before --check prints or anything starts, as an argument is.
        passed_names(cli)
        return cli

    @staticmethod
    def _sandbox(
        persona: Persona, stamp: ActiveStamp, program: str, cli: AgentCli | None, *, disabled: bool
    ) -> sandboxes.Sandbox | None:
        if disabled:
            return None
        workspace = stamp.workspace_root()
        workspace.mkdir(mode=0o700, parents=True, exist_ok=True)
        home = prepare_agent_home(persona)
        try:
            sandboxes.require_bwrap()
            return sandboxes.build(
                workspace=workspace,
                agent_home=home,
                program=program,
                works_in=cli.works_in if cli is not None else "workspace",
            )
        except sandboxes.SandboxUnavailable as exc:
            raise CommandError(
                f"refusing to launch without the sandbox: {exc.reason}; or pass --no-sandbox "
                "to run the agent where it can read the installation's secrets"
            ) from None

    def _warn_and_audit(self, plan: Plan) -> None:
        persona = plan.persona
        given_up = []
        if plan.cli is None:
            given_up.append("unconfined: the agent keeps its own tools and settings")
        if plan.sandbox is None:
            given_up.append("no sandbox: the agent can read the installation's secrets")
        if not given_up:
            return
        for warning in given_up:
            self.stderr.write(f"warning: launching {persona.name} {warning}")
        audit.record(
            AuditEvent.Kind.UNCONFINED_LAUNCH,
            persona=persona,
            data={
                "persona_name": persona.name,
                "program": os.path.basename(plan.command[0]),
                "confined": plan.cli is not None,
                "sandboxed": plan.sandbox is not None,
            },
            channel=auditing.CLI,
        )

    def _print_check(self, plan: Plan) -> None:
        persona, stamp, command, cli, sandbox = plan
        tools = allowlist(stamp, cli).split(",")
        lines = [
            f"persona: {persona.name} ({persona.uuid}), generation {stamp.generation}",
            f"agent: {cli.title if cli else os.path.basename(command[0])} "
            f"({'confined' if cli else 'unconfined: its own tools and settings stay'})",
            f"tools: {len(tools)}, exactly the stamp's: {', '.join(tools)}",
        ]
        if cli is not None:
            lines += cli.settings_described()
        lines.append(
            "MCP server: outside the agent, in this launcher, on 127.0.0.1 with a token made "
            "for the launch"
        )
        if sandbox is None:
            lines.append("sandbox: none (--no-sandbox): the agent can read whatever you can")
        else:
            lines += [
                f"sandbox: {sandboxes.version()}; everything else read-only",
                f"writable: {', '.join(map(str, sandbox.writable))}",
                f"starts in: {sandbox.workdir}",
                f"hidden: {', '.join(map(str, sandbox.hidden))}",
            ]
        self.stdout.write("\n".join(lines))

    def _run(self, plan: Plan) -> int:
        persona, stamp, command, cli, sandbox = plan
        server = LaunchServer(persona)
        server.start()
        launch = None
        try:
            launch = invocation(
                persona,
                stamp,
                command,
                cli=cli,
                sandbox=sandbox,
                server_url=server.url,
                token=server.token,
            )
            self.stdout.flush()
            # The terminal's Ctrl-C is the agent's to handle; the launcher outlives it, to stop
            # the server after the agent is gone.
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
            try:
                process = subprocess.Popen(launch.argv, env=launch.env, cwd=launch.workdir)
                signal.signal(signal.SIGTERM, lambda *_: process.terminate())
                returncode = process.wait()
            finally:
                signal.signal(signal.SIGINT, previous)
        finally:
            server.stop()
            if launch is not None:
                for written in launch.written:
                    written.unlink(missing_ok=True)
        return 128 - returncode if returncode < 0 else returncode
