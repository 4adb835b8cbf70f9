"""Every ``feedbackgym`` command lives in a ``cli`` module named after it."""

from __future__ import annotations

import argparse

from feedbackgym.cli import COMMANDS, _parser


def test_every_command_has_a_module_named_after_it():
    parser = _parser()
    (commands,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = set(commands.choices)
    modules = {m.__name__.rsplit(".", 1)[1] for m in COMMANDS}
    assert {name.replace("-", "_") for name in names} == modules
    for module in COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        module.add_commands(sub)
        assert [n.replace("-", "_") for n in sub.choices] == [module.__name__.rsplit(".", 1)[1]]
