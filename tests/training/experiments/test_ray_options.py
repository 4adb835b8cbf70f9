"""``compare --backend ray``'s flags and resources, without a cluster."""

import argparse
import subprocess
import sys

import pytest

from feedbackgym.cli import main


def test_ray_flags_need_the_ray_backend(capsys):
    assert main(["compare", "--quick", "--address", "auto", "--shared-out"]) == 2
    assert "--address, --shared-out need --backend ray" in capsys.readouterr().err


def test_ship_every_reaches_the_ray_options_and_is_checked(capsys):
    pytest.importorskip("ray")
    from feedbackgym.cli.compare import _add_arguments, _ray_options
    from feedbackgym.training.experiments.ray_runs import RayOptions

    parser = argparse.ArgumentParser()
    _add_arguments(parser)
    args = parser.parse_args(["--backend", "ray", "--ship-every", "0"])
    assert _ray_options(args).ship_every_s == 0
    assert _ray_options(parser.parse_args(["--backend", "ray"])).ship_every_s == 2.0
    assert main(["compare", "--quick", "--ship-every", "3"]) == 2
    assert "--ship-every needs --backend ray" in capsys.readouterr().err
    assert main(["compare", "--quick", "--backend", "ray", "--ship-every", "-1"]) == 2
    assert "ship_every_s must be finite and >= 0, got -1.0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="ship_every_s"):
        RayOptions(ship_every_s=float("nan"))


def test_a_run_ships_its_first_round_then_every_few_seconds_and_at_its_end():
    pytest.importorskip("ray")
    from feedbackgym.training.experiments.ray_runs import Shipments

    sent, now = [], [0.0]
    shipments = Shipments(lambda steps, ship: sent.append((steps, ship)), 2.0, lambda: now[0])
    for now[0], steps in [(10.0, 64), (11.0, 128), (11.9, 192), (12.0, 256), (13.0, 320)]:
        shipments.after_round(steps)
    shipments.last()
    assert sent == [(64, True), (128, False), (192, False), (256, True), (320, False), (320, True)]
    every_round = Shipments(lambda steps, ship: sent.append((steps, ship)), 0.0, lambda: 0.0)
    sent.clear()
    every_round.after_round(1)
    every_round.after_round(2)
    assert sent == [(1, True), (2, True)]


def test_without_ray_the_backend_names_the_extra():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from feedbackgym.cli import main\n"
        "raise SystemExit(main(['compare', '--quick', '--backend', 'ray', '--steps', '1024']))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert 'ray is not installed, run `pip install "feedbackgym[ray]"`' in done.stderr


def test_each_run_asks_for_its_processes_and_gpus():
    pytest.importorskip("ray")
    from feedbackgym.training.common.run_settings import RunConfig
    from feedbackgym.training.experiments.ray_runs import RayOptions

    def run(**settings):
        return RunConfig("feedbackgym/OpsIncidentEasy-v0", "sparse", 0, 1024, "x", **settings)

    assert RayOptions().resources(run()) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert RayOptions().resources(run(env_workers=1, overlap_update=True, device="cuda")) == {
        "num_cpus": 3.0,
        "num_gpus": 1.0,
    }
    assert RayOptions(cpus_per_run=2, gpus_per_run=0.25).resources(run()) == {
        "num_cpus": 2.0,
        "num_gpus": 0.25,
    }
    with pytest.raises(ValueError, match="cpus_per_run"):
        RayOptions(cpus_per_run=0)
