"""Library logging: silent unless the application configures it, ``logging`` imported on
first use, and the CLI's one line for what asyncio logs. Each case runs in a fresh
interpreter, where what has been imported and what reaches stderr are its own."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, check=False, timeout=120)


def test_a_logger_imports_logging_when_first_used_and_stays_silent() -> None:
    done = _python("""
        import json, sys
        from clanker._logging import get_logger

        log = get_logger("clanker.example")
        before = "logging" in sys.modules
        log.warning("nobody configured %s", "logging")
        print(json.dumps({"before": before, "after": "logging" in sys.modules,
                          "name": log.name, "level": log.getEffectiveLevel()}))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"before": False, "after": True,
                                       "name": "clanker.example", "level": 30}
    # The package's null handler, not Python's last-resort one, took the warning.
    assert done.stderr == ""


def test_an_application_handler_sees_the_record_with_its_caller() -> None:
    done = _python("""
        import logging, sys
        logging.basicConfig(level=logging.DEBUG, stream=sys.stdout,
                            format="%(name)s %(levelname)s %(funcName)s %(message)s")
        from clanker._logging import get_logger

        def where_it_was_logged():
            get_logger("clanker.example").info("seen %d", 1)

        where_it_was_logged()
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "clanker.example INFO where_it_was_logged seen 1\n"


def test_the_cli_turns_what_asyncio_logs_into_one_line() -> None:
    # An exception no one retrieved is logged by asyncio when its task is collected.
    done = _python("""
        import asyncio, gc
        import clanker.cli
        from clanker.cli.common import run_async

        clanker.cli._Quiet.on = True  # as main() sets it outside debug mode

        async def fails():
            raise ValueError("lost")

        async def drops_a_failed_task():
            task = asyncio.ensure_future(fails())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            del task
            gc.collect()

        run_async(drops_a_failed_task())
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "clanker: internal warning: Task exception was never retrieved\n"


def test_a_command_that_may_run_a_loop_of_its_own_is_quieted_when_loaded() -> None:
    # `launch` runs the library's loops (its `blocking`) outside `run_async`; `sessions`
    # runs every loop through `run_async`, which quiets asyncio itself.
    done = _python("""
        import json, sys
        import click
        import clanker.cli

        clanker.cli._Quiet.on = True
        context = click.Context(clanker.cli.cli)
        clanker.cli.cli.get_command(context, "sessions")
        after_sessions = "logging" in sys.modules
        clanker.cli.cli.get_command(context, "launch")
        import logging
        handlers = [type(h).__name__ for h in logging.getLogger("asyncio").handlers]
        print(json.dumps({"after_sessions": after_sessions, "handlers": handlers}))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"after_sessions": False, "handlers": ["OneLine"]}
